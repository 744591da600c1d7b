package gateway

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
	"unicode/utf8"

	"github.com/nats-io/nuid"

	"github.com/queengate/queengate/ingest"
	"github.com/queengate/queengate/pgstore"
)

// DefaultPartition is used where a subject names no partition.
const DefaultPartition = "Default"

// MaxTxnIDBytes is the longest transactionId accepted.
const MaxTxnIDBytes = 256

// Wire error codes, PROTOCOL.md: the one table.
const (
	CodeBadInput    = 400
	CodeTooLarge    = 413
	CodeInternal    = 500
	CodeUnavailable = 503
)

// wireError is a request rejected as a whole.
type wireError struct {
	Code    int
	Message string
}

func (e *wireError) Error() string { return fmt.Sprintf("%d %s", e.Code, e.Message) }

func badInput(format string, args ...any) *wireError {
	return &wireError{Code: CodeBadInput, Message: fmt.Sprintf(format, args...)}
}

// body is the JSON body of an error reply: {"error":{"code":…,"message":…}}.
func (e *wireError) body() []byte {
	b := []byte(`{"error":{"code":`)
	b = strconv.AppendInt(b, int64(e.Code), 10)
	b = append(b, `,"message":`...)
	b = appendJSONString(b, e.Message)
	return append(b, "}}"...)
}

// ValidName reports whether s is a valid queue or partition name: 1–128
// bytes of [A-Za-z0-9_-], one NATS subject token.
func ValidName(s string) bool {
	if len(s) == 0 || len(s) > 128 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-') {
			return false
		}
	}
	return true
}

// parsePushSubject splits <prefix>.push.<queue>[.<partition>].
func parsePushSubject(prefix, subject string) (queue, partition string, err *wireError) {
	rest, ok := bytes.CutPrefix([]byte(subject), []byte(prefix+".push."))
	if !ok {
		return "", "", badInput("subject %q is not under %s.push", subject, prefix)
	}
	tokens := bytes.Split(rest, []byte("."))
	switch len(tokens) {
	case 1:
		queue, partition = string(tokens[0]), DefaultPartition
	case 2:
		queue, partition = string(tokens[0]), string(tokens[1])
	default:
		return "", "", badInput("subject %q must be %s.push.<queue> or %s.push.<queue>.<partition>", subject, prefix, prefix)
	}
	if !ValidName(queue) {
		return "", "", badInput("bad queue name %q: 1-128 bytes of [A-Za-z0-9_-]", queue)
	}
	if !ValidName(partition) {
		return "", "", badInput("bad partition name %q: 1-128 bytes of [A-Za-z0-9_-]", partition)
	}
	return queue, partition, nil
}

type wireMessage struct {
	TransactionID json.RawMessage `json:"transactionId"`
	Data          json.RawMessage `json:"data"`
}

// decodePush decodes a push body: one message object or an array of 1 to
// maxBatch of them. Unknown fields are ignored (the contract may add
// fields). A missing or null transactionId is minted; minted[i] says so.
func decodePush(body []byte, maxBatch int) (msgs []ingest.Message, minted []bool, werr *wireError) {
	body = bytes.TrimSpace(body)
	if len(body) == 0 {
		return nil, nil, badInput("empty body: send a JSON message object or an array of them")
	}
	var elems []json.RawMessage
	switch body[0] {
	case '{':
		elems = []json.RawMessage{body}
	case '[':
		if err := json.Unmarshal(body, &elems); err != nil {
			return nil, nil, badInput("malformed JSON: %v", err)
		}
	default:
		if !json.Valid(body) {
			return nil, nil, badInput("malformed JSON")
		}
		return nil, nil, badInput("body must be a JSON message object or an array of them")
	}
	if len(elems) == 0 {
		return nil, nil, badInput("empty array: send 1 to %d messages", maxBatch)
	}
	if len(elems) > maxBatch {
		return nil, nil, &wireError{Code: CodeTooLarge, Message: fmt.Sprintf("%d messages in one request; at most %d", len(elems), maxBatch)}
	}
	msgs = make([]ingest.Message, len(elems))
	minted = make([]bool, len(elems))
	for i, raw := range elems {
		raw = bytes.TrimSpace(raw)
		if len(raw) == 0 || raw[0] != '{' {
			return nil, nil, badInput("message %d is not a JSON object", i)
		}
		var wm wireMessage
		if err := json.Unmarshal(raw, &wm); err != nil {
			return nil, nil, badInput("message %d: malformed JSON: %v", i, err)
		}
		switch {
		case len(wm.TransactionID) == 0 || string(wm.TransactionID) == "null":
			msgs[i].TxnID = "qg-" + nuid.Next()
			minted[i] = true
		case wm.TransactionID[0] != '"':
			return nil, nil, badInput("message %d: transactionId must be a string", i)
		default:
			var id string
			if err := json.Unmarshal(wm.TransactionID, &id); err != nil {
				return nil, nil, badInput("message %d: transactionId: %v", i, err)
			}
			if len(id) == 0 || len(id) > MaxTxnIDBytes {
				return nil, nil, badInput("message %d: transactionId must be 1-%d bytes, got %d", i, MaxTxnIDBytes, len(id))
			}
			if !utf8.ValidString(id) {
				return nil, nil, badInput("message %d: transactionId is not valid UTF-8", i)
			}
			msgs[i].TxnID = id
		}
		if len(wm.Data) > 0 {
			msgs[i].Data = wm.Data
		}
	}
	return msgs, minted, nil
}

// encodeReply writes the per-message answer array of PROTOCOL.md.
func encodeReply(msgs []ingest.Message, results []ingest.Result) []byte {
	b := make([]byte, 0, 160*len(results))
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
		if r.Status == ingest.StatusFailed {
			msg := "not stored"
			if r.Err != nil {
				msg = r.Err.Error()
			}
			b = append(b, `,"error":`...)
			b = appendJSONString(b, msg)
		} else {
			b = append(b, `,"messageId":"`...)
			b = append(b, pgstore.MessageID(r.PartitionID, r.Offset)...)
			b = append(b, `","offset":`...)
			b = strconv.AppendInt(b, r.Offset, 10)
		}
		b = append(b, '}')
	}
	return append(b, ']')
}

// appendJSONString appends s as a JSON string literal.
func appendJSONString(b []byte, s string) []byte {
	const hex = "0123456789abcdef"
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= 0x20 && c != '"' && c != '\\' {
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
