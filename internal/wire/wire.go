package wire

import (
	"bytes"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"unicode/utf8"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/micro"
	"github.com/nats-io/nuid"

	queengate "github.com/queengate/queengate"
	"github.com/queengate/queengate/model"
)

func BadInput(format string, args ...any) *queengate.Error {
	return &queengate.Error{Code: queengate.CodeBadRequest, Text: fmt.Sprintf(format, args...)}
}

// ErrorBody is the JSON body of an error reply: {"error":{"code":…,"message":…}}.
func ErrorBody(e *queengate.Error) []byte {
	b := []byte(`{"error":{"code":`)
	b = strconv.AppendInt(b, int64(e.Code), 10)
	b = append(b, `,"message":`...)
	b = AppendJSONString(b, e.Text)
	return append(b, "}}"...)
}

// maxErrorText bounds an error message on the wire: it may quote input
// (a field name, a value), and is sent twice (header and body), escaped.
// At most 6 KiB of body and 4 KiB of header: it fits any max payload a
// gateway starts with.
const maxErrorText = 1 << 10

// ErrorMsg is the error answer on subject: the micro error headers and
// the JSON body.
func ErrorMsg(e *queengate.Error, subject string) *nats.Msg {
	if len(e.Text) > maxErrorText {
		e = &queengate.Error{Code: e.Code, Text: cutText(e.Text, maxErrorText)}
	}
	return &nats.Msg{Subject: subject, Data: ErrorBody(e), Header: nats.Header{
		micro.ErrorHeader:     []string{headerValue(e.Text)},
		micro.ErrorCodeHeader: []string{strconv.Itoa(e.Code)},
	}}
}

// cutText cuts s to at most n bytes, on a character boundary, and marks
// the cut with "…".
func cutText(s string, n int) string {
	if len(s) <= n {
		return s
	}
	const mark = "…"
	end := max(n-len(mark), 0)
	for end > 0 && !utf8.RuneStart(s[end]) {
		end--
	}
	return s[:end] + mark
}

// headerValue makes s safe as a NATS header value: control bytes (a NUL,
// or a CR LF that would end the header) are written as \xNN escapes.
func headerValue(s string) string {
	clean := true
	for i := 0; i < len(s); i++ {
		if s[i] < 0x20 || s[i] == 0x7f {
			clean = false
			break
		}
	}
	if clean {
		return s
	}
	const hex = "0123456789abcdef"
	b := make([]byte, 0, len(s)+8)
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c == 0x7f {
			b = append(b, '\\', 'x', hex[c>>4], hex[c&0xf])
			continue
		}
		b = append(b, s[i])
	}
	return string(b)
}

// DecodePush decodes a push body: one message object or an array of 1 to
// maxBatch of them. A message has transactionId and data only: an unknown
// or repeated field is a 400 (a misspelt transactionId would otherwise
// silently turn deduplication off). A missing or null transactionId is
// minted.
func DecodePush(body []byte, maxBatch int) ([]model.Incoming, *queengate.Error) {
	scratch := rawScratch.Get().(*rawMessages)
	raw, werr := scanMessages(*scratch, body, maxBatch)
	if werr != nil {
		scratch.release(cap(*scratch)) // how far a failed scan wrote is not known
		return nil, werr
	}
	*scratch = raw
	defer scratch.release(len(raw))
	msgs := make([]model.Incoming, len(raw))
	var last *RawMessage // the last message with meta: its neighbours usually repeat it
	for i := range raw {
		m := &raw[i]
		if werr := m.Check(i); werr != nil {
			return nil, werr
		}
		msgs[i] = model.Incoming{TxnID: m.TxnIDOrMint(), Data: m.Data}
		if m.Headers == nil && m.DataEncoding == nil {
			continue
		}
		if last != nil && sameMeta(last, m) {
			// The same headers and encoding as the message before:
			// checked once, and the meta shared (no reader changes it).
			msgs[i].Meta = msgs[last.index].Meta
			if model.IsBinary(msgs[i].Meta) {
				data, why := binaryData(m.Data)
				if why != "" {
					return nil, BadInput("message %d: %s", i, why)
				}
				msgs[i].Data = data
			}
			continue
		}
		data, meta, werr := m.Payload(i)
		if werr != nil {
			return nil, werr
		}
		msgs[i].Data, msgs[i].Meta = data, meta
		m.index, last = i, m
	}
	return msgs, nil
}

// rawScratch keeps the RawMessages DecodePush scans into for the next
// push: they last only until it has made the messages of them.
var rawScratch = sync.Pool{New: func() any { return new(rawMessages) }}

// maxScratch is the most RawMessages a scratch kept in rawScratch holds
// (about 200 KiB): a push of more leaves its scratch to the collector.
const maxScratch = queengate.DefaultMaxBatch

type rawMessages []RawMessage

// release clears the scratch's first used RawMessages (its slices of the
// body it scanned; those past them are still clear) and gives it back to
// rawScratch.
func (r *rawMessages) release(used int) {
	if cap(*r) > maxScratch {
		return
	}
	clear((*r)[:used])
	*r = (*r)[:0]
	rawScratch.Put(r)
}

// notMessages is the answer to a push body that is neither a message
// object nor an array of them.
const notMessages = "body must be a JSON message object or an array of them"

// scanMessages runs scanPush and words its failures for the wire.
func scanMessages(dst []RawMessage, body []byte, maxBatch int, extra ...string) ([]RawMessage, *queengate.Error) {
	raw, count, err := scanPush(dst, body, maxBatch, extra...)
	switch {
	case count > maxBatch:
		return nil, &queengate.Error{Code: queengate.CodeTooLarge, Text: fmt.Sprintf("more than %d messages in one request; at most %d", maxBatch, maxBatch)}
	case errors.Is(err, errNotMessages):
		return nil, BadInput(notMessages)
	case errors.Is(err, ErrUnstorable):
		return nil, BadInput("%v", err)
	case err != nil && len(bytes.TrimSpace(body)) == 0:
		return nil, BadInput("empty body: send a JSON message object or an array of them")
	case err != nil:
		return nil, BadInput("malformed JSON: %v", err)
	case len(raw) == 0:
		return nil, BadInput("empty array: send 1 to %d messages", maxBatch)
	}
	return raw, nil
}

// Check reports what is wrong with message i, if anything.
func (m *RawMessage) Check(i int) *queengate.Error {
	switch {
	case m.notObj:
		return BadInput("message %d is not a JSON object", i)
	case m.bad != "":
		return BadInput("message %d: %s", i, m.bad)
	case m.txnIDBad != "":
		return BadInput("message %d: transactionId %s", i, m.txnIDBad)
	case !m.TxnIDSet:
		return nil
	case len(m.TxnID) == 0 || len(m.TxnID) > queengate.MaxTxnIDBytes:
		return BadInput("message %d: transactionId must be 1-%d bytes, got %d", i, queengate.MaxTxnIDBytes, len(m.TxnID))
	}
	return nil
}

// TxnIDOrMint is the message's transactionId, or a fresh one when the
// producer sent none: such a message is never a duplicate of anything.
func (m *RawMessage) TxnIDOrMint() string {
	if !m.TxnIDSet {
		return mintTxnID()
	}
	return string(m.TxnID)
}

// mintTxnID is a fresh transactionId, for a message sent without one.
func mintTxnID() string { return "qg-" + nuid.Next() }

// replyEntryRoom is the most one entry of a push answer takes besides its
// transactionId: every field at its longest, and an error text of up to
// minErrorRoom bytes.
const (
	minErrorRoom   = 96
	replyEntryRoom = 192 + minErrorRoom
)

// CheckPushSizes refuses, before anything is stored, a push that could
// not be answered or delivered on a connection of maxPayload bytes: a
// message whose data one pop or read answer could never carry, or more
// messages than one answer can name.
func CheckPushSizes(msgs []model.Incoming, maxPayload int64) *queengate.Error {
	answer := int64(2)
	for i := range msgs {
		if werr := CheckDataSize(msgs[i].Data, msgs[i].Meta, maxPayload); werr != nil {
			werr.Text = fmt.Sprintf("message %d: %s", i, werr.Text)
			return werr
		}
		answer += replyEntryRoom + int64(jsonStringLen(msgs[i].TxnID))
	}
	if answer > maxPayload {
		return &queengate.Error{Code: queengate.CodeTooLarge, Text: fmt.Sprintf(
			"the answer to %d messages could exceed the NATS max payload (%d bytes): send fewer messages per request", len(msgs), maxPayload)}
	}
	return nil
}

// CheckDataSize refuses data larger than a message may carry on a
// connection of maxPayload bytes (queengate.MaxDataBytes), its meta
// (headers) counted with it: both travel in every answer that gives it.
func CheckDataSize(data, meta []byte, maxPayload int64) *queengate.Error {
	size := int64(len(data) + len(meta))
	if limit := queengate.MaxDataBytes(maxPayload); size > limit {
		what := "data is"
		if meta != nil {
			what = "data and headers are"
		}
		return &queengate.Error{Code: queengate.CodeTooLarge, Text: fmt.Sprintf(
			"%s %d bytes, over the %d-byte limit: one pop or read answer could never carry it (the NATS max payload, %d bytes, less %d for the rest of the answer)",
			what, size, limit, maxPayload, queengate.DeliveryReserve)}
	}
	return nil
}

// EncodeReply writes the per-message answer array (docs/protocol.md,
// "Answers"), within limit bytes: when the failed messages' error texts
// would not fit, each is cut to an equal share of the room left (push
// requests are checked by CheckPushSizes to leave enough).
func EncodeReply(msgs []model.Incoming, results []model.PushOutcome, limit int) []byte {
	return AppendReply(nil, msgs, results, limit)
}

// AppendReply is EncodeReply written in dst's room, dst's contents
// dropped: the gateway reuses its answers' buffers.
func AppendReply(dst []byte, msgs []model.Incoming, results []model.PushOutcome, limit int) []byte {
	b := appendReply(dst[:0], msgs, results, -1)
	if len(b) <= limit {
		return b
	}
	failed := 0
	for _, r := range results {
		if r.Status == model.StatusFailed {
			failed++
		}
	}
	bare := len(appendReply(b[:0], msgs, results, 0))
	return appendReply(b[:0], msgs, results, max(limit-bare, 0)/max(failed, 1))
}

// appendReply appends the answer array, each error text cut to errRoom
// bytes of JSON string (-1: whole).
func appendReply(b []byte, msgs []model.Incoming, results []model.PushOutcome, errRoom int) []byte {
	if b == nil {
		size := 2
		for i := range msgs {
			size += 150 + len(msgs[i].TxnID)
		}
		b = make([]byte, 0, size)
	}
	b = append(b, '[')
	for i, r := range results {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, `{"index":`...)
		b = strconv.AppendInt(b, int64(i), 10)
		b = append(b, `,"transactionId":`...)
		b = AppendJSONString(b, msgs[i].TxnID)
		b = append(b, `,"status":"`...)
		b = append(b, r.Status.String()...)
		b = append(b, '"')
		if r.PartitionID != 0 {
			b = append(b, `,"partitionId":`...)
			b = strconv.AppendInt(b, r.PartitionID, 10)
		}
		if r.Conflict {
			b = append(b, `,"conflict":true`...)
		}
		if r.Status == model.StatusFailed {
			msg := "not stored"
			if r.Err != nil {
				msg = r.Err.Error()
			}
			b = append(b, `,"error":`...)
			b = AppendJSONString(b, cutJSON(msg, errRoom))
		} else {
			b = append(b, `,"messageId":"`...)
			b = model.AppendMessageID(b, r.PartitionID, r.Offset)
			b = append(b, `","offset":`...)
			b = strconv.AppendInt(b, r.Offset, 10)
		}
		b = append(b, '}')
	}
	return append(b, ']')
}

// DecodeOne decodes a body holding one push message (and the
// extra fields named) with the push decoder and its checks. what names
// it ("a timer") where it is refused as an array.
func DecodeOne(body []byte, what string, extra ...string) (*RawMessage, *queengate.Error) {
	switch {
	case Blank(body):
		return nil, BadInput("empty body: %s is one JSON message object", what)
	case bytes.HasPrefix(bytes.TrimSpace(body), []byte("[")):
		return nil, BadInput("%s is one message object, not an array", what)
	}
	raw, werr := scanMessages(nil, body, 1, extra...)
	if werr != nil && werr.Text == notMessages {
		werr.Text = what + " must be one JSON message object"
	}
	if werr == nil {
		werr = raw[0].Check(0)
	}
	if werr != nil {
		werr.Text = strings.Replace(werr.Text, "message 0: ", "", 1)
		return nil, werr
	}
	return &raw[0], nil
}
