// Package bodyref is, for tests, a reference for the request bodies
// decoders: docs/protocol.md's rules written again on top of
// encoding/json, the fuzz targets' driver and seeds, and the table runner
// of the decoders' exact messages. The consuming and operator packages'
// decoder tests share it.
package bodyref

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
)

// The fuzz targets below check each request body's decoder against a
// reference written again from the rules in docs/protocol.md, on top of
// encoding/json: the body is strict JSON with no \u0000 or unpaired
// surrogate escape (wiretest.HasUnstorableEscape), an object whose field names are
// exactly the ones listed (case-sensitive), each once, and each value of
// its kind and range. The reference never calls the scanner.

// Rule judges one field's raw value.
type Rule func(raw json.RawMessage) bool

// Object is the reference's view of an object: its Fields' rules, the
// Fields it must have, and a rule Across Fields.
type Object struct {
	Fields   map[string]Rule
	Required []string
	Across   func(m map[string]json.RawMessage) bool
}

// judge says whether raw is an acceptable object; a field name that is
// unknown or repeated (the first, in order) is returned as badName.
func (o Object) judge(raw []byte) (ok bool, badName string) {
	keys, vals, isObj := Members(raw)
	if !isObj {
		return false, ""
	}
	seen := map[string]bool{}
	for _, k := range keys {
		if _, known := o.Fields[k]; !known || seen[k] {
			return false, k
		}
		seen[k] = true
	}
	for k, v := range vals {
		if !o.Fields[k](v) {
			return false, ""
		}
	}
	for _, k := range o.Required {
		if !seen[k] {
			return false, ""
		}
	}
	return o.Across == nil || o.Across(vals), ""
}

// Members lists an object's keys in order, repeats included, with
// encoding/json's tokenizer.
func Members(raw []byte) (keys []string, vals map[string]json.RawMessage, isObj bool) {
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

// Accepts is the reference's verdict on a whole body, and the field
// name a refusal must quote (empty when it need not).
func Accepts(body []byte, o Object) (ok bool, badName string) {
	if !json.Valid(body) || wiretest.HasUnstorableEscape(body) {
		return false, ""
	}
	return o.judge(body)
}

// String reads a JSON string.
func String(raw json.RawMessage) (string, bool) {
	var s string
	return s, len(raw) > 0 && raw[0] == '"' && json.Unmarshal(raw, &s) == nil
}

// IsString: any JSON string.
func IsString(raw json.RawMessage) bool { _, ok := String(raw); return ok }

// RFC3339 is an RFC 3339 string with a zone.
func RFC3339(raw json.RawMessage) bool {
	s, ok := String(raw)
	_, err := time.Parse(time.RFC3339Nano, s)
	return ok && err == nil
}

// StringOfBytes: a string of lo to hi bytes.
func StringOfBytes(lo, hi int) Rule {
	return func(raw json.RawMessage) bool {
		s, ok := String(raw)
		return ok && len(s) >= lo && len(s) <= hi
	}
}

var (
	Name = regexp.MustCompile(`^[A-Za-z0-9_-]{1,128}$`)
	UUID = regexp.MustCompile(`^[0-9a-fA-F]{8}(-[0-9a-fA-F]{4}){3}-[0-9a-fA-F]{12}$`)
)

// Matching: a string re matches.
func Matching(re *regexp.Regexp) Rule {
	return func(raw json.RawMessage) bool { s, ok := String(raw); return ok && re.MatchString(s) }
}

// OneOf: one of these words.
func OneOf(words ...string) Rule {
	return func(raw json.RawMessage) bool {
		s, ok := String(raw)
		return ok && strings.Contains("|"+strings.Join(words, "|")+"|", "|"+s+"|")
	}
}

// Whole reads a JSON number with no fraction or exponent that fits in
// an int64.
func Whole(raw json.RawMessage) (int64, bool) {
	var n json.Number
	if len(raw) == 0 || raw[0] == '"' || json.Unmarshal(raw, &n) != nil || strings.ContainsAny(string(n), ".eE") {
		return 0, false
	}
	v, err := strconv.ParseInt(string(n), 10, 64)
	return v, err == nil
}

// WholeFrom: a whole number from lo to hi.
func WholeFrom(lo, hi int64) Rule {
	return func(raw json.RawMessage) bool { n, ok := Whole(raw); return ok && n >= lo && n <= hi }
}

// AnyValue: any JSON value.
func AnyValue(json.RawMessage) bool { return true }

// ObjectOf: an object o accepts.
func ObjectOf(o Object) Rule {
	return func(raw json.RawMessage) bool { ok, _ := o.judge(raw); return ok }
}

// ArrayOf: an array of lo to hi elements, each elem.
func ArrayOf(lo, hi int, elem Rule) Rule {
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

var AckItem = Object{
	Fields: map[string]Rule{"transactionId": StringOfBytes(1, 256), "offset": WholeFrom(0, 1<<63-1),
		"status": OneOf("completed", "failed"), "error": StringOfBytes(0, 4096), "delayMs": WholeFrom(0, 86400000)},
	Required: []string{"status"},
	Across: func(m map[string]json.RawMessage) bool {
		_, id := m["transactionId"]
		_, off := m["offset"]
		// a delay is for a failed item only (0 asks for none)
		delay, _ := Whole(m["delayMs"])
		status, _ := String(m["status"])
		return id != off && (delay == 0 || status == "failed")
	},
}

var AckItems = ArrayOf(1, 10000, ObjectOf(AckItem))

var (
	Ack = Object{Fields: map[string]Rule{"group": Matching(Name), "leaseId": Matching(UUID), "items": AckItems},
		Required: []string{"group", "leaseId", "items"}}
	Pop = Object{
		Fields: map[string]Rule{"group": Matching(Name), "consumer": StringOfBytes(0, 128), "max": WholeFrom(1, 10000),
			"leaseMs": WholeFrom(1, 3600000), "waitMs": WholeFrom(0, 20000), "maxBytes": WholeFrom(1, 1<<30),
			"maxAckPending": WholeFrom(1, 1000000),
			"ack":           ObjectOf(PopAck), "acks": ArrayOf(1, 100, ObjectOf(PopAck)), "partitions": WholeFrom(1, 100)},
		Required: []string{"group"},
		// maxAckPending bounds a named consumer; one ack or a list of them
		Across: func(m map[string]json.RawMessage) bool {
			consumer, _ := String(m["consumer"])
			_, limited := Whole(m["maxAckPending"])
			_, ack := m["ack"]
			_, acks := m["acks"]
			return (!limited || consumer != "") && !(ack && acks)
		},
	}
	// PopAck is the ack a pop carries, alone or in a list.
	PopAck = Object{Fields: map[string]Rule{"partition": Matching(Name), "leaseId": Matching(UUID), "items": AckItems},
		Required: []string{"partition", "leaseId", "items"}}
	Renew = Object{Fields: map[string]Rule{"group": Matching(Name), "leaseId": Matching(UUID), "leaseMs": WholeFrom(1, 3600000)},
		Required: []string{"group", "leaseId", "leaseMs"}}
	Release = Object{Fields: map[string]Rule{"group": Matching(Name), "leaseId": Matching(UUID)},
		Required: []string{"group", "leaseId"}}
	Read = Object{Fields: map[string]Rule{"from": WholeFrom(-1<<63, 1<<63-1), "max": WholeFrom(-1<<63, 1<<63-1),
		"maxBytes": WholeFrom(-1<<63, 1<<63-1)}}
	Get = Object{
		Fields: map[string]Rule{"messageId": IsString, "queue": IsString, "partition": IsString, "transactionId": IsString},
		Across: func(m map[string]json.RawMessage) bool {
			v := func(k string) string { s, _ := String(m[k]); return s }
			if v("messageId") != "" {
				return v("queue")+v("partition")+v("transactionId") == ""
			}
			return v("queue") != "" && v("partition") != "" && v("transactionId") != ""
		},
	}
	Options = Object{Fields: map[string]Rule{"dedupWindowSeconds": WholeFrom(0, 1<<31-1), "retentionSeconds": WholeFrom(0, 1<<31-1),
		"maxAttempts": WholeFrom(0, 1<<31-1), "onConflict": OneOf("ignore", "flag", "reject"), "retainUntil": OneOf("age", "consumed"),
		"retryDelayMs": WholeFrom(0, 86400000), "retryBackoffMs": ArrayOf(0, 64, WholeFrom(0, 86400000)),
		"maxAckPending": WholeFrom(0, 1000000), "groupIdleSeconds": WholeFrom(0, 1<<31-1), "maxUnheardDeliveries": WholeFrom(0, 1000)}}
	Configure = Object{Fields: map[string]Rule{"queue": Matching(Name), "options": ObjectOf(Options), "mode": OneOf("merge", "replace")},
		Required: []string{"queue"}}
	Cancel    = Object{Fields: map[string]Rule{"timerId": Matching(UUID)}, Required: []string{"timerId"}}
	TimerList = Object{Fields: map[string]Rule{"queue": Matching(Name), "limit": WholeFrom(1, 10000),
		"from": ObjectOf(Object{Fields: map[string]Rule{"fireAt": RFC3339, "timerId": Matching(UUID)},
			Required: []string{"fireAt", "timerId"}})}}
	// A paged list's optional body: the name to list from.
	Page = Object{Fields: map[string]Rule{"from": Matching(Name)}}
	// A push message's transactionId: a string of 1 to 256 bytes, or null
	// (minted).
	TxnID   = func(raw json.RawMessage) bool { return string(raw) == "null" || StringOfBytes(1, 256)(raw) }
	Explain = Object{Fields: map[string]Rule{"transactionId": StringOfBytes(1, 256), "data": AnyValue},
		Required: []string{"transactionId"}}
)

// FuzzBody runs one body through decode and the reference: the same
// verdict, a refusal for a field name that quotes it, and no message in
// Go's words. It reports whether the body was accepted, for the caller to
// compare what was decoded.
func FuzzBody(t *testing.T, body []byte, ref Object, decode func([]byte) *queengate.Error) bool {
	t.Helper()
	werr := decode(body)
	if !utf8.Valid(body) {
		return false // the scanner is stricter than encoding/json here, by design
	}
	want, badName := Accepts(body, ref)
	if werr != nil && strings.Contains(werr.Text, "nesting deeper") {
		return false // encoding/json has no depth bound
	}
	if (werr == nil) != want {
		t.Fatalf("decoder says %v, the reference accepts: %v; body %q", werr, want, body)
	}
	if werr == nil {
		return true
	}
	if werr.Code != 400 || SpeaksGo(werr.Text) {
		t.Fatalf("%d %q", werr.Code, werr.Text)
	}
	if badName != "" && len(badName) <= wire.ExcerptBytes && !strings.Contains(werr.Text, strconv.Quote(badName)) {
		t.Fatalf("the refusal of field %q does not name it: %q; body %q", badName, werr.Text, body)
	}
	return false
}

// Seeds are bodies of every bug item 2 of issue 21 named and of the
// field rules, shared by the targets: each target's reference judges them.
var Seeds = []string{
	``, ` `, `{}`, `[]`, `null`, `"x"`, `{"a":1}`, `{"a":1,"a":2}`, `{"\u0000":1}`, `{"a":"\ud800"}`,
	`{"group":"g","leaseId":"` + TestLease + `","items":[{"transactionId":"t","STATUS":"completed"}]}`,
	`{"group":"g","leaseId":"` + TestLease + `","items":[{"OFFSET":1,"status":"completed"}]}`,
	`{"group":"g","LeaseID":"` + TestLease + `","items":[{"transactionID":"t","status":"completed"}]}`,
	`{"group":"g","leaseId":"` + TestLease + `","items":[{"offset":2,"status":"completed","status":"failed"}]}`,
	`{"group":"g","leaseId":"` + TestLease + `","items":[{"offset":"2","status":"completed"}]}`,
	`{"group":"g","leaseId":"` + TestLease + `","items":{"offset":2,"status":"completed"}}`,
	`{"group":"g","leaseId":"not-a-lease","items":[{"offset":2,"status":"completed"}]}`,
	`{"group":"g","leaseId":"` + TestLease + `","leaseMs":0}`,
	`{"group":"g","leaseId":"` + TestLease + `","leaseMs":1000}`,
	`{"group":"g","consumer":"c","max":5,"leaseMs":1000,"waitMs":0,"maxBytes":1024,"ack":{"partition":"p","leaseId":"` + TestLease + `","items":[{"offset":0,"status":"completed","error":"e"}]}}`,
	`{"group":"g","maxBytes":1073741825}`, `{"group":"g","consumer":"c","maxAckPending":10}`, `{"group":"g","maxAckPending":10}`, `{"group":"g","max":1e2}`, `{"group":"g","max":-0}`,
	`{"from":1,"max":2,"maxBytes":3}`, `{"from":1.0}`, `{"from":99999999999999999999}`,
	`{"messageId":"x"}`, `{"queue":"q","partition":"p","transactionId":"t"}`,
	`{"transactionId":"t","data":{"a": 1}}`, `{"transactionId":"\u0000"}`, `{"transactionId":"` + strings.Repeat("x", 300) + `"}`,
	`{"queue":"q","mode":"merge","options":{"dedupWindowSeconds":1,"onConflict":"reject","retainUntil":"consumed"}}`,
	`{"queue":"q","options":{"maxAttempts":1,"maxAttempts":2}}`,
	`{"queue":"q","options":{"retryDelayMs":1000,"retryBackoffMs":[1000,5000,30000]}}`, `{"queue":"q","options":{"retryBackoffMs":[]}}`,
	`{"queue":"q","options":{"retryBackoffMs":[1000,-1]}}`, `{"queue":"q","options":{"retryBackoffMs":5}}`,
	`{"group":"g","leaseId":"` + TestLease + `","items":[{"offset":2,"status":"failed","delayMs":5000}]}`,
	`{"group":"g","leaseId":"` + TestLease + `","items":[{"offset":2,"status":"completed","delayMs":5000}]}`,
	`{"group":"g","leaseId":"` + TestLease + `","items":[{"offset":2,"status":"failed","delayMs":86400001}]}`,
	`{"transactionId":"t","data":1,"delayMs":5}`, `{"data":1,"fireAt":"2026-12-01T10:00:00Z"}`, `{"data":1,"fireAt":null,"delayMs":0}`,
	`{"timerId":"` + TestLease + `"}`, `{"queue":"q","limit":5}`,
	`{"group":"g","partitions":10,"acks":[{"partition":"p","leaseId":"` + TestLease + `","items":[{"offset":0,"status":"completed"}]},` +
		`{"partition":"q","leaseId":"` + TestLease + `","items":[{"offset":3,"status":"failed"}]}]}`,
	`{"group":"g","partitions":0}`, `{"group":"g","partitions":101}`, `{"group":"g","acks":[]}`, `{"group":"g","acks":{}}`,
	`{"group":"g","ack":{"partition":"p","leaseId":"` + TestLease + `","items":[{"offset":0,"status":"completed"}]},"acks":[{"partition":"p","leaseId":"` + TestLease + `","items":[{"offset":0,"status":"completed"}]}]}`,
}

// CheckBody runs FuzzBody on a decoder returning T and, for a body
// accepted, agree's comparison of what it decoded with the reference's
// view of the body's Fields ("" when they agree). blankOK: a body of
// JSON whitespace only is accepted as {} (an optional body).
func CheckBody[T any](t *testing.T, body []byte, ref Object, blankOK bool, decode func([]byte) (T, *queengate.Error),
	agree func(got T, vals map[string]json.RawMessage) string) {
	t.Helper()
	var got T
	decodeOnly := func(b []byte) (werr *queengate.Error) { got, werr = decode(b); return werr }
	if blankOK && len(bytes.Trim(body, " \t\r\n")) == 0 {
		if werr := decodeOnly(body); werr != nil {
			t.Fatalf("a blank body is refused: %v", werr)
		}
		ref, body = Object{}, []byte("{}")
	}
	if !FuzzBody(t, body, ref, decodeOnly) {
		return
	}
	_, vals, _ := Members(body)
	if diff := agree(got, vals); diff != "" {
		t.Fatalf("%s; body %q", diff, body)
	}
}

// FuzzDecoder is the fuzz target of one body's decoder, seeded with Seeds.
func FuzzDecoder[T any](f *testing.F, ref Object, blankOK bool, decode func([]byte) (T, *queengate.Error),
	agree func(got T, vals map[string]json.RawMessage) string) {
	for _, s := range Seeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) { CheckBody(t, body, ref, blankOK, decode, agree) })
}

// SameString compares a decoded string with the reference's field.
func SameString(name, got string, vals map[string]json.RawMessage) string {
	if want, _ := String(vals[name]); got != want {
		return fmt.Sprintf("%s %q, the reference %q", name, got, want)
	}
	return ""
}

// TestLease is a well-formed leaseId.
const TestLease = "5f0c2a9e-3b1d-4c6e-9a8f-0123456789ab"

// DecodeCase is one body and what its decoder says: Want is the exact
// error message, or "" for a body accepted. A test package declares its
// own type of these fields, so that its tables may list them unkeyed.
type DecodeCase interface {
	~struct{ Name, Body, Want string }
}

// RunDecodeCases checks each case's message exactly, and that no message
// speaks Go instead of the protocol.
func RunDecodeCases[C DecodeCase](t *testing.T, decode func(body []byte) *queengate.Error, cases []C) {
	t.Helper()
	for _, tc := range cases {
		c := struct{ Name, Body, Want string }(tc)
		t.Run(c.Name, func(t *testing.T) {
			werr := decode([]byte(c.Body))
			switch {
			case c.Want == "" && werr != nil:
				t.Fatalf("refused: %v", werr.Text)
			case c.Want == "":
				return
			case werr == nil:
				t.Fatalf("accepted; want %q", c.Want)
			case werr.Code != 400 || werr.Text != c.Want:
				t.Fatalf("%d %q\nwant 400 %q", werr.Code, werr.Text, c.Want)
			}
			if SpeaksGo(werr.Text) {
				t.Errorf("the message speaks Go: %s", werr.Text)
			}
		})
	}
}

// SpeaksGo reports Go's type names or encoding/json's wording.
func SpeaksGo(msg string) bool {
	for _, w := range []string{"int64", "int32", "float64", "slice", "struct", "json:", "Go value", "unmarshal"} {
		if strings.Contains(msg, w) {
			return true
		}
	}
	return false
}
