package wire

import (
	"encoding/json"
	"strings"
	"testing"
	"unicode/utf8"
)

// The size bounds agree with the one string encoder, whatever s holds
// (invalid UTF-8 included): jsonStringLen is exactly what
// AppendJSONString writes, MarshalledStringBound is never below it nor
// below what encoding/json writes, and cutJSON's cut takes at most its
// room, is a prefix of what a decoder reads, and is marked.
func FuzzStringLengths(f *testing.F) {
	for _, s := range []string{"", "plain", `"q" \ back`, "\n\r\t\x00\x1f", "<a>&amp;</a>", "\u2028\u2029", "é€😀", "\u2019 ’", "\xff\xe2\x80x"} {
		f.Add(s, 10)
	}
	f.Fuzz(func(t *testing.T, s string, room int) {
		m, _ := json.Marshal(s)
		got := AppendJSONString(nil, s)
		if bound := MarshalledStringBound(s); int64(len(m)) > bound || int64(len(got)) > bound {
			t.Fatalf("%q: encoding/json writes %d bytes, AppendJSONString %d, bound %d", s, len(m), len(got), bound)
		}
		if len(got) != jsonStringLen(s) {
			t.Fatalf("%q: AppendJSONString writes %d bytes, jsonStringLen says %d", s, len(got), jsonStringLen(s))
		}
		var back string
		if err := json.Unmarshal(got, &back); err != nil || !utf8.Valid(got) || back != decoded(s) {
			t.Fatalf("%q: AppendJSONString wrote %s, read back as %q (%v)", s, got, back, err)
		}
		room = 5 + int(uint(room)%uint(2*len(got)+1)) // room for the quotes and the mark, at least
		cut := cutJSON(s, room)
		if n := len(AppendJSONString(nil, cut)); n > room || cut != s && !strings.HasPrefix(decoded(s), strings.TrimSuffix(decoded(cut), "…")) {
			t.Fatalf("%q cut to room %d: %q, %d bytes", s, room, cut, n)
		}
	})
}
