package output

import "testing"

// Printable escapes what could drive a terminal or break a table, and
// nothing else.
func TestPrintable(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"\x1b[31mred\n":     `\x1b[31mred\n`,
		"a\tb\rc\x7f":       `a\tb\rc\x7f`,
		"csi\u009b2J":       `csi\u009b2J`,
		"bidi\u202eevil":    `bidi\u202eevil`,
		"bad\xffutf8":       `bad\xffutf8`,
		`{"a": "é ✓ \n"}`:   `{"a": "é ✓ \n"}`, // JSON's own escapes stay as they are
		"plain text, 100 %": "plain text, 100 %",
	} {
		if got := Printable(in); got != want {
			t.Errorf("Printable(%q) = %q, want %q", in, got, want)
		}
	}
}
