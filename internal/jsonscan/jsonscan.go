// Package jsonscan is the one JSON scanner of the project: a single pass
// over a byte slice that validates strict JSON (RFC 8259, UTF-8) and
// leaves what to decode to its callers, which take sub-slices of the input
// instead of copies. The gateway decodes every request body with it
// (internal/wire), and the client every pop, read and ack answer it takes
// by hand (the root package); encoding/json's reflection was most of the
// CPU of both.
//
// It is stricter than RFC 8259 in one way: a string holding \u0000 or an
// unpaired UTF-16 surrogate escape fails (ErrUnstorable), because
// PostgreSQL's jsonb cannot hold either, and what the gateway stores must
// be readable back as jsonb.
package jsonscan

import (
	"errors"
	"strconv"
	"unicode/utf16"
	"unicode/utf8"
)

// plain marks the bytes a string's fast path takes as they are: not a
// control character, quote, backslash or the start of a multi-byte rune.
var plain = func() (t [256]bool) {
	for c := 0x20; c < utf8.RuneSelf; c++ {
		t[c] = c != '"' && c != '\\'
	}
	return t
}()

// maxDepth bounds nesting, so a hostile body cannot exhaust the stack.
const maxDepth = 512

// Scanner reads B from I. The first failure is kept in Err (with the
// byte it happened at) and later ones are ignored, and loops stop at a
// failure: a caller checks Err once, when it is done.
type Scanner struct {
	B     []byte
	I     int
	Err   error
	depth int
	// Where names the part being scanned ("data", "transactionId"), for
	// error messages; empty for the body's structure.
	Where string
}

// Fail records msg as the failure, unless one is recorded already.
func (s *Scanner) Fail(msg string) {
	if s.Err == nil {
		if s.Where != "" {
			msg = s.Where + ": " + msg
		}
		s.Err = errors.New(msg + " at byte " + strconv.Itoa(s.I))
	}
}

// ErrUnstorable marks valid JSON that PostgreSQL's jsonb cannot hold.
var ErrUnstorable = errors.New("not storable")

type unstorableError struct{ msg string }

func (e *unstorableError) Error() string        { return e.msg }
func (e *unstorableError) Is(target error) bool { return target == ErrUnstorable }

// FailUnstorable is Fail for text jsonb refuses (the JSON itself is fine).
func (s *Scanner) FailUnstorable(msg string) {
	if s.Err == nil {
		s.Fail(msg)
		s.Err = &unstorableError{msg: s.Err.Error()}
	}
}

// WS skips whitespace.
func (s *Scanner) WS() {
	for s.I < len(s.B) {
		switch s.B[s.I] {
		case ' ', '\t', '\n', '\r':
			s.I++
		default:
			return
		}
	}
}

// Peek is the byte at I, 0 at the end.
func (s *Scanner) Peek() byte {
	if s.I < len(s.B) {
		return s.B[s.I]
	}
	return 0
}

// Value skips one JSON value, validating it.
func (s *Scanner) Value() {
	s.WS()
	if s.I >= len(s.B) {
		s.Fail("unexpected end of input")
		return
	}
	switch c := s.B[s.I]; {
	case c == '{':
		s.Object(nil)
	case c == '[':
		s.Array(func() { s.Value() })
	case c == '"':
		s.Str(nil)
	case c == 't':
		s.Literal("true")
	case c == 'f':
		s.Literal("false")
	case c == 'n':
		s.Literal("null")
	case c == '-' || c >= '0' && c <= '9':
		s.Number()
	default:
		s.Fail("unexpected character " + strconv.QuoteRune(rune(c)))
	}
}

// Literal takes lit (true, false, null) at I.
func (s *Scanner) Literal(lit string) {
	if len(s.B)-s.I >= len(lit) && string(s.B[s.I:s.I+len(lit)]) == lit {
		s.I += len(lit)
		return
	}
	s.Fail("invalid literal")
}

func (s *Scanner) digits() int {
	n := 0
	for s.I < len(s.B) && s.B[s.I] >= '0' && s.B[s.I] <= '9' {
		s.I++
		n++
	}
	return n
}

// Number skips a number: -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?
func (s *Scanner) Number() {
	if s.Peek() == '-' {
		s.I++
	}
	switch {
	case s.Peek() == '0':
		s.I++
	case s.Peek() >= '1' && s.Peek() <= '9':
		s.digits()
	default:
		s.Fail("invalid number")
		return
	}
	if s.Peek() == '.' {
		s.I++
		if s.digits() == 0 {
			s.Fail("invalid number")
			return
		}
	}
	if c := s.Peek(); c == 'e' || c == 'E' {
		s.I++
		if c := s.Peek(); c == '+' || c == '-' {
			s.I++
		}
		if s.digits() == 0 {
			s.Fail("invalid number")
		}
	}
}

// Str scans a string starting at its opening quote. If out is non-nil the
// decoded value is appended to it. It reports whether the string held an
// escape (when not, its text between the quotes is its value). Runs of
// plain ASCII are skipped (or appended) in one step: most of a body.
func (s *Scanner) Str(out *[]byte) (escaped bool) {
	s.I++ // opening quote
	for s.I < len(s.B) {
		start := s.I
		b, i := s.B, s.I // locals: the loop keeps them in registers
		for i < len(b) && plain[b[i]] {
			i++
		}
		s.I = i
		if out != nil && s.I > start {
			*out = append(*out, s.B[start:s.I]...)
		}
		if s.I >= len(s.B) {
			break
		}
		switch c := s.B[s.I]; {
		case c == '"':
			s.I++
			return escaped
		case c == '\\':
			escaped = true
			s.escape(out)
			if s.Err != nil {
				return escaped
			}
		case c < 0x20:
			s.Fail("control character in string")
			return escaped
		default:
			r, size := utf8.DecodeRune(s.B[s.I:])
			if r == utf8.RuneError && size == 1 {
				s.Fail("invalid UTF-8")
				return escaped
			}
			if out != nil {
				*out = append(*out, s.B[s.I:s.I+size]...)
			}
			s.I += size
		}
	}
	s.Fail("unterminated string")
	return escaped
}

// StringValue scans the string at s.I and returns its value: a
// sub-slice of the body when it holds no escape, else a decoded copy.
func (s *Scanner) StringValue() []byte {
	start := s.I
	if !s.Str(nil) {
		return s.B[start+1 : max(start+1, s.I-1)]
	}
	if s.Err != nil {
		return nil
	}
	out := make([]byte, 0, s.I-start)
	s.I = start
	s.Str(&out)
	return out
}

func (s *Scanner) escape(out *[]byte) {
	s.I++ // backslash
	if s.I >= len(s.B) {
		s.Fail("unterminated string")
		return
	}
	c := s.B[s.I]
	s.I++
	var r rune
	switch c {
	case '"', '\\', '/':
		r = rune(c)
	case 'b':
		r = '\b'
	case 'f':
		r = '\f'
	case 'n':
		r = '\n'
	case 'r':
		r = '\r'
	case 't':
		r = '\t'
	case 'u':
		r = s.unicodeEscape()
		if s.Err != nil {
			return
		}
	default:
		s.Fail("invalid escape")
		return
	}
	if out != nil {
		*out = utf8.AppendRune(*out, r)
	}
}

// unicodeEscape decodes the \uXXXX escape at s.I (after the "u"), and a
// low surrogate escape following a high one. \u0000 and unpaired
// surrogates are refused: jsonb cannot store them (encoding/json would
// turn a lone surrogate into U+FFFD, silently changing the text).
func (s *Scanner) unicodeEscape() rune {
	start := s.I - 2
	r := s.hex4()
	switch {
	case s.Err != nil:
		return 0
	case r == 0:
		s.I = start
		s.FailUnstorable(`\u0000 (NUL) cannot be stored: PostgreSQL refuses it in text and jsonb`)
		return 0
	case !utf16.IsSurrogate(r):
		return r
	}
	if r < 0xdc00 && len(s.B)-s.I >= 6 && s.B[s.I] == '\\' && s.B[s.I+1] == 'u' {
		s.I += 2
		r2 := s.hex4()
		if s.Err != nil {
			return 0
		}
		if dec := utf16.DecodeRune(r, r2); dec != utf8.RuneError {
			return dec
		}
	}
	s.I = start
	s.FailUnstorable(`unpaired UTF-16 surrogate ` + string(s.B[start:start+6]) + `: PostgreSQL refuses it in jsonb (and it is no Unicode text); escape the whole pair or send UTF-8`)
	return 0
}

func (s *Scanner) hex4() rune {
	if len(s.B)-s.I < 4 {
		s.Fail("invalid \\u escape")
		return 0
	}
	var r rune
	for _, c := range s.B[s.I : s.I+4] {
		switch {
		case c >= '0' && c <= '9':
			r = r<<4 | rune(c-'0')
		case c >= 'a' && c <= 'f':
			r = r<<4 | rune(c-'a'+10)
		case c >= 'A' && c <= 'F':
			r = r<<4 | rune(c-'A'+10)
		default:
			s.Fail("invalid \\u escape")
			return 0
		}
	}
	s.I += 4
	return r
}

func (s *Scanner) nest() bool {
	s.depth++
	if s.depth > maxDepth {
		s.Fail("nesting deeper than " + strconv.Itoa(maxDepth))
		return false
	}
	return true
}

// Array scans [elem, elem, …], calling elem at each element's start.
func (s *Scanner) Array(elem func()) {
	if !s.nest() {
		return
	}
	defer func() { s.depth-- }()
	s.I++ // [
	s.WS()
	if s.Peek() == ']' {
		s.I++
		return
	}
	for s.Err == nil {
		elem()
		s.WS()
		switch s.Peek() {
		case ',':
			s.I++
		case ']':
			s.I++
			return
		default:
			s.Fail("expected , or ] in array")
		}
	}
}

// Object scans {"key": value, …}. For each key, member (if non-nil) is
// called with the scanner positioned at the value and must consume it;
// it returns false to let the value be skipped instead. The key is never
// overwritten later: a key without escapes is a sub-slice of the body
// (no copy: an ack's every item has keys), one with escapes a copy.
func (s *Scanner) Object(member func(key []byte) bool) {
	if !s.nest() {
		return
	}
	defer func() { s.depth-- }()
	s.I++ // {
	s.WS()
	if s.Peek() == '}' {
		s.I++
		return
	}
	for s.Err == nil {
		s.WS()
		if s.Peek() != '"' {
			s.Fail("expected a string key in object")
			return
		}
		key := s.StringValue()
		s.WS()
		if s.Peek() != ':' {
			s.Fail("expected : after object key")
			return
		}
		s.I++
		s.WS()
		if member == nil || !member(key) {
			s.Value()
		}
		s.WS()
		switch s.Peek() {
		case ',':
			s.I++
		case '}':
			s.I++
			return
		default:
			s.Fail("expected , or } in object")
		}
	}
}
