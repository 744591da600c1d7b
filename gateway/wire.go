package gateway

import (
	"bytes"
	"errors"
	"fmt"
	queengate "github.com/queengate/queengate"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/micro"
	"github.com/nats-io/nuid"

	"github.com/queengate/queengate/ingest"
	"github.com/queengate/queengate/model"
)

func badInput(format string, args ...any) *queengate.Error {
	return &queengate.Error{Code: queengate.CodeBadRequest, Message: fmt.Sprintf(format, args...)}
}

// errorBody is the JSON body of an error reply: {"error":{"code":…,"message":…}}.
func errorBody(e *queengate.Error) []byte {
	b := []byte(`{"error":{"code":`)
	b = strconv.AppendInt(b, int64(e.Code), 10)
	b = append(b, `,"message":`...)
	b = appendJSONString(b, e.Message)
	return append(b, "}}"...)
}

// maxErrorText bounds an error message on the wire: it may quote input
// (a field name, a value), and is sent twice (header and body), escaped.
// At most 6 KiB of body and 4 KiB of header: it fits any max payload a
// gateway starts with.
const maxErrorText = 1 << 10

// errorMsg is the error answer on subject: the micro error headers and
// the JSON body.
func errorMsg(e *queengate.Error, subject string) *nats.Msg {
	if len(e.Message) > maxErrorText {
		e = &queengate.Error{Code: e.Code, Message: cutText(e.Message, maxErrorText)}
	}
	return &nats.Msg{Subject: subject, Data: errorBody(e), Header: nats.Header{
		micro.ErrorHeader:     []string{headerValue(e.Message)},
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

// probeQueue is the routing probe's queue token.
const probeQueue = queengate.ProbeQueue

// parsePushSubject splits <prefix>.push.<queue>[.<partition>], and the
// routing form NATS maps it onto, <prefix>.shard.<k>.<queue>[.<partition>].
// probe reports the routing probe's own push, which is answered by nobody.
func parsePushSubject(prefix, subject string) (queue, partition string, probe bool, err *queengate.Error) {
	subjects := queengate.Subjects{Prefix: prefix}
	rest, ok := strings.CutPrefix(subject, subjects.Verb(queengate.APIPush)+".")
	if !ok {
		shard, found := strings.CutPrefix(subject, subjects.Verb(queengate.APIShard)+".")
		if _, r, cut := strings.Cut(shard, "."); found && cut {
			rest, ok = r, true
		}
	}
	tokens := strings.Split(rest, ".")
	switch {
	case !ok || len(tokens) > 2: // e.g. the bare <prefix>.push, which names no queue
		return "", "", false, badInput("subject %q must be %s.<queue> or %s", subject, subjects.Verb(queengate.APIPush), queengate.APIPush.Template(prefix))
	case len(tokens) == 1:
		queue, partition = tokens[0], queengate.DefaultPartition
	default:
		queue, partition = tokens[0], tokens[1]
	}
	if queue == probeQueue {
		return "", "", true, nil
	}
	return queue, partition, false, validPlace(queue, partition)
}

// decodePush decodes a push body: one message object or an array of 1 to
// maxBatch of them. A message has transactionId and data only: an unknown
// or repeated field is a 400 (a misspelt transactionId would otherwise
// silently turn deduplication off). A missing or null transactionId is
// minted.
func decodePush(body []byte, maxBatch int) ([]ingest.Message, *queengate.Error) {
	raw, werr := scanMessages(body, maxBatch)
	if werr != nil {
		return nil, werr
	}
	msgs := make([]ingest.Message, len(raw))
	for i := range raw {
		if werr := raw[i].check(i); werr != nil {
			return nil, werr
		}
		msgs[i] = ingest.Message{TxnID: raw[i].txnIDOrMint(), Data: raw[i].data}
	}
	return msgs, nil
}

// notMessages is the answer to a push body that is neither a message
// object nor an array of them.
const notMessages = "body must be a JSON message object or an array of them"

// scanMessages runs scanPush and words its failures for the wire.
func scanMessages(body []byte, maxBatch int, extra ...string) ([]rawMessage, *queengate.Error) {
	raw, count, err := scanPush(body, maxBatch, extra...)
	switch {
	case count > maxBatch:
		return nil, &queengate.Error{Code: queengate.CodeTooLarge, Message: fmt.Sprintf("more than %d messages in one request; at most %d", maxBatch, maxBatch)}
	case errors.Is(err, errNotMessages):
		return nil, badInput(notMessages)
	case errors.Is(err, errUnstorable):
		return nil, badInput("%v", err)
	case err != nil && len(bytes.TrimSpace(body)) == 0:
		return nil, badInput("empty body: send a JSON message object or an array of them")
	case err != nil:
		return nil, badInput("malformed JSON: %v", err)
	case len(raw) == 0:
		return nil, badInput("empty array: send 1 to %d messages", maxBatch)
	}
	return raw, nil
}

// check reports what is wrong with message i, if anything.
func (m *rawMessage) check(i int) *queengate.Error {
	switch {
	case m.notObj:
		return badInput("message %d is not a JSON object", i)
	case m.bad != "":
		return badInput("message %d: %s", i, m.bad)
	case m.txnIDBad != "":
		return badInput("message %d: transactionId %s", i, m.txnIDBad)
	case !m.txnIDSet:
		return nil
	case len(m.txnID) == 0 || len(m.txnID) > queengate.MaxTxnIDBytes:
		return badInput("message %d: transactionId must be 1-%d bytes, got %d", i, queengate.MaxTxnIDBytes, len(m.txnID))
	}
	return nil
}

// txnIDOrMint is the message's transactionId, or a fresh one when the
// producer sent none: such a message is never a duplicate of anything.
func (m *rawMessage) txnIDOrMint() string {
	if !m.txnIDSet {
		return "qg-" + nuid.Next()
	}
	return string(m.txnID)
}

// replyEntryRoom is the most one entry of a push answer takes besides its
// transactionId: every field at its longest, and an error text of up to
// minErrorRoom bytes.
const (
	minErrorRoom   = 96
	replyEntryRoom = 192 + minErrorRoom
)

// checkPushSizes refuses, before anything is stored, a push that could
// not be answered or delivered on a connection of maxPayload bytes: a
// message whose data one pop or read answer could never carry, or more
// messages than one answer can name.
func checkPushSizes(msgs []ingest.Message, maxPayload int64) *queengate.Error {
	answer := int64(2)
	for i := range msgs {
		if werr := checkDataSize(msgs[i].Data, maxPayload); werr != nil {
			werr.Message = fmt.Sprintf("message %d: %s", i, werr.Message)
			return werr
		}
		answer += replyEntryRoom + int64(jsonStringLen(msgs[i].TxnID))
	}
	if answer > maxPayload {
		return &queengate.Error{Code: queengate.CodeTooLarge, Message: fmt.Sprintf(
			"the answer to %d messages could exceed the NATS max payload (%d bytes): send fewer messages per request", len(msgs), maxPayload)}
	}
	return nil
}

// checkDataSize refuses data larger than a message may carry on a
// connection of maxPayload bytes (queengate.MaxDataBytes).
func checkDataSize(data []byte, maxPayload int64) *queengate.Error {
	if limit := queengate.MaxDataBytes(maxPayload); int64(len(data)) > limit {
		return &queengate.Error{Code: queengate.CodeTooLarge, Message: fmt.Sprintf(
			"data is %d bytes, over the %d-byte limit: one pop or read answer could never carry it (the NATS max payload, %d bytes, less %d for the rest of the answer)",
			len(data), limit, maxPayload, queengate.DeliveryReserve)}
	}
	return nil
}

// encodeReply writes the per-message answer array (docs/protocol.md,
// "Answers"), within limit bytes: when the failed messages' error texts
// would not fit, each is cut to an equal share of the room left (push
// requests are checked by checkPushSizes to leave enough).
func encodeReply(msgs []ingest.Message, results []ingest.Result, limit int) []byte {
	b := appendReply(nil, msgs, results, -1)
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
func appendReply(b []byte, msgs []ingest.Message, results []ingest.Result, errRoom int) []byte {
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
		b = appendJSONString(b, msgs[i].TxnID)
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
			b = appendJSONString(b, cutJSON(msg, errRoom))
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

// jsonStringLen is the length of s as appendJSONString writes it.
func jsonStringLen(s string) int {
	n := 2
	for i := 0; i < len(s); i++ {
		n += escapedLen(s[i])
	}
	return n
}

// marshalledStringBound bounds the length of s as encoding/json writes
// it: as appendJSONString does, but with <, > and & as \u00XX, and
// U+2028 and U+2029 as six bytes for their three (counted at their lead
// byte, which a few other characters share: a bound, not a length).
func marshalledStringBound(s string) int64 {
	n := int64(jsonStringLen(s))
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case '<', '>', '&':
			n += 5
		case 0xe2:
			n += 3
		}
	}
	return n
}

// escapedLen is how many bytes appendJSONString writes for byte c.
func escapedLen(c byte) int {
	switch {
	case c >= 0x20 && c != '"' && c != '\\':
		return 1
	case c == '"', c == '\\', c == '\n', c == '\r', c == '\t':
		return 2
	}
	return 6
}

// cutJSON cuts s so that appendJSONString writes at most room bytes of
// it, on a character boundary, marking a cut with "…"; room -1 keeps s.
func cutJSON(s string, room int) string {
	if room < 0 || jsonStringLen(s) <= room {
		return s
	}
	const mark = "…"
	n, end := 2+len(mark), 0
	for end < len(s) && n+escapedLen(s[end]) <= room {
		n += escapedLen(s[end])
		end++
	}
	for end > 0 && end < len(s) && !utf8.RuneStart(s[end]) {
		end--
	}
	return s[:end] + mark
}

// appendJSONString appends s as a JSON string literal.
func appendJSONString(b []byte, s string) []byte {
	const hex = "0123456789abcdef"
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); i++ {
		c := s[i]
		if escapedLen(c) == 1 {
			continue
		}
		b = append(b, s[start:i]...)
		switch c {
		case '"', '\\':
			b = append(b, '\\', c)
		case '\n':
			b = append(b, '\\', 'n')
		case '\r':
			b = append(b, '\\', 'r')
		case '\t':
			b = append(b, '\\', 't')
		default:
			b = append(b, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xf])
		}
		start = i + 1
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}
