package gateway

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"unicode/utf8"
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
		{"lone surrogate becomes U+FFFD", `[{"transactionId":"\ud800x"}]`, 0, "\uFFFDx="},
		{"null id is minted", `[{"transactionId":null,"data":1}]`, 0, `*=1`},
		{"absent id is minted", `[{"data":"s"}]`, 0, `*="s"`},
		{"unknown fields ignored", `[{"transactionId":"a","extra":{"deep":[{}]},"data":true}]`, 0, `a=true`},
		{"last duplicate key wins", `[{"transactionId":"a","transactionId":"b"}]`, 0, `b=`},
		{"numbers", `[{"transactionId":"n","data":[-0,1.5e10,2E-3,0.0]}]`, 0, `n=[-0,1.5e10,2E-3,0.0]`},
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
		{"NUL in id", `[{"transactionId":"a\u0000b"}]`, 400, "must not contain"},
		{"NUL escape in data is fine", `[{"transactionId":"z","data":"a\u0000b"}]`, 0, `z="a\u0000b"`},
		{"long id", `[{"transactionId":"` + strings.Repeat("é", 129) + `"}]`, 400, "1-256 bytes"},
		{"too many", `[{},{},{},{}]`, 413, "at most 3"},
		{"too deep", strings.Repeat("[", 600) + strings.Repeat("]", 600), 400, "nesting"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			msgs, minted, werr := decodePush([]byte(c.body), 3)
			if c.code != 0 {
				if werr == nil || werr.Code != c.code || !strings.Contains(werr.Message, c.want) {
					t.Fatalf("got %v, want %d mentioning %q", werr, c.code, c.want)
				}
				return
			}
			if werr != nil {
				t.Fatalf("rejected: %v", werr)
			}
			var parts []string
			for i, m := range msgs {
				id := m.TxnID
				if minted[i] {
					if !strings.HasPrefix(id, "qg-") {
						t.Errorf("minted id %q", id)
					}
					id = "*"
				}
				parts = append(parts, id+"="+string(m.Data))
			}
			if got := strings.Join(parts, "|"); got != c.want {
				t.Errorf("decoded %q, want %q", got, c.want)
			}
		})
	}
}

// FuzzDecodePush checks the scanner against encoding/json: the same
// verdict on well-formed UTF-8 input, the same transactionId and the same
// data value for every accepted message.
func FuzzDecodePush(f *testing.F) {
	for _, seed := range []string{
		`{"transactionId":"a","data":{"x":[1,2,{"y":null}]}}`,
		`[{"transactionId":"\u00e9\ud83d\ude00"},{"data":-1.5e+3}]`,
		`[{"transactionId":null},{"data":"\"\\\/\b\f\n\r\t"}]`,
		`[{}, {"other": [true, false]}]`,
		`[1]`, `{`, `[{"data":01}]`, `"s"`, ``,
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		raw, count, err := scanPush(body, 1<<20)
		if !utf8.Valid(body) {
			return // the scanner is stricter than encoding/json here, by design
		}
		if (err == nil || err == errNotMessages) != json.Valid(body) && !strings.Contains(errString(err), "nesting") {
			t.Fatalf("scanner err %v, json.Valid %v, body %q", err, json.Valid(body), body)
		}
		if err != nil {
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
			if data, ok := fields["data"]; ok != (raw[i].data != nil) || ok && !jsonEqual(data, raw[i].data) {
				t.Fatalf("element %d data %s, scanner %s", i, data, raw[i].data)
			}
			id, ok := fields["transactionId"]
			var s string
			isString := ok && json.Unmarshal(id, &s) == nil && bytes.TrimSpace(id)[0] == '"'
			if isString != raw[i].txnIDSet || isString && s != string(raw[i].txnID) {
				t.Fatalf("element %d transactionId %s (%q), scanner %q set=%v", i, id, s, raw[i].txnID, raw[i].txnIDSet)
			}
		}
	})
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
