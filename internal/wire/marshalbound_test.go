package wire

import (
	"encoding/json"
	"testing"
	"unicode/utf8"
)

// MarshalledStringBound is never below what encoding/json writes for a
// string, and jsonStringLen is exactly what AppendJSONString writes.
func FuzzStringLengths(f *testing.F) {
	for _, s := range []string{"", "plain", `"q" \ back`, "\n\r\t\x00\x1f", "<a>&amp;</a>", "\u2028\u2029", "é€😀", "\u2019 ’"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if !utf8.ValidString(s) {
			return // transactionIds are valid UTF-8: the decoder refuses anything else
		}
		m, _ := json.Marshal(s)
		if bound := MarshalledStringBound(s); int64(len(m)) > bound {
			t.Fatalf("%q: encoding/json writes %d bytes, bound %d", s, len(m), bound)
		}
		if got, want := len(AppendJSONString(nil, s)), jsonStringLen(s); got != want {
			t.Fatalf("%q: AppendJSONString writes %d bytes, jsonStringLen says %d", s, got, want)
		}
	})
}
