package gateway

import (
	"bytes"
	"encoding/json"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	queengate "github.com/queengate/queengate"
	"github.com/queengate/queengate/internal/wire"
	"github.com/queengate/queengate/internal/wire/wiretest"
	"github.com/queengate/queengate/model"
)

// The fuzz targets below check each request body's decoder against a
// reference written again from the rules in docs/protocol.md, on top of
// encoding/json: the body is strict JSON with no \u0000 or unpaired
// surrogate escape (wiretest.HasUnstorableEscape), an object whose field names are
// exactly the ones listed (case-sensitive), each once, and each value of
// its kind and range. The reference never calls the scanner.

// refRule judges one field's raw value.
type refRule func(raw json.RawMessage) bool

// refObject is the reference's view of an object: its fields' rules, the
// fields it must have, and a rule across fields.
type refObject struct {
	fields   map[string]refRule
	required []string
	across   func(m map[string]json.RawMessage) bool
}

// judge says whether raw is an acceptable object; a field name that is
// unknown or repeated (the first, in order) is returned as badName.
func (o refObject) judge(raw []byte) (ok bool, badName string) {
	keys, vals, isObj := refMembers(raw)
	if !isObj {
		return false, ""
	}
	seen := map[string]bool{}
	for _, k := range keys {
		if _, known := o.fields[k]; !known || seen[k] {
			return false, k
		}
		seen[k] = true
	}
	for k, v := range vals {
		if !o.fields[k](v) {
			return false, ""
		}
	}
	for _, k := range o.required {
		if !seen[k] {
			return false, ""
		}
	}
	return o.across == nil || o.across(vals), ""
}

// refMembers lists an object's keys in order, repeats included, with
// encoding/json's tokenizer.
func refMembers(raw []byte) (keys []string, vals map[string]json.RawMessage, isObj bool) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return nil, nil, false
	}
	vals = map[string]json.RawMessage{}
	for dec.More() {
		k, err := dec.Token()
		if err != nil {
			return nil, nil, false
		}
		var v json.RawMessage
		if dec.Decode(&v) != nil {
			return nil, nil, false
		}
		keys = append(keys, k.(string))
		vals[k.(string)] = v
	}
	return keys, vals, true
}

// refAccepts is the reference's verdict on a whole body, and the field
// name a refusal must quote (empty when it need not).
func refAccepts(body []byte, o refObject) (ok bool, badName string) {
	if !json.Valid(body) || wiretest.HasUnstorableEscape(body) {
		return false, ""
	}
	return o.judge(body)
}

func refString(raw json.RawMessage) (string, bool) {
	var s string
	return s, len(raw) > 0 && raw[0] == '"' && json.Unmarshal(raw, &s) == nil
}

func isString(raw json.RawMessage) bool { _, ok := refString(raw); return ok }

// refRFC3339 is an RFC 3339 string with a zone.
func refRFC3339(raw json.RawMessage) bool {
	s, ok := refString(raw)
	_, err := time.Parse(time.RFC3339Nano, s)
	return ok && err == nil
}

func stringOfBytes(lo, hi int) refRule {
	return func(raw json.RawMessage) bool {
		s, ok := refString(raw)
		return ok && len(s) >= lo && len(s) <= hi
	}
}

var (
	refName = regexp.MustCompile(`^[A-Za-z0-9_-]{1,128}$`)
	refUUID = regexp.MustCompile(`^[0-9a-fA-F]{8}(-[0-9a-fA-F]{4}){3}-[0-9a-fA-F]{12}$`)
)

func matching(re *regexp.Regexp) refRule {
	return func(raw json.RawMessage) bool { s, ok := refString(raw); return ok && re.MatchString(s) }
}

func oneOf(words ...string) refRule {
	return func(raw json.RawMessage) bool {
		s, ok := refString(raw)
		return ok && strings.Contains("|"+strings.Join(words, "|")+"|", "|"+s+"|")
	}
}

// refWhole reads a JSON number with no fraction or exponent that fits in
// an int64.
func refWhole(raw json.RawMessage) (int64, bool) {
	var n json.Number
	if len(raw) == 0 || raw[0] == '"' || json.Unmarshal(raw, &n) != nil || strings.ContainsAny(string(n), ".eE") {
		return 0, false
	}
	v, err := strconv.ParseInt(string(n), 10, 64)
	return v, err == nil
}

func wholeFrom(lo, hi int64) refRule {
	return func(raw json.RawMessage) bool { n, ok := refWhole(raw); return ok && n >= lo && n <= hi }
}

func anyValue(json.RawMessage) bool { return true }

func objectOf(o refObject) refRule {
	return func(raw json.RawMessage) bool { ok, _ := o.judge(raw); return ok }
}

func arrayOf(lo, hi int, elem refRule) refRule {
	return func(raw json.RawMessage) bool {
		var elems []json.RawMessage
		if raw[0] != '[' || json.Unmarshal(raw, &elems) != nil || len(elems) < lo || len(elems) > hi {
			return false
		}
		for _, e := range elems {
			if !elem(e) {
				return false
			}
		}
		return true
	}
}

var refAckItem = refObject{
	fields: map[string]refRule{"transactionId": stringOfBytes(1, 256), "offset": wholeFrom(0, 1<<63-1),
		"status": oneOf("completed", "failed"), "error": stringOfBytes(0, 4096), "delayMs": wholeFrom(0, 86400000)},
	required: []string{"status"},
	across: func(m map[string]json.RawMessage) bool {
		_, id := m["transactionId"]
		_, off := m["offset"]
		// a delay is for a failed item only (0 asks for none)
		delay, _ := refWhole(m["delayMs"])
		status, _ := refString(m["status"])
		return id != off && (delay == 0 || status == "failed")
	},
}

var refAckItems = arrayOf(1, 10000, objectOf(refAckItem))

var (
	refAck = refObject{fields: map[string]refRule{"group": matching(refName), "leaseId": matching(refUUID), "items": refAckItems},
		required: []string{"group", "leaseId", "items"}}
	refPop = refObject{
		fields: map[string]refRule{"group": matching(refName), "consumer": stringOfBytes(0, 128), "max": wholeFrom(1, 10000),
			"leaseMs": wholeFrom(1, 3600000), "waitMs": wholeFrom(0, 20000), "maxBytes": wholeFrom(1, 1<<30),
			"maxAckPending": wholeFrom(1, 1000000),
			"ack": objectOf(refObject{fields: map[string]refRule{"partition": matching(refName), "leaseId": matching(refUUID), "items": refAckItems},
				required: []string{"partition", "leaseId", "items"}})},
		required: []string{"group"},
		// maxAckPending bounds a named consumer
		across: func(m map[string]json.RawMessage) bool {
			consumer, _ := refString(m["consumer"])
			_, limited := refWhole(m["maxAckPending"])
			return !limited || consumer != ""
		},
	}
	refRenew = refObject{fields: map[string]refRule{"group": matching(refName), "leaseId": matching(refUUID), "leaseMs": wholeFrom(1, 3600000)},
		required: []string{"group", "leaseId", "leaseMs"}}
	refRelease = refObject{fields: map[string]refRule{"group": matching(refName), "leaseId": matching(refUUID)},
		required: []string{"group", "leaseId"}}
	refRead = refObject{fields: map[string]refRule{"from": wholeFrom(-1<<63, 1<<63-1), "max": wholeFrom(-1<<63, 1<<63-1),
		"maxBytes": wholeFrom(-1<<63, 1<<63-1)}}
	refGet = refObject{
		fields: map[string]refRule{"messageId": isString, "queue": isString, "partition": isString, "transactionId": isString},
		across: func(m map[string]json.RawMessage) bool {
			v := func(k string) string { s, _ := refString(m[k]); return s }
			if v("messageId") != "" {
				return v("queue")+v("partition")+v("transactionId") == ""
			}
			return v("queue") != "" && v("partition") != "" && v("transactionId") != ""
		},
	}
	refOptions = refObject{fields: map[string]refRule{"dedupWindowSeconds": wholeFrom(0, 1<<31-1), "retentionSeconds": wholeFrom(0, 1<<31-1),
		"maxAttempts": wholeFrom(0, 1<<31-1), "onConflict": oneOf("ignore", "flag", "reject"), "retainUntil": oneOf("age", "consumed"),
		"retryDelayMs": wholeFrom(0, 86400000), "retryBackoffMs": arrayOf(0, 64, wholeFrom(0, 86400000)),
		"maxAckPending": wholeFrom(0, 1000000), "groupIdleSeconds": wholeFrom(0, 1<<31-1)}}
	refConfigure = refObject{fields: map[string]refRule{"queue": matching(refName), "options": objectOf(refOptions), "mode": oneOf("merge", "replace")},
		required: []string{"queue"}}
	refCancel    = refObject{fields: map[string]refRule{"timerId": matching(refUUID)}, required: []string{"timerId"}}
	refTimerList = refObject{fields: map[string]refRule{"queue": matching(refName), "limit": wholeFrom(1, 10000),
		"from": objectOf(refObject{fields: map[string]refRule{"fireAt": refRFC3339, "timerId": matching(refUUID)},
			required: []string{"fireAt", "timerId"}})}}
	// A paged list's optional body: the name to list from.
	refPage = refObject{fields: map[string]refRule{"from": matching(refName)}}
	// A push message's transactionId: a string of 1 to 256 bytes, or null
	// (minted).
	refTxnID   = func(raw json.RawMessage) bool { return string(raw) == "null" || stringOfBytes(1, 256)(raw) }
	refExplain = refObject{fields: map[string]refRule{"transactionId": stringOfBytes(1, 256), "data": anyValue},
		required: []string{"transactionId"}}
)

// fuzzBody runs one body through decode and the reference: the same
// verdict, a refusal for a field name that quotes it, and no message in
// Go's words. It reports whether the body was accepted, for the caller to
// compare what was decoded.
func fuzzBody(t *testing.T, body []byte, ref refObject, decode func([]byte) *queengate.Error) bool {
	t.Helper()
	werr := decode(body)
	if !utf8.Valid(body) {
		return false // the scanner is stricter than encoding/json here, by design
	}
	want, badName := refAccepts(body, ref)
	if werr != nil && strings.Contains(werr.Message, "nesting deeper") {
		return false // encoding/json has no depth bound
	}
	if (werr == nil) != want {
		t.Fatalf("decoder says %v, the reference accepts: %v; body %q", werr, want, body)
	}
	if werr == nil {
		return true
	}
	if werr.Code != 400 || speaksGo(werr.Message) {
		t.Fatalf("%d %q", werr.Code, werr.Message)
	}
	if badName != "" && len(badName) <= wire.ExcerptBytes && !strings.Contains(werr.Message, strconv.Quote(badName)) {
		t.Fatalf("the refusal of field %q does not name it: %q; body %q", badName, werr.Message, body)
	}
	return false
}

// seeds are bodies of every bug item 2 of issue 21 named and of the
// field rules, shared by the targets: each target's reference judges them.
var seeds = []string{
	``, ` `, `{}`, `[]`, `null`, `"x"`, `{"a":1}`, `{"a":1,"a":2}`, `{"\u0000":1}`, `{"a":"\ud800"}`,
	`{"group":"g","leaseId":"` + testLease + `","items":[{"transactionId":"t","STATUS":"completed"}]}`,
	`{"group":"g","leaseId":"` + testLease + `","items":[{"OFFSET":1,"status":"completed"}]}`,
	`{"group":"g","LeaseID":"` + testLease + `","items":[{"transactionID":"t","status":"completed"}]}`,
	`{"group":"g","leaseId":"` + testLease + `","items":[{"offset":2,"status":"completed","status":"failed"}]}`,
	`{"group":"g","leaseId":"` + testLease + `","items":[{"offset":"2","status":"completed"}]}`,
	`{"group":"g","leaseId":"` + testLease + `","items":{"offset":2,"status":"completed"}}`,
	`{"group":"g","leaseId":"not-a-lease","items":[{"offset":2,"status":"completed"}]}`,
	`{"group":"g","leaseId":"` + testLease + `","leaseMs":0}`,
	`{"group":"g","leaseId":"` + testLease + `","leaseMs":1000}`,
	`{"group":"g","consumer":"c","max":5,"leaseMs":1000,"waitMs":0,"maxBytes":1024,"ack":{"partition":"p","leaseId":"` + testLease + `","items":[{"offset":0,"status":"completed","error":"e"}]}}`,
	`{"group":"g","maxBytes":1073741825}`, `{"group":"g","consumer":"c","maxAckPending":10}`, `{"group":"g","maxAckPending":10}`, `{"group":"g","max":1e2}`, `{"group":"g","max":-0}`,
	`{"from":1,"max":2,"maxBytes":3}`, `{"from":1.0}`, `{"from":99999999999999999999}`,
	`{"messageId":"x"}`, `{"queue":"q","partition":"p","transactionId":"t"}`,
	`{"transactionId":"t","data":{"a": 1}}`, `{"transactionId":"\u0000"}`, `{"transactionId":"` + strings.Repeat("x", 300) + `"}`,
	`{"queue":"q","mode":"merge","options":{"dedupWindowSeconds":1,"onConflict":"reject","retainUntil":"consumed"}}`,
	`{"queue":"q","options":{"maxAttempts":1,"maxAttempts":2}}`,
	`{"queue":"q","options":{"retryDelayMs":1000,"retryBackoffMs":[1000,5000,30000]}}`, `{"queue":"q","options":{"retryBackoffMs":[]}}`,
	`{"queue":"q","options":{"retryBackoffMs":[1000,-1]}}`, `{"queue":"q","options":{"retryBackoffMs":5}}`,
	`{"group":"g","leaseId":"` + testLease + `","items":[{"offset":2,"status":"failed","delayMs":5000}]}`,
	`{"group":"g","leaseId":"` + testLease + `","items":[{"offset":2,"status":"completed","delayMs":5000}]}`,
	`{"group":"g","leaseId":"` + testLease + `","items":[{"offset":2,"status":"failed","delayMs":86400001}]}`,
	`{"transactionId":"t","data":1,"delayMs":5}`, `{"data":1,"fireAt":"2026-12-01T10:00:00Z"}`, `{"data":1,"fireAt":null,"delayMs":0}`,
	`{"timerId":"` + testLease + `"}`, `{"queue":"q","limit":5}`,
}

// checkBody runs fuzzBody on a decoder returning T and, for a body
// accepted, agree's comparison of what it decoded with the reference's
// view of the body's fields ("" when they agree). blankOK: a body of
// JSON whitespace only is accepted as {} (an optional body).
func checkBody[T any](t *testing.T, body []byte, ref refObject, blankOK bool, decode func([]byte) (T, *queengate.Error),
	agree func(got T, vals map[string]json.RawMessage) string) {
	t.Helper()
	var got T
	decodeOnly := func(b []byte) (werr *queengate.Error) { got, werr = decode(b); return werr }
	if blankOK && len(bytes.Trim(body, " \t\r\n")) == 0 {
		if werr := decodeOnly(body); werr != nil {
			t.Fatalf("a blank body is refused: %v", werr)
		}
		ref, body = refObject{}, []byte("{}")
	}
	if !fuzzBody(t, body, ref, decodeOnly) {
		return
	}
	_, vals, _ := refMembers(body)
	if diff := agree(got, vals); diff != "" {
		t.Fatalf("%s; body %q", diff, body)
	}
}

// fuzzDecoder is the fuzz target of one body's decoder, seeded with seeds.
func fuzzDecoder[T any](f *testing.F, ref refObject, blankOK bool, decode func([]byte) (T, *queengate.Error),
	agree func(got T, vals map[string]json.RawMessage) string) {
	for _, s := range seeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) { checkBody(t, body, ref, blankOK, decode, agree) })
}

// sameString compares a decoded string with the reference's field.
func sameString(name, got string, vals map[string]json.RawMessage) string {
	if want, _ := refString(vals[name]); got != want {
		return fmt.Sprintf("%s %q, the reference %q", name, got, want)
	}
	return ""
}

func FuzzDecodePop(f *testing.F) {
	fuzzDecoder(f, refPop, false, decodePop, func(req queengate.PopRequest, vals map[string]json.RawMessage) string {
		if n, ok := refWhole(vals["maxBytes"]); req.MaxBytes != n || !ok && req.MaxBytes != 0 {
			return fmt.Sprintf("maxBytes %d, the reference %s", req.MaxBytes, vals["maxBytes"])
		}
		if n, ok := refWhole(vals["maxAckPending"]); int64(req.MaxAckPending) != n || !ok && req.MaxAckPending != 0 {
			return fmt.Sprintf("maxAckPending %d, the reference %s", req.MaxAckPending, vals["maxAckPending"])
		}
		if _, ok := vals["ack"]; ok != (req.Ack != nil) {
			return fmt.Sprintf("ack %+v, the reference %s", req.Ack, vals["ack"])
		}
		return sameString("group", req.Group, vals)
	})
}

func FuzzDecodeAck(f *testing.F) {
	fuzzDecoder(f, refAck, false, decodeAck, func(req queengate.AckRequest, vals map[string]json.RawMessage) string {
		var items []map[string]any
		_ = json.Unmarshal(vals["items"], &items)
		if len(items) != len(req.Items) {
			return fmt.Sprintf("%d items, the reference %d", len(req.Items), len(items))
		}
		for i, it := range items {
			delay, _ := it["delayMs"].(float64)
			if it["status"] != req.Items[i].Status || (it["offset"] != nil) != (req.Items[i].Offset != nil) ||
				int64(delay) != req.Items[i].DelayMs {
				return fmt.Sprintf("item %d: %+v, the reference %v", i, req.Items[i], it)
			}
		}
		return sameString("leaseId", req.LeaseID, vals)
	})
}

// FuzzDecodeLease: renew (renew true) and release bodies.
func FuzzDecodeLease(f *testing.F) {
	for _, s := range seeds {
		f.Add([]byte(s), true)
		f.Add([]byte(s), false)
	}
	f.Fuzz(func(t *testing.T, body []byte, renew bool) {
		ref := refRelease
		if renew {
			ref = refRenew
		}
		decode := func(b []byte) (queengate.LeaseRequest, *queengate.Error) { return decodeLease(b, renew) }
		checkBody(t, body, ref, false, decode, func(req queengate.LeaseRequest, vals map[string]json.RawMessage) string {
			return sameString("leaseId", req.LeaseID, vals)
		})
	})
}

func FuzzDecodeRead(f *testing.F) {
	fuzzDecoder(f, refRead, true, decodeRead, func(req queengate.ReadRequest, vals map[string]json.RawMessage) string {
		if from, _ := refWhole(vals["from"]); req.From != from {
			return fmt.Sprintf("from %d, the reference %d", req.From, from)
		}
		return ""
	})
}

func FuzzDecodeGet(f *testing.F) {
	fuzzDecoder(f, refGet, false, decodeGet, func(req queengate.GetRequest, vals map[string]json.RawMessage) string {
		return sameString("messageId", req.MessageID, vals) + sameString("transactionId", req.TransactionID, vals)
	})
}

// FuzzDecodeExplain: explain's body is a push message whose
// transactionId is required; what is decoded is the id and the data's
// bytes exactly as sent.
func FuzzDecodeExplain(f *testing.F) {
	fuzzDecoder(f, refExplain, false, decodeExplain, func(req explainRequest, vals map[string]json.RawMessage) string {
		if !bytes.Equal(req.data, vals["data"]) {
			return fmt.Sprintf("data %q, the reference %q", req.data, vals["data"])
		}
		return sameString("transactionId", req.txnID, vals)
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
	fuzzDecoder(f, refConfigure, false, decode, func(c configure, vals map[string]json.RawMessage) string {
		var opts map[string]json.RawMessage
		_ = json.Unmarshal(vals["options"], &opts)
		if n, ok := refWhole(opts["maxAttempts"]); ok != (c.patch.MaxAttempts != nil) || ok && int64(*c.patch.MaxAttempts) != n {
			return fmt.Sprintf("maxAttempts %v, the reference %s", c.patch.MaxAttempts, opts["maxAttempts"])
		}
		var backoff []int
		if json.Unmarshal(opts["retryBackoffMs"], &backoff) == nil != (c.patch.RetryBackoffMs != nil) ||
			backoff != nil && fmt.Sprint(backoff) != fmt.Sprint(*c.patch.RetryBackoffMs) {
			return fmt.Sprintf("retryBackoffMs %v, the reference %s", c.patch.RetryBackoffMs, opts["retryBackoffMs"])
		}
		if n, ok := refWhole(opts["maxAckPending"]); ok != (c.patch.MaxAckPending != nil) || ok && int64(*c.patch.MaxAckPending) != n {
			return fmt.Sprintf("maxAckPending %v, the reference %s", c.patch.MaxAckPending, opts["maxAckPending"])
		}
		return sameString("queue", c.queue, vals)
	})
}

// FuzzDecodeTimer: a schedule is a push message plus exactly one of
// fireAt (RFC 3339, at most ten years ahead) and delayMs (0 to ten years);
// null counts as absent.
func FuzzDecodeTimer(f *testing.F) {
	now := time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)
	tenYears := 10 * 365 * 24 * time.Hour
	ref := refObject{
		fields: map[string]refRule{"transactionId": refTxnID, "data": anyValue,
			"fireAt": func(raw json.RawMessage) bool {
				s, ok := refString(raw)
				at, err := time.Parse(time.RFC3339Nano, s)
				return string(raw) == "null" || ok && err == nil && at.Sub(now) <= tenYears
			},
			"delayMs": func(raw json.RawMessage) bool {
				return string(raw) == "null" || wholeFrom(0, int64(tenYears/time.Millisecond))(raw)
			}},
		across: func(m map[string]json.RawMessage) bool {
			given := func(k string) bool { v, ok := m[k]; return ok && string(v) != "null" }
			return given("fireAt") != given("delayMs")
		},
	}
	decode := func(b []byte) (timerRequest, *queengate.Error) { return decodeTimer(b, now) }
	fuzzDecoder(f, ref, false, decode, func(r timerRequest, vals map[string]json.RawMessage) string {
		if ms, ok := refWhole(vals["delayMs"]); ok && !r.fireAt.Equal(now.Add(time.Duration(ms)*time.Millisecond)) {
			return fmt.Sprintf("fireAt %v for delayMs %d", r.fireAt, ms)
		}
		if !bytes.Equal(r.data, vals["data"]) {
			return fmt.Sprintf("data %q, the reference %q", r.data, vals["data"])
		}
		return ""
	})
}

func FuzzDecodeTimerCancel(f *testing.F) {
	fuzzDecoder(f, refCancel, false, decodeCancel, func(id string, vals map[string]json.RawMessage) string {
		return sameString("timerId", id, vals)
	})
}

func FuzzDecodeTimerList(f *testing.F) {
	f.Add([]byte(`{"queue":"q","from":{"fireAt":"2026-12-01T09:00:00.123456Z","timerId":"` + testLease + `"}}`))
	f.Add([]byte(`{"from":{"fireAt":"2026-12-01T09:00:00Z","timerId":"x","fireAt":"2026-12-01T09:00:00Z"}}`))
	fuzzDecoder(f, refTimerList, true, decodeTimerList, func(l timerList, vals map[string]json.RawMessage) string {
		if n, ok := refWhole(vals["limit"]); ok != (l.limit != nil) || ok && int64(*l.limit) != n {
			return fmt.Sprintf("limit %v, the reference %s", l.limit, vals["limit"])
		}
		if diff := samePosition(l.from, vals["from"]); diff != "" {
			return diff
		}
		return sameString("queue", l.queue, vals)
	})
}

// samePosition compares a decoded timer position with the reference's
// "from" object.
func samePosition(got *model.TimerPosition, raw json.RawMessage) string {
	if raw == nil {
		if got != nil {
			return fmt.Sprintf("a position %v from no \"from\"", got)
		}
		return ""
	}
	var want struct {
		FireAt  time.Time `json:"fireAt"`
		TimerID string    `json:"timerId"`
	}
	if got == nil || json.Unmarshal(raw, &want) != nil || !got.FireAt.Equal(want.FireAt) || got.ID != want.TimerID {
		return fmt.Sprintf("position %v, the reference %s", got, raw)
	}
	return ""
}

// FuzzDecodeQueuesPage: the optional body of a queue list, a get queue
// or an overview is {"from": "<name>"} (one decoder, decodeFrom; the
// shape only names the request in errors).
func FuzzDecodeQueuesPage(f *testing.F) {
	f.Add([]byte(`{"from":"orders"}`))
	f.Add([]byte(`{"from":"a.b"}`))
	f.Add([]byte(`{"From":"orders"}`))
	decode := func(b []byte) (string, *queengate.Error) { return decodeFrom(b, queuesPageShape) }
	fuzzDecoder(f, refPage, true, decode, func(from string, vals map[string]json.RawMessage) string {
		return sameString("from", from, vals)
	})
}
