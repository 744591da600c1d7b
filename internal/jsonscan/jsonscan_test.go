package jsonscan_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/queengate/queengate/internal/jsonscan"
)

// scanValue scans one whole value of b, as a body is.
func scanValue(b []byte) error {
	s := &jsonscan.Scanner{B: b}
	s.Value()
	if s.WS(); s.Err == nil && s.I != len(b) {
		s.Fail("text after the value")
	}
	return s.Err
}

// unstorable reports text that holds \u0000 or an unpaired surrogate
// escape, which jsonb refuses.
func unstorable(b []byte) bool {
	return bytes.Contains(b, []byte(`\u0000`)) || bytes.Contains(b, []byte(`\ud`)) || bytes.Contains(b, []byte(`\uD`))
}

// FuzzValueIsEncodingJSONsValid: the scanner takes exactly what
// encoding/json takes as one value, less invalid UTF-8 and what jsonb
// cannot hold (then it says ErrUnstorable).
func FuzzValueIsEncodingJSONsValid(f *testing.F) {
	for _, seed := range []string{`{"a":[1,-0.5e3,true,null,"x\n\u00e9"]}`, `"\ud83d\ude00"`, `"\u0000"`, `[1,]`, `01`, "\"\xff\"", ` {} `} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		err := scanValue(b)
		valid := json.Valid(b)
		switch {
		case err == nil && !valid:
			t.Fatalf("the scanner took %q, which encoding/json refuses", b)
		case err != nil && valid && !unstorable(b) && !strings.Contains(err.Error(), "UTF-8") && !strings.Contains(err.Error(), "nesting"):
			t.Fatalf("the scanner refused %q (%v), which encoding/json takes", b, err)
		case errors.Is(err, jsonscan.ErrUnstorable) && !unstorable(b):
			t.Fatalf("%q called unstorable (%v) without \\u0000 or a surrogate escape", b, err)
		}
	})
}

// FuzzStringDecodesAsEncodingJSON: a string's value is what
// encoding/json decodes, and the text between its quotes when it holds
// no escape.
func FuzzStringDecodesAsEncodingJSON(f *testing.F) {
	for _, seed := range []string{`"plain"`, `"tab\there"`, `"\u00e9\/\\"`, `"\ud83d\ude00"`, `"é"`} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		if len(b) == 0 || b[0] != '"' {
			return
		}
		s := &jsonscan.Scanner{B: b}
		got := s.StringValue()
		if s.Err != nil || s.I != len(b) {
			return
		}
		var want string
		if err := json.Unmarshal(b, &want); err != nil {
			t.Fatalf("the scanner took %q, which encoding/json refuses: %v", b, err)
		}
		if string(got) != want {
			t.Fatalf("%q: the scanner decoded %q, encoding/json %q", b, got, want)
		}
	})
}

// TestAFailureIsKeptWithItsPlace: the first failure stays, named with
// the part being scanned and the byte it happened at.
func TestAFailureIsKeptWithItsPlace(t *testing.T) {
	s := &jsonscan.Scanner{B: []byte(`[1, tru]`), Where: "data"}
	s.Value()
	s.Fail("a later failure")
	if s.Err == nil || s.Err.Error() != "data: invalid literal at byte 4" {
		t.Fatalf("err %v, want the first failure, where it happened", s.Err)
	}
	deep := strings.Repeat("[", 600) + strings.Repeat("]", 600)
	if err := scanValue([]byte(deep)); err == nil || !strings.Contains(err.Error(), "nesting deeper than 512") {
		t.Fatalf("600 levels: %v, want the nesting bound", err)
	}
}
