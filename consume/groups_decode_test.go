package consume

import (
	"bytes"
	"encoding/json"
	"regexp"
	"testing"
	"unicode/utf8"

	queengate "github.com/queengate/queengate"
	"github.com/queengate/queengate/internal/wire/wiretest"
)

// FuzzDecodeGroups checks the groups body decoder against encoding/json
// and the contract's rules, computed here: no body, or one object with
// "group" (required) and "from", each once, each a string naming a group
// or partition, and nothing else.
func FuzzDecodeGroups(f *testing.F) {
	for _, seed := range []string{
		``, `{"group":"g"}`, `{"group":"g","from":"p-1"}`, `{"from":"p"}`, `{"group":"g","group":"h"}`,
		`{"Group":"g"}`, `{"group":1}`, `{"group":"a.b"}`, `{"group":"\u0067"}`, `{"gr\u006fup":"g"}`,
		`{"group":"g"} x`, ` `, `[]`, `{"group":"g","from":null}`, `{"group":"\u0000"}`,
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		if !utf8.Valid(body) {
			return // the scanner is stricter than encoding/json here, by design
		}
		got, werr := decodeGroups(body)
		want, ok := groupsOracle(body)
		if (werr == nil) != ok || ok && got != want {
			t.Fatalf("body %q: decoded %+v, %v; want %+v, accepted %v", body, got, werr, want, ok)
		}
		if werr != nil && werr.Code != queengate.CodeBadRequest {
			t.Fatalf("body %q: %v, want a 400", body, werr)
		}
	})
}

var nameRule = regexp.MustCompile(`^[A-Za-z0-9_-]{1,128}$`)

// groupsOracle decodes a groups body with encoding/json.
func groupsOracle(body []byte) (queengate.GroupsRequest, bool) {
	var req queengate.GroupsRequest
	if len(bytes.Trim(body, " \t\r\n")) == 0 {
		return req, true // no body, or JSON whitespace alone
	}
	if !json.Valid(body) || wiretest.HasUnstorableEscape(body) {
		return req, false
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return req, false
	}
	seen := map[string]bool{}
	for dec.More() {
		tok, err := dec.Token()
		key, isKey := tok.(string)
		var raw json.RawMessage
		if err != nil || !isKey || seen[key] || (key != "group" && key != "from") || dec.Decode(&raw) != nil {
			return req, false
		}
		seen[key] = true
		var s string
		if raw[0] != '"' || json.Unmarshal(raw, &s) != nil || !nameRule.MatchString(s) {
			return req, false
		}
		if key == "group" {
			req.Group = s
		} else {
			req.From = s
		}
	}
	return req, req.Group != ""
}
