package gateway

import (
	"strings"
	"testing"
	"time"

	queengate "github.com/queengate/queengate"
)

const testLease = "5f0c2a9e-3b1d-4c6e-9a8f-0123456789ab"

// decodeCase is one body and what its decoder says: want is the exact
// error message, or "" for a body accepted.
type decodeCase struct {
	name, body, want string
}

// runDecodeCases checks each case's message exactly, and that no message
// speaks Go instead of the protocol.
func runDecodeCases(t *testing.T, decode func(body []byte) *queengate.Error, cases []decodeCase) {
	t.Helper()
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			werr := decode([]byte(c.body))
			switch {
			case c.want == "" && werr != nil:
				t.Fatalf("refused: %v", werr.Message)
			case c.want == "":
				return
			case werr == nil:
				t.Fatalf("accepted; want %q", c.want)
			case werr.Code != 400 || werr.Message != c.want:
				t.Fatalf("%d %q\nwant 400 %q", werr.Code, werr.Message, c.want)
			}
			if speaksGo(werr.Message) {
				t.Errorf("the message speaks Go: %s", werr.Message)
			}
		})
	}
}

// speaksGo reports Go's type names or encoding/json's wording.
func speaksGo(msg string) bool {
	for _, w := range []string{"int64", "int32", "float64", "slice", "struct", "json:", "Go value", "unmarshal"} {
		if strings.Contains(msg, w) {
			return true
		}
	}
	return false
}

func TestDecodeAckBody(t *testing.T) {
	t.Parallel()
	item := `{"transactionId":"t","status":"completed"}`
	ack := func(items string) string {
		return `{"group":"g","leaseId":"` + testLease + `","items":[` + items + `]}`
	}
	itemFields := `(an ack item has "transactionId", "offset", "status", "error" and "delayMs")`
	runDecodeCases(t, func(b []byte) *queengate.Error { _, werr := decodeAck(b); return werr }, []decodeCase{
		{"by id and by offset", ack(item + `,{"offset":7,"status":"failed","error":"boom"}`), ""},
		{"a failure with a delay", ack(`{"offset":7,"status":"failed","delayMs":5000}`), ""},
		{"a delay on a completed item", ack(`{"offset":7,"status":"completed","delayMs":5000}`),
			`item 0: "delayMs" is for a failed item: it says how long the message waits before it is delivered again`},
		{"a delay too long", ack(`{"offset":7,"status":"failed","delayMs":86400001}`), `item 0: "delayMs" is 86400001: from 0 to 86400000`},
		{"a negative delay", ack(`{"offset":7,"status":"failed","delayMs":-1}`), `item 0: "delayMs" is -1: from 0 to 86400000`},
		{"a delay as a string", ack(`{"offset":7,"status":"failed","delayMs":"5s"}`), `item 0: "delayMs" must be a whole number, not a string "5s"`},
		{"STATUS", ack(`{"transactionId":"t","STATUS":"completed"}`),
			`item 0: unknown field "STATUS": an ack item has only "transactionId", "offset", "status", "error" and "delayMs"; did you mean "status"?`},
		{"OFFSET", ack(`{"OFFSET":1,"status":"completed"}`),
			`item 0: unknown field "OFFSET": an ack item has only "transactionId", "offset", "status", "error" and "delayMs"; did you mean "offset"?`},
		{"transactionID", ack(item + `,{"transactionID":"t","status":"completed"}`),
			`item 1: unknown field "transactionID": an ack item has only "transactionId", "offset", "status", "error" and "delayMs"; did you mean "transactionId"?`},
		{"LeaseID", `{"group":"g","LeaseID":"` + testLease + `","items":[` + item + `]}`,
			`unknown field "LeaseID": an ack has only "group", "leaseId" and "items"; did you mean "leaseId"?`},
		{"a status given twice", ack(`{"offset":2,"status":"completed","status":"failed"}`),
			`item 0: field "status" is given twice: send it once ` + itemFields},
		{"a group given twice", `{"group":"g","group":"h","leaseId":"` + testLease + `","items":[` + item + `]}`,
			`field "group" is given twice: send it once (an ack has "group", "leaseId" and "items")`},
		{"an offset as a string", ack(`{"offset":"2","status":"completed"}`), `item 0: "offset" must be a whole number, not a string "2"`},
		{"an offset with a fraction", ack(`{"offset":2.5,"status":"completed"}`), `item 0: "offset" must be a whole number, not the JSON number 2.5`},
		{"a negative offset", ack(`{"offset":-1,"status":"completed"}`), `item 0: "offset" is -1: from 0 to 9223372036854775807`},
		{"items an object", `{"group":"g","leaseId":"` + testLease + `","items":{}}`,
			`"items" must be an array of items such as {"transactionId": "...", "status": "completed"} or {"offset": 7, "status": "failed", "error": "..."}, not an object`},
		{"an item not an object", ack(`7`), `item 0 must be a JSON object; want {"transactionId": "...", "status": "completed"} or {"offset": 7, "status": "failed", "error": "..."}`},
		{"status a number", ack(`{"transactionId":"t","status":1}`), `item 0: "status" must be a string, not the JSON number 1`},
		{"status missing", ack(`{"transactionId":"t"}`), `item 0: "status" is missing: "completed" or "failed"`},
		{"status unknown", ack(`{"transactionId":"t","status":"done"}`), `item 0: status "done": "completed" or "failed"`},
		{"both ids", ack(`{"transactionId":"t","offset":1,"status":"failed"}`), `item 0: give transactionId or offset, one of them`},
		{"an empty transactionId", ack(`{"transactionId":"","status":"failed"}`), `item 0: "transactionId" is empty: 1-256 bytes`},
		{"no items", ack(``), `"items" has 0 entries: 1 to 10000`},
		{"a malformed leaseId", `{"group":"g","leaseId":"x","items":[` + item + `]}`,
			`"leaseId" must be the UUID a pop answered (such as "5f0c2a9e-3b1d-4c6e-9a8f-0123456789ab"), not a string "x"`},
		{"a leaseId not a string", `{"group":"g","leaseId":7,"items":[` + item + `]}`,
			`"leaseId" must be the UUID a pop answered (such as "5f0c2a9e-3b1d-4c6e-9a8f-0123456789ab"), not the JSON number 7`},
		{"leaseId missing", `{"group":"g","items":[` + item + `]}`, `"leaseId" is missing: the lease the messages were popped under`},
		{"a bad group", `{"group":"a.b","leaseId":"` + testLease + `","items":[` + item + `]}`,
			`"group" must be a name, a string of 1-128 bytes of [A-Za-z0-9_-], not a string "a.b"`},
		{"not an object", `[]`, `the body must be a JSON object; want {"group": "...", "leaseId": "...", "items": [{"transactionId": "...", "status": "completed"}]}`},
		{"a NUL in an error", ack(`{"offset":1,"status":"failed","error":"\u0000"}`),
			`the body: \u0000 (NUL) cannot be stored: PostgreSQL refuses it in text and jsonb at byte 110; want {"group": "...", "leaseId": "...", "items": [{"transactionId": "...", "status": "completed"}]}`},
		{"a long unknown field is cut", `{"` + strings.Repeat("x", 100) + `":1}`,
			`unknown field "` + strings.Repeat("x", 40) + `… (100 bytes)": an ack has only "group", "leaseId" and "items"`},
	})
}

func TestDecodePopBody(t *testing.T) {
	t.Parallel()
	runDecodeCases(t, func(b []byte) *queengate.Error { _, werr := decodePop(b); return werr }, []decodeCase{
		{"everything", `{"group":"g","consumer":"c","max":5,"leaseMs":1000,"waitMs":0,"maxBytes":1024,"ack":{"partition":"p","leaseId":"` + testLease + `","items":[{"offset":0,"status":"completed"}]}}`, ""},
		{"maxBytes 0", `{"group":"g","maxBytes":0}`, `"maxBytes" is 0: from 1 to 1073741824`},
		{"maxBytes above 1 GiB", `{"group":"g","maxBytes":1073741825}`, `"maxBytes" is 1073741825: from 1 to 1073741824`},
		{"maxBytes a string", `{"group":"g","maxBytes":"1"}`, `"maxBytes" must be a whole number, not a string "1"`},
		{"Group", `{"Group":"g"}`, `unknown field "Group": a pop has only "group", "consumer", "max", "leaseMs", "waitMs", "maxBytes" and "ack"; did you mean "group"?`},
		{"max twice", `{"group":"g","max":1,"max":2}`, `field "max" is given twice: send it once (a pop has "group", "consumer", "max", "leaseMs", "waitMs", "maxBytes" and "ack")`},
		{"max with an exponent", `{"group":"g","max":1e2}`, `"max" must be a whole number, not the JSON number 1e2`},
		{"the ack's item misnamed", `{"group":"g","ack":{"partition":"p","leaseId":"` + testLease + `","items":[{"offset":0,"Status":"completed"}]}}`,
			`"ack": item 0: unknown field "Status": an ack item has only "transactionId", "offset", "status", "error" and "delayMs"; did you mean "status"?`},
		{"the ack's lease malformed", `{"group":"g","ack":{"partition":"p","leaseId":"nope","items":[{"offset":0,"status":"completed"}]}}`,
			`"ack": "leaseId" must be the UUID a pop answered (such as "5f0c2a9e-3b1d-4c6e-9a8f-0123456789ab"), not a string "nope"`},
		{"the ack without partition", `{"group":"g","ack":{"leaseId":"` + testLease + `","items":[{"offset":0,"status":"completed"}]}}`,
			`"ack": "partition" is missing: the partition of the batch it settles`},
		{"the ack without items", `{"group":"g","ack":{"partition":"p","leaseId":"` + testLease + `"}}`, `"ack": "items" has 0 entries: 1 to 10000`},
		{"the ack's status wrong", `{"group":"g","ack":{"partition":"p","leaseId":"` + testLease + `","items":[{"offset":0,"status":"ok"}]}}`,
			`"ack": item 0: status "ok": "completed" or "failed"`},
		{"the ack an array", `{"group":"g","ack":[]}`, `"ack" must be a JSON object; want {"partition": "...", "leaseId": "...", "items": [...]}`},
		{"consumer too long", `{"group":"g","consumer":"` + strings.Repeat("c", 129) + `"}`, `"consumer" must be a string of up to 128 bytes, not a string "` + strings.Repeat("c", 39) + `… (131 bytes)`},
		{"group missing", `{"max":1}`, `"group" is missing: want {"group": "...", "consumer": "...", "max": 100, "leaseMs": 30000, "waitMs": 5000, "maxBytes": 1048576, "ack": {...}}`},
	})
}

func TestDecodeRenewAndReleaseBodies(t *testing.T) {
	t.Parallel()
	lease := func(renew bool) func([]byte) *queengate.Error {
		return func(b []byte) *queengate.Error { _, werr := decodeLease(b, renew); return werr }
	}
	runDecodeCases(t, lease(true), []decodeCase{
		{"a renewal", `{"group":"g","leaseId":"` + testLease + `","leaseMs":1000}`, ""},
		{"leaseMs missing", `{"group":"g","leaseId":"` + testLease + `"}`, `"leaseMs" is missing: a renewal runs 1 to 3600000 ms from now`},
		{"leaseMs a string", `{"group":"g","leaseId":"` + testLease + `","leaseMs":"1000"}`, `"leaseMs" must be a whole number, not a string "1000"`},
		{"leaseMs twice", `{"group":"g","leaseId":"` + testLease + `","leaseMs":1,"leaseMs":2}`,
			`field "leaseMs" is given twice: send it once (a renewal has "group", "leaseId" and "leaseMs")`},
		{"LeaseMS", `{"group":"g","leaseId":"` + testLease + `","LeaseMS":1}`,
			`unknown field "LeaseMS": a renewal has only "group", "leaseId" and "leaseMs"; did you mean "leaseMs"?`},
		{"a malformed leaseId", `{"group":"g","leaseId":"` + strings.ToUpper(testLease)[:35] + `","leaseMs":1}`,
			`"leaseId" must be the UUID a pop answered (such as "5f0c2a9e-3b1d-4c6e-9a8f-0123456789ab"), not a string "5F0C2A9E-3B1D-4C6E-9A8F-0123456789A"`},
	})
	runDecodeCases(t, lease(false), []decodeCase{
		{"a release", `{"group":"g","leaseId":"` + testLease + `"}`, ""},
		{"a release with leaseMs", `{"group":"g","leaseId":"` + testLease + `","leaseMs":0}`,
			`"leaseMs": a release takes none: it ends the lease now; a release has only "group" and "leaseId"`},
		{"group missing", `{"leaseId":"` + testLease + `"}`, `"group" is missing: want {"group": "...", "leaseId": "..."}`},
		{"leaseId missing", `{"group":"g"}`, `"leaseId" is missing: want {"group": "...", "leaseId": "..."}`},
		{"leaseId empty", `{"group":"g","leaseId":""}`, `"leaseId" is empty: give the UUID a pop answered`},
	})
}

func TestDecodeReadBody(t *testing.T) {
	t.Parallel()
	runDecodeCases(t, func(b []byte) *queengate.Error { _, werr := decodeRead(b); return werr }, []decodeCase{
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
	runDecodeCases(t, func(b []byte) *queengate.Error { _, werr := decodeGet(b); return werr }, []decodeCase{
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
	runDecodeCases(t, func(b []byte) *queengate.Error { _, werr := decodeExplain(b); return werr }, []decodeCase{
		{"an id", `{"transactionId":"t"}`, ""},
		{"an id and data", `{"transactionId":"t","data":{"a": 1}}`, ""},
		// The push decoder's own words, without the message index.
		{"a NUL", `{"transactionId":"\u0000"}`, `transactionId: \u0000 (NUL) cannot be stored: PostgreSQL refuses it in text and jsonb at byte 18`},
		{"a 300-byte id", `{"transactionId":"` + strings.Repeat("x", 300) + `"}`, `transactionId must be 1-256 bytes, got 300`},
		{"an empty id", `{"transactionId":""}`, `transactionId must be 1-256 bytes, got 0`},
		{"an id not a string", `{"transactionId":7}`, `transactionId must be a string`},
		{"no id", `{"data":1}`, `"transactionId" is missing: explain the verdict of which id?`},
		{"transactionID", `{"transactionID":"t"}`, `unknown field "transactionID": a message has only "transactionId" and "data"; did you mean "transactionId"?`},
		{"an array", `[{"transactionId":"t"}]`, `an explain is one message object, not an array`},
		{"a lone surrogate in data", `{"transactionId":"t","data":"\ud800"}`,
			`data: unpaired UTF-16 surrogate \ud800: PostgreSQL refuses it in jsonb (and it is no Unicode text); escape the whole pair or send UTF-8 at byte 29`},
	})
}

func TestDecodeConfigureBody(t *testing.T) {
	t.Parallel()
	runDecodeCases(t, func(b []byte) *queengate.Error { _, _, _, werr := decodeConfigure(b); return werr }, []decodeCase{
		{"all", `{"queue":"q","mode":"replace","options":{"dedupWindowSeconds":1,"retentionSeconds":2,"onConflict":"flag","maxAttempts":3,"retainUntil":"age"}}`, ""},
		{"Queue", `{"Queue":"q"}`, `unknown field "Queue": a configure request has only "queue", "options" and "mode"; did you mean "queue"?`},
		{"an option misnamed", `{"queue":"q","options":{"MaxAttempts":1}}`,
			`"options": unknown field "MaxAttempts": the options object has only "dedupWindowSeconds", "retentionSeconds", "onConflict", "maxAttempts", "retainUntil", "retryDelayMs" and "retryBackoffMs"; did you mean "maxAttempts"?`},
		{"an option twice", `{"queue":"q","options":{"maxAttempts":1,"maxAttempts":2}}`,
			`"options": field "maxAttempts" is given twice: send it once (the options object has "dedupWindowSeconds", "retentionSeconds", "onConflict", "maxAttempts", "retainUntil", "retryDelayMs" and "retryBackoffMs")`},
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

func TestDecodeTimerBodies(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)
	runDecodeCases(t, func(b []byte) *queengate.Error { _, werr := decodeTimer(b, now); return werr }, []decodeCase{
		{"a delay", `{"transactionId":"t","data":1,"delayMs":5}`, ""},
		{"fireAt a number", `{"data":1,"fireAt":5}`, `"fireAt" must be an RFC 3339 string such as "2026-12-01T09:00:00Z", not the JSON number 5`},
		{"DelayMs", `{"DelayMs":5}`, `unknown field "DelayMs": a message has only "transactionId", "data", "fireAt" and "delayMs"; did you mean "delayMs"?`},
	})
	runDecodeCases(t, func(b []byte) *queengate.Error { _, werr := decodeCancel(b); return werr }, []decodeCase{
		{"an id", `{"timerId":"` + testLease + `"}`, ""},
		{"TimerId", `{"TimerId":"` + testLease + `"}`, `unknown field "TimerId": a cancel has only "timerId"; did you mean "timerId"?`},
		{"an id not a string", `{"timerId":[]}`, `"timerId" must be the UUID a schedule answered, not an array`},
	})
	runDecodeCases(t, func(b []byte) *queengate.Error { _, werr := decodeTimerList(b); return werr }, []decodeCase{
		{"empty", ` `, ""},
		{"both", `{"queue":"q","limit":5}`, ""},
		{"a position", `{"from":{"fireAt":"2026-12-01T09:00:00.123456Z","timerId":"` + testLease + `"}}`, ""},
		{"a position without its id", `{"from":{"fireAt":"2026-12-01T09:00:00Z"}}`, `"from" takes both "fireAt" and "timerId": want {"fireAt": "2026-12-01T09:00:00.123456Z", "timerId": "<uuid>"} (a timer list's "next")`},
		{"a position's id not a UUID", `{"from":{"fireAt":"2026-12-01T09:00:00Z","timerId":"x"}}`, `"from": "timerId" must be the UUID a schedule answered, not a string "x"`},
		{"a position a string", `{"from":"` + testLease + `"}`, `"from" must be a JSON object; want {"fireAt": "2026-12-01T09:00:00.123456Z", "timerId": "<uuid>"} (a timer list's "next")`},
		{"limit a string", `{"limit":"5"}`, `"limit" must be a whole number, not a string "5"`},
		{"limit 0", `{"limit":0}`, `"limit" is 0: from 1 to 10000`},
		{"Limit", `{"Limit":5}`, `unknown field "Limit": a timer list has only "queue", "limit" and "from"; did you mean "limit"?`},
	})
}
