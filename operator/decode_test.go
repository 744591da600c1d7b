package operator

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	queengate "github.com/queengate/queengate"
	"github.com/queengate/queengate/internal/bodyref"
	"github.com/queengate/queengate/model"
)

// decodeCase is one body and what its decoder says (bodyref.DecodeCase).
type decodeCase struct{ Name, Body, Want string }

func FuzzDecodeRead(f *testing.F) {
	bodyref.FuzzDecoder(f, bodyref.Read, true, decodeRead, func(req queengate.ReadRequest, vals map[string]json.RawMessage) string {
		if from, _ := bodyref.Whole(vals["from"]); req.From != from {
			return fmt.Sprintf("from %d, the reference %d", req.From, from)
		}
		return ""
	})
}

func FuzzDecodeGet(f *testing.F) {
	bodyref.FuzzDecoder(f, bodyref.Get, false, decodeGet, func(req queengate.GetRequest, vals map[string]json.RawMessage) string {
		return bodyref.SameString("messageId", req.MessageID, vals) + bodyref.SameString("transactionId", req.TransactionID, vals)
	})
}

func FuzzDecodeExplain(f *testing.F) {
	bodyref.FuzzDecoder(f, bodyref.Explain, false, decodeExplain, func(req explainRequest, vals map[string]json.RawMessage) string {
		if !bytes.Equal(req.data, vals["data"]) {
			return fmt.Sprintf("data %q, the reference %q", req.data, vals["data"])
		}
		return bodyref.SameString("transactionId", req.txnID, vals)
	})
}

func FuzzDecodeConfigure(f *testing.F) {
	type configure struct {
		queue string
		patch model.OptionsPatch
	}
	decode := func(b []byte) (configure, *queengate.Error) {
		queue, patch, _, werr := decodeConfigure(b)
		return configure{queue, patch}, werr
	}
	bodyref.FuzzDecoder(f, bodyref.Configure, false, decode, func(c configure, vals map[string]json.RawMessage) string {
		var opts map[string]json.RawMessage
		_ = json.Unmarshal(vals["options"], &opts)
		if n, ok := bodyref.Whole(opts["maxAttempts"]); ok != (c.patch.MaxAttempts != nil) || ok && int64(*c.patch.MaxAttempts) != n {
			return fmt.Sprintf("maxAttempts %v, the reference %s", c.patch.MaxAttempts, opts["maxAttempts"])
		}
		var backoff []int
		if json.Unmarshal(opts["retryBackoffMs"], &backoff) == nil != (c.patch.RetryBackoffMs != nil) ||
			backoff != nil && fmt.Sprint(backoff) != fmt.Sprint(*c.patch.RetryBackoffMs) {
			return fmt.Sprintf("retryBackoffMs %v, the reference %s", c.patch.RetryBackoffMs, opts["retryBackoffMs"])
		}
		if n, ok := bodyref.Whole(opts["maxAckPending"]); ok != (c.patch.MaxAckPending != nil) || ok && int64(*c.patch.MaxAckPending) != n {
			return fmt.Sprintf("maxAckPending %v, the reference %s", c.patch.MaxAckPending, opts["maxAckPending"])
		}
		if n, ok := bodyref.Whole(opts["maxUnheardDeliveries"]); ok != (c.patch.MaxUnheardDeliveries != nil) ||
			ok && int64(*c.patch.MaxUnheardDeliveries) != n {
			return fmt.Sprintf("maxUnheardDeliveries %v, the reference %s", c.patch.MaxUnheardDeliveries, opts["maxUnheardDeliveries"])
		}
		return bodyref.SameString("queue", c.queue, vals)
	})
}

func FuzzDecodeQueuesPage(f *testing.F) {
	f.Add([]byte(`{"from":"orders"}`))
	f.Add([]byte(`{"from":"a.b"}`))
	f.Add([]byte(`{"From":"orders"}`))
	decode := func(b []byte) (string, *queengate.Error) { return decodeFrom(b, queuesPageShape) }
	bodyref.FuzzDecoder(f, bodyref.Page, true, decode, func(from string, vals map[string]json.RawMessage) string {
		return bodyref.SameString("from", from, vals)
	})
}

func TestDecodeReadBody(t *testing.T) {
	t.Parallel()
	bodyref.RunDecodeCases(t, func(b []byte) *queengate.Error { _, werr := decodeRead(b); return werr }, []decodeCase{
		{"empty", ``, ""},
		{"all", `{"from":3,"max":10,"maxBytes":100}`, ""},
		{"from a string", `{"from":"3"}`, `"from" must be a whole number, not a string "3"`},
		{"max a fraction", `{"max":1.0}`, `"max" must be a whole number, not the JSON number 1.0`},
		{"From", `{"From":1}`, `unknown field "From": a read has only "from", "max" and "maxBytes"; did you mean "from"?`},
		{"from twice", `{"from":1,"from":2}`, `field "from" is given twice: send it once (a read has "from", "max" and "maxBytes")`},
		{"an array", `[1]`, `the body must be a JSON object; want {"from": 0, "max": 1000, "maxBytes": 524288}`},
	})
}

func TestDecodeGetBody(t *testing.T) {
	t.Parallel()
	bodyref.RunDecodeCases(t, func(b []byte) *queengate.Error { _, werr := decodeGet(b); return werr }, []decodeCase{
		{"by id", `{"messageId":"x"}`, ""},
		{"by transaction", `{"queue":"q","partition":"p","transactionId":"t"}`, ""},
		{"MessageId", `{"MessageId":"x"}`, `unknown field "MessageId": a message get has only "messageId", "queue", "partition" and "transactionId"; did you mean "messageId"?`},
		{"an id not a string", `{"messageId":1}`, `"messageId" must be a string, not the JSON number 1`},
		{"messageId twice", `{"messageId":"a","messageId":"b"}`, `field "messageId" is given twice: send it once (a message get has "messageId", "queue", "partition" and "transactionId")`},
		{"both ways", `{"messageId":"x","queue":"q"}`, `name one message: {"messageId": "..."} or {"queue": "...", "partition": "...", "transactionId": "..."}`},
	})
}

func TestDecodeExplainBody(t *testing.T) {
	t.Parallel()
	bodyref.RunDecodeCases(t, func(b []byte) *queengate.Error { _, werr := decodeExplain(b); return werr }, []decodeCase{
		{"an id", `{"transactionId":"t"}`, ""},
		{"an id and data", `{"transactionId":"t","data":{"a": 1}}`, ""},
		// The push decoder's own words, without the message index.
		{"a NUL", `{"transactionId":"\u0000"}`, `transactionId: \u0000 (NUL) cannot be stored: PostgreSQL refuses it in text and jsonb at byte 18`},
		{"a 300-byte id", `{"transactionId":"` + strings.Repeat("x", 300) + `"}`, `transactionId must be 1-256 bytes, got 300`},
		{"an empty id", `{"transactionId":""}`, `transactionId must be 1-256 bytes, got 0`},
		{"an id not a string", `{"transactionId":7}`, `transactionId must be a string`},
		{"no id", `{"data":1}`, `"transactionId" is missing: explain the verdict of which id?`},
		{"transactionID", `{"transactionID":"t"}`, `unknown field "transactionID": a message has only "transactionId", "data", "headers" and "dataEncoding"; did you mean "transactionId"?`},
		{"an array", `[{"transactionId":"t"}]`, `an explain is one message object, not an array`},
		{"a lone surrogate in data", `{"transactionId":"t","data":"\ud800"}`,
			`data: unpaired UTF-16 surrogate \ud800: PostgreSQL refuses it in jsonb (and it is no Unicode text); escape the whole pair or send UTF-8 at byte 29`},
	})
}

func TestDecodeConfigureBody(t *testing.T) {
	t.Parallel()
	bodyref.RunDecodeCases(t, func(b []byte) *queengate.Error { _, _, _, werr := decodeConfigure(b); return werr }, []decodeCase{
		{"all", `{"queue":"q","mode":"replace","options":{"dedupWindowSeconds":1,"retentionSeconds":2,"onConflict":"flag","maxAttempts":3,"retainUntil":"age","groupIdleSeconds":4}}`, ""},
		{"groupIdleSeconds negative", `{"queue":"q","options":{"groupIdleSeconds":-1}}`, `"options": "groupIdleSeconds" is -1: from 0 to 2147483647`},
		{"maxUnheardDeliveries too many", `{"queue":"q","options":{"maxUnheardDeliveries":1001}}`, `"options": "maxUnheardDeliveries" is 1001: from 0 to 1000`},
		{"maxUnheardDeliveries a fraction", `{"queue":"q","options":{"maxUnheardDeliveries":2.5}}`,
			`"options": "maxUnheardDeliveries" must be a whole number, not the JSON number 2.5`},
		{"Queue", `{"Queue":"q"}`, `unknown field "Queue": a configure request has only "queue", "options" and "mode"; did you mean "queue"?`},
		{"an option misnamed", `{"queue":"q","options":{"MaxAttempts":1}}`,
			`"options": unknown field "MaxAttempts": the options object has only "dedupWindowSeconds", "retentionSeconds", "onConflict", "maxAttempts", "retainUntil", "retryDelayMs", "retryBackoffMs", "maxAckPending", "groupIdleSeconds" and "maxUnheardDeliveries"; did you mean "maxAttempts"?`},
		{"an option twice", `{"queue":"q","options":{"maxAttempts":1,"maxAttempts":2}}`,
			`"options": field "maxAttempts" is given twice: send it once (the options object has "dedupWindowSeconds", "retentionSeconds", "onConflict", "maxAttempts", "retainUntil", "retryDelayMs", "retryBackoffMs", "maxAckPending", "groupIdleSeconds" and "maxUnheardDeliveries")`},
		{"retainUntil a number", `{"queue":"q","options":{"retainUntil":1}}`, `"options": "retainUntil" must be one of "age", "consumed", not the JSON number 1`},
		{"retry delays", `{"queue":"q","options":{"retryDelayMs":1000,"retryBackoffMs":[1000,5000,30000]}}`, ""},
		{"retryDelayMs over a day", `{"queue":"q","options":{"retryDelayMs":86400001}}`, `"options": "retryDelayMs" is 86400001: from 0 to 86400000`},
		{"retryBackoffMs a number", `{"queue":"q","options":{"retryBackoffMs":1000}}`,
			`"options": "retryBackoffMs" must be an array of delays in milliseconds such as [1000, 5000, 30000], not the JSON number 1000`},
		{"retryBackoffMs with a negative entry", `{"queue":"q","options":{"retryBackoffMs":[1000,-1]}}`,
			`"options": "retryBackoffMs[1]" is -1: from 0 to 86400000`},
		{"retryBackoffMs with a string", `{"queue":"q","options":{"retryBackoffMs":["1s"]}}`, `"options": "retryBackoffMs[0]" must be a whole number, not a string "1s"`},
		{"retryBackoffMs too long", `{"queue":"q","options":{"retryBackoffMs":[` + strings.Repeat("1,", 64) + `1]}}`,
			`"options": "retryBackoffMs" has 65 entries: at most 64`},
		{"mode an object", `{"queue":"q","mode":{}}`, `"mode" must be "merge" (the default) or "replace", not an object`},
	})
}
