package consumer

import (
	"testing"
	"unicode/utf8"
)

func TestTruncateKeepsCharactersWhole(t *testing.T) {
	s := "ab" + "é" + "c" // é is 2 bytes, at 2..3
	for n, want := range map[int]string{0: "", 2: "ab", 3: "ab", 4: "abé", 10: s} {
		if got := truncate(s, n); got != want || !utf8.ValidString(got) {
			t.Errorf("truncate(%q, %d) = %q, want %q", s, n, got, want)
		}
	}
}
