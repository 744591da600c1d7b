package wire

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/nats-io/nats.go"

	queengate "github.com/queengate/queengate"
	"github.com/queengate/queengate/model"
)

// A JetStream-compatible publish (docs/protocol.md, "JetStream publish")
// is a NATS message as every JetStream client library sends it: the data
// as the body, the dedup key in Nats-Msg-Id, and expectations in
// Nats-Expected-* headers; its answer is JetStream's PubAck, or
// JetStream's error answer, so the libraries raise their usual errors.

// The JetStream headers a publish may carry.
const (
	HeaderMsgID          = "Nats-Msg-Id"
	HeaderExpectedStream = "Nats-Expected-Stream"
)

// JetStream's error codes (err_code) queengate answers with: a client
// library may tell them apart, as it does JetStream's.
const (
	jsBadRequest      = 10003 // JSBadRequestErr
	jsUnavailable     = 10008 // JSClusterNotAvailErr: try again
	jsTooLarge        = 10054 // JSStreamMessageExceedsMaximumErr
	jsStreamMismatch  = 10060 // JSStreamMismatchErr: Nats-Expected-Stream
	jsPayloadConflict = 10003
)

// JetStreamError is a refused publish, in JetStream's terms.
type JetStreamError struct {
	Code, ErrCode int
	Description   string
}

// FromError words a queengate error as JetStream's.
func FromError(e *queengate.Error) *JetStreamError {
	p := &JetStreamError{Code: e.Code, ErrCode: jsBadRequest, Description: e.Text}
	switch {
	case e.Code == queengate.CodeTooLarge:
		p.ErrCode = jsTooLarge
	case e.Code >= 500:
		p.ErrCode = jsUnavailable
	}
	return p
}

// DecodeJetStream reads a publish to queue's partition: its one message,
// with data JSON when the body is one JSON value (stored as it is) and
// binary otherwise, the Nats-Msg-Id as transactionId (minted when
// absent: such a message is never a duplicate), and the other headers as
// the message's.
func DecodeJetStream(body []byte, header nats.Header, queue string, maxPayload int64) (model.Incoming, *JetStreamError) {
	var msg model.Incoming
	all := NATSHeaders(header)
	headers := all[:0] // the message's: all but JetStream's own, read here
	for _, h := range all {
		if !reserved(h.Name) {
			headers = append(headers, h)
			continue
		}
		if perr := readJetStreamHeader(h, queue, &msg); perr != nil {
			return msg, perr
		}
	}
	if msg.TxnID == "" {
		msg.TxnID = mintTxnID()
	}
	if why := CheckHeaders(headers); why != "" {
		return msg, &JetStreamError{Code: queengate.CodeBadRequest, ErrCode: jsBadRequest, Description: why}
	}
	binary := !isStorableJSON(body)
	msg.Data = body
	if binary {
		msg.Data = QuoteBase64(body)
	}
	msg.Meta = model.AppendMeta(nil, headers, binary)
	if werr := CheckDataSize(msg.Data, msg.Meta, maxPayload); werr != nil {
		return msg, FromError(werr)
	}
	return msg, nil
}

// readJetStreamHeader takes a Nats-* header: the ones with a meaning here
// are honoured, every other refused, so that nothing a publisher asked
// for is silently not done.
func readJetStreamHeader(h model.Header, queue string, msg *model.Incoming) *JetStreamError {
	bad := func(format string, args ...any) *JetStreamError {
		return &JetStreamError{Code: queengate.CodeBadRequest, ErrCode: jsBadRequest, Description: fmt.Sprintf(format, args...)}
	}
	if len(h.Values) != 1 {
		return bad("header %s is given %d times: give it once", h.Name, len(h.Values))
	}
	v := h.Values[0]
	switch {
	case strings.EqualFold(h.Name, HeaderMsgID):
		if v == "" || len(v) > queengate.MaxTxnIDBytes {
			return bad("%s (the transactionId) must be 1-%d bytes, got %d", HeaderMsgID, queengate.MaxTxnIDBytes, len(v))
		}
		msg.TxnID = v
	case strings.EqualFold(h.Name, HeaderExpectedStream):
		if v != queue {
			return &JetStreamError{Code: queengate.CodeBadRequest, ErrCode: jsStreamMismatch, Description: "expected stream does not match"}
		}
	default:
		return bad("header %s is not honoured here: a publish to queengate takes %s and %s (docs/protocol.md, \"JetStream publish\")",
			Clip(h.Name), HeaderMsgID, HeaderExpectedStream)
	}
	return nil
}

// isStorableJSON says whether body is one JSON value, without
// whitespace around it, that the log stores as JSON as it is.
func isStorableJSON(body []byte) bool {
	if len(body) == 0 || isSpace(body[0]) || isSpace(body[len(body)-1]) {
		return false
	}
	return CheckValue(body) == nil
}

func isSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }

// AppendPubAck appends JetStream's PubAck for a message of queue stored
// at offset (seq is offset+1: JetStream's sequences start at 1).
func AppendPubAck(b []byte, queue string, offset int64, duplicate bool) []byte {
	b = append(b, `{"stream":`...)
	b = AppendJSONString(b, queue)
	b = append(b, `,"seq":`...)
	b = strconv.AppendInt(b, offset+1, 10)
	if duplicate {
		b = append(b, `,"duplicate":true`...)
	}
	return append(b, '}')
}

// AppendJetStreamError appends JetStream's error answer to a publish.
func AppendJetStreamError(b []byte, queue string, e *JetStreamError) []byte {
	b = append(b, `{"error":{"code":`...)
	b = strconv.AppendInt(b, int64(e.Code), 10)
	b = append(b, `,"err_code":`...)
	b = strconv.AppendInt(b, int64(e.ErrCode), 10)
	b = append(b, `,"description":`...)
	b = AppendJSONString(b, cutText(e.Description, maxErrorText))
	b = append(b, `},"stream":`...)
	b = AppendJSONString(b, queue)
	return append(b, `,"seq":0}`...)
}

// JetStreamResult words a stored publish's result: nil with the PubAck's
// fields, or the error answer.
func JetStreamResult(r model.PushOutcome) *JetStreamError {
	if r.Status != model.StatusFailed {
		return nil
	}
	text := "not stored"
	if r.Err != nil {
		text = r.Err.Error()
	}
	if r.Conflict {
		return &JetStreamError{Code: queengate.CodeConflict, ErrCode: jsPayloadConflict, Description: text}
	}
	return &JetStreamError{Code: queengate.CodeUnavailable, ErrCode: jsUnavailable, Description: text}
}
