package wire

import (
	"bytes"
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/queengate/queengate/internal/wire/wiretest"
)

func TestDecodePush(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name, body string
		code       int    // 0: accepted
		want       string // accepted: "txn=data|txn=data"; "*" marks a minted id
	}{
		{"single object", `{"transactionId":"a","data":{"x":1}}`, 0, `a={"x":1}`},
		{"array", ` [ {"transactionId":"a"} , {"transactionId":"b","data":[1,"2",null]} ] `, 0, `a=|b=[1,"2",null]`},
		{"escapes in id", `[{"transactionId":"\u00e9\n\"\\\/\ud83d\ude00"}]`, 0, "é\n\"\\/😀="},
		{"null id is minted", `[{"transactionId":null,"data":1}]`, 0, `*=1`},
		{"absent id is minted", `[{"data":"s"}]`, 0, `*="s"`},
		{"numbers", `[{"transactionId":"n","data":[-0,1.5e10,2E-3,0.0]}]`, 0, `n=[-0,1.5e10,2E-3,0.0]`},
		{"keys inside data are the producer's", `{"transactionId":"k","data":{"a":1,"a":2,"extra":3}}`, 0, `k={"a":1,"a":2,"extra":3}`},
		{"surrogate pair in data", `{"transactionId":"p","data":"\ud83d\ude00"}`, 0, `p="\ud83d\ude00"`},
		{"misspelt transactionId", `{"transactionID":"t-1","data":1}`, 400, `message 0: unknown field "transactionID": a message has only "transactionId", "data", "headers" and "dataEncoding"; did you mean "transactionId"?`},
		{"snake case transactionId", `[{"data":1},{"transaction_id":"t","payload":2}]`, 400, `message 1: unknown field "transaction_id"`},
		{"alias of data", `{"transactionId":"t","payload":{}}`, 400, `unknown field "payload": a message has only "transactionId", "data", "headers" and "dataEncoding"; did you mean "data"?`},
		{"unrelated field", `{"transactionId":"t","extra":{"deep":[{}]},"data":true}`, 400, `unknown field "extra": a message has only "transactionId", "data", "headers" and "dataEncoding"`},
		{"duplicate transactionId", `[{"transactionId":"a","transactionId":"b"}]`, 400, `message 0: field "transactionId" is given twice`},
		{"duplicate data", `{"data":1,"transactionId":"a","data":2}`, 400, `field "data" is given twice`},
		{"lone high surrogate in data", `{"transactionId":"x","data":"\ud800"}`, 400, `message 0: data: unpaired UTF-16 surrogate \ud800`},
		{"lone low surrogate deep in data", `[{"data":1},{"data":{"k":["\udc00x"]}}]`, 400, `message 1: data: unpaired UTF-16 surrogate \udc00`},
		{"reversed pair", `{"data":"\ude00\ud83d"}`, 400, "unpaired UTF-16 surrogate"},
		{"NUL escape in data", `[{"transactionId":"z","data":"a\u0000b"}]`, 400, `message 0: data: \u0000 (NUL) cannot be stored`},
		{"NUL escape in a data key", `[{"transactionId":"z","data":{"\u0000":1}}]`, 400, `\u0000 (NUL) cannot be stored`},
		{"lone surrogate in id", `[{"transactionId":"\ud800x"}]`, 400, "transactionId: unpaired UTF-16 surrogate"},
		{"empty", ``, 400, "empty body"},
		{"whitespace", "  \n", 400, "empty body"},
		{"scalar", `"x"`, 400, "object or an array"},
		{"empty array", `[]`, 400, "empty array"},
		{"not an object", `[1]`, 400, "not a JSON object"},
		{"array element", `[[]]`, 400, "not a JSON object"},
		{"trailing comma", `[{},]`, 400, "malformed"},
		{"trailing data", `{} {}`, 400, "malformed"},
		{"leading zero", `[{"data":01}]`, 400, "malformed"},
		{"bare dot", `[{"data":1.}]`, 400, "malformed"},
		{"bad literal", `[{"data":nul}]`, 400, "malformed"},
		{"control char", "[{\"transactionId\":\"a\x01\"}]", 400, "malformed"},
		{"bad escape", `[{"transactionId":"\x"}]`, 400, "malformed"},
		{"invalid UTF-8", "[{\"data\":\"\xff\"}]", 400, "malformed"},
		{"unterminated", `[{"transactionId":"a`, 400, "malformed"},
		{"single quotes", `[{'transactionId':'a'}]`, 400, "malformed"},
		{"number id", `[{"transactionId":7}]`, 400, "must be a string"},
		{"object id", `[{"transactionId":{}}]`, 400, "must be a string"},
		{"empty id", `[{"transactionId":""}]`, 400, "1-256 bytes"},
		{"NUL in id", `[{"transactionId":"a\u0000b"}]`, 400, `message 0: transactionId: \u0000 (NUL) cannot be stored: PostgreSQL refuses it in text and jsonb`},
		{"long id", `[{"transactionId":"` + strings.Repeat("é", 129) + `"}]`, 400, "1-256 bytes"},
		{"too many", `[{},{},{},{}]`, 413, "at most 3"},
		{"too deep", strings.Repeat("[", 600) + strings.Repeat("]", 600), 400, "nesting"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			msgs, werr := DecodePush([]byte(c.body), 3)
			if c.code != 0 {
				if werr == nil || werr.Code != c.code || !strings.Contains(werr.Text, c.want) {
					t.Fatalf("got %v, want %d mentioning %q", werr, c.code, c.want)
				}
				return
			}
			if werr != nil {
				t.Fatalf("rejected: %v", werr)
			}
			var parts []string
			for _, m := range msgs {
				id := m.TxnID
				if strings.HasPrefix(id, "qg-") {
					id = "*" // minted
				}
				parts = append(parts, id+"="+string(m.Data))
			}
			if got := strings.Join(parts, "|"); got != c.want {
				t.Errorf("decoded %q, want %q", got, c.want)
			}
		})
	}
}

// FuzzDecodePush checks the scanner against encoding/json plus the
// contract's own rules, each computed independently here: the same
// verdict on well-formed UTF-8 input, the same transactionId and the same
// data value for every accepted message; and a body is refused when a
// message object has a field other than transactionId and data or a
// field twice, or any string anywhere holds \u0000 or an unpaired
// surrogate escape (jsonb cannot store them).
func FuzzDecodePush(f *testing.F) {
	for _, seed := range []string{
		`{"transactionId":"a","data":{"x":[1,2,{"y":null}]}}`,
		`[{"transactionId":"\u00e9\ud83d\ude00"},{"data":-1.5e+3}]`,
		`[{"transactionId":null},{"data":"\"\\\/\b\f\n\r\t"}]`,
		`[{}, {"other": [true, false]}]`,
		`{"data":"\ud800"}`, `{"data":{"\u0000":1}}`, `{"data":1,"data":2}`,
		`[1]`, `{`, `[{"data":01}]`, `"s"`, ``,
		`[{"headers":{"a":"b"}},{"headers":{"a":"b"}}]`, `[{"headers":{"a":"b"}},{"headers":{"a":"b"}x}]`,
		`[{"headers":{"a":"b"}},{"headers":{"a":"b"},"headers":{"a":"b"}}]`,
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		raw, count, err := scanPush(nil, body, 1<<20)
		if !utf8.Valid(body) {
			return // the scanner is stricter than encoding/json here, by design
		}
		rejected := err != nil && err != errNotMessages
		for _, m := range raw {
			rejected = rejected || m.bad != ""
		}
		wantRejected := !json.Valid(body) || wiretest.HasUnstorableEscape(body) || hasBadMessageField(body)
		if rejected != wantRejected && !strings.Contains(errString(err), "nesting") {
			t.Fatalf("scanner err %v (rejected %v), want rejected %v, body %q", err, rejected, wantRejected, body)
		}
		if rejected || err != nil {
			return
		}
		var elems []json.RawMessage
		if bytes.TrimSpace(body)[0] == '[' {
			if err := json.Unmarshal(body, &elems); err != nil {
				t.Fatal(err)
			}
		} else {
			elems = []json.RawMessage{body}
		}
		if count != len(elems) || len(raw) != len(elems) {
			t.Fatalf("%d messages, encoding/json sees %d", len(raw), len(elems))
		}
		for i, e := range elems {
			var fields map[string]json.RawMessage
			if json.Unmarshal(e, &fields) != nil {
				if !raw[i].notObj {
					t.Fatalf("element %d %s is not an object but was decoded as one", i, e)
				}
				continue
			}
			if data, ok := fields["data"]; ok != (raw[i].Data != nil) || ok && !jsonEqual(data, raw[i].Data) {
				t.Fatalf("element %d data %s, scanner %s", i, data, raw[i].Data)
			}
			id, ok := fields["transactionId"]
			var s string
			isString := ok && json.Unmarshal(id, &s) == nil && bytes.TrimSpace(id)[0] == '"'
			if isString != raw[i].TxnIDSet || isString && s != string(raw[i].TxnID) {
				t.Fatalf("element %d transactionId %s (%q), scanner %q set=%v", i, id, s, raw[i].TxnID, raw[i].TxnIDSet)
			}
		}
	})
}

// hasBadMessageField reports, for valid JSON, a message object (the body,
// or an element of the body array) with a field other than transactionId
// and data, or a field given twice.
func hasBadMessageField(body []byte) bool {
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	tok, err := dec.Token()
	if err != nil {
		return false
	}
	objectBad := func() bool { // after its '{'
		seen := map[string]bool{}
		bad := false
		for dec.More() {
			k, err := dec.Token()
			if err != nil {
				return bad
			}
			key, _ := k.(string)
			if !slices.Contains(messageFields, key) || seen[key] {
				bad = true
			}
			seen[key] = true
			var skip json.RawMessage
			if dec.Decode(&skip) != nil {
				return bad
			}
		}
		_, _ = dec.Token() // '}'
		return bad
	}
	switch tok {
	case json.Delim('{'):
		return objectBad()
	case json.Delim('['):
		bad := false
		for dec.More() {
			var elem json.RawMessage
			if dec.Decode(&elem) != nil {
				return bad
			}
			if len(elem) > 0 && elem[0] == '{' {
				bad = hasBadMessageField(elem) || bad
			}
		}
		return bad
	}
	return false
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

func jsonEqual(a, b []byte) bool {
	var x, y any
	return json.Unmarshal(a, &x) == nil && json.Unmarshal(b, &y) == nil && bytes.Equal(mustMarshal(x), mustMarshal(y))
}

func mustMarshal(v any) []byte {
	b, _ := json.Marshal(v)
	return b
}

func TestHeaderValueEscapesControlBytes(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"plain message":            "plain message",
		"nul\x00here":              `nul\x00here`,
		"line\r\nInjected: header": `line\x0d\x0aInjected: header`,
		"tab\tand del\x7f":         `tab\x09and del\x7f`,
		"unicode é stays":          "unicode é stays",
	} {
		if got := headerValue(in); got != want {
			t.Errorf("headerValue(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestNeighboursShareTheirMeta: messages repeating the headers of the one
// before share its meta, checked once; each keeps its own data, and a
// neighbour's bad base64 is still refused, naming it.
func TestNeighboursShareTheirMeta(t *testing.T) {
	h := `"headers":{"a":"1","b":["x","y"]}`
	msgs, werr := DecodePush([]byte(`[{"data":1,`+h+`},{"data":2,`+h+`},{"data":"AAE=","dataEncoding":"base64",`+h+`},`+
		`{"data":"AAI=","dataEncoding":"base64",`+h+`},{"data":3,"headers":{"a":"2"}},{"data":4}]`), 10)
	if werr != nil {
		t.Fatal(werr)
	}
	want := []struct{ data, meta string }{
		{`1`, `{"headers":{"a":"1","b":["x","y"]}}`},
		{`2`, `{"headers":{"a":"1","b":["x","y"]}}`},
		{`"AAE="`, `{"headers":{"a":"1","b":["x","y"]},"dataEncoding":"base64"}`},
		{`"AAI="`, `{"headers":{"a":"1","b":["x","y"]},"dataEncoding":"base64"}`},
		{`3`, `{"headers":{"a":"2"}}`},
		{`4`, ``},
	}
	for i, w := range want {
		if string(msgs[i].Data) != w.data || string(msgs[i].Meta) != w.meta {
			t.Errorf("message %d: %s %s, want %s %s", i, msgs[i].Data, msgs[i].Meta, w.data, w.meta)
		}
	}
	_, werr = DecodePush([]byte(`[{"data":"AAE=","dataEncoding":"base64"},{"data":"A","dataEncoding":"base64"}]`), 10)
	if werr == nil || werr.Code != 400 || !strings.Contains(werr.Text, "message 1: data is not standard base64") {
		t.Errorf("bad base64 beside good: %v, want a 400 naming message 1", werr)
	}
}

// TestARepeatedHeadersObjectIsReadLikeAnyOther: a message repeating the
// last one's headers object is not scanned again (pushScan.headers), and
// still decodes as if it were: what follows the repeat is checked, and a
// near repeat is read in full.
func TestARepeatedHeadersObjectIsReadLikeAnyOther(t *testing.T) {
	h := `{"a":"1"}`
	for _, c := range []struct{ body, meta1, fault string }{
		{`[{"data":1,"headers":` + h + `},{"data":2,"headers":` + h + `}]`, `{"headers":{"a":"1"}}`, ""},
		{`[{"data":1,"headers":` + h + `},{"data":2,"headers":{"a":"12"}}]`, `{"headers":{"a":"12"}}`, ""},
		{`[{"data":1,"headers":` + h + `},{"data":2,"headers":{"a":"1"},"x":1}]`, "", `unknown field "x"`},
		{`[{"data":1,"headers":` + h + `},{"data":2,"headers":{"a":"1"}}x]`, "", "at byte"},
		{`[{"data":1,"headers":` + h + `},{"data":2,"headers":{"a":"1"}` + "\n}]", `{"headers":{"a":"1"}}`, ""},
		{`[{"data":1,"headers":` + h + `},{"data":2,"headers":{"a":"1"},"headers":1}]`, "", "given twice"},
		{`[{"data":1,"headers":` + h + `},{"headers":{"a":"1"},"data":2,"headers":{"a":"1"}}]`, "", "given twice"},
	} {
		msgs, werr := DecodePush([]byte(c.body), 10)
		switch {
		case c.fault != "" && (werr == nil || !strings.Contains(werr.Text, c.fault)):
			t.Errorf("%s: %v, want a 400 saying %q", c.body, werr, c.fault)
		case c.fault == "" && werr != nil:
			t.Errorf("%s: %v", c.body, werr)
		case c.fault == "" && string(msgs[1].Meta) != c.meta1:
			t.Errorf("%s: message 1's meta %s, want %s", c.body, msgs[1].Meta, c.meta1)
		}
	}
}
