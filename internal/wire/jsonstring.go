package wire

import "unicode/utf8"

// The one string encoder: every string of an answer written by hand (a
// push's reply, a read, a message, a pop, an ack, an error body) goes
// through AppendJSONString, and every size bound here counts what it
// writes. It escapes what RFC 8259 requires and nothing more: `"`, `\`
// and the control characters. <, > and & stay as they are (encoding/json
// writes them as \u003c…, six bytes for one, to make JSON safe to paste
// into HTML, which no answer is), as protocol.md promises for lastError
// and a dead letter's error, and so do U+2028 and U+2029 (escaped by
// encoding/json for JSONP). A decoder reads the same string either way;
// the answer is shorter, and the client's hand decoder takes such strings
// without falling back to encoding/json. Invalid UTF-8 is written as
// U+FFFD, one for each invalid byte, which is what encoding/json writes
// and what every decoder reads for it: an answer is always UTF-8.

// replacement is what AppendJSONString writes for a byte of invalid UTF-8.
const replacement = string(utf8.RuneError)

// AppendJSONString appends s as a JSON string literal.
func AppendJSONString(b []byte, s string) []byte {
	const hex = "0123456789abcdef"
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); i++ {
		c := s[i]
		if asciiLen[c] == 1 {
			continue
		}
		if c >= utf8.RuneSelf {
			if in, out := wideUnit(s[i:]); in == out {
				i += in - 1
				continue
			}
			b = append(append(b, s[start:i]...), replacement...)
			start = i + 1
			continue
		}
		b = append(b, s[start:i]...)
		switch c {
		case '"', '\\':
			b = append(b, '\\', c)
		case '\n':
			b = append(b, '\\', 'n')
		case '\r':
			b = append(b, '\\', 'r')
		case '\t':
			b = append(b, '\\', 't')
		default:
			b = append(b, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xf])
		}
		start = i + 1
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}

// asciiLen is how many bytes AppendJSONString writes for an ASCII byte,
// 0 for the others (a table: it is looked up for every byte of every
// answer's strings).
var asciiLen = func() (t [256]uint8) {
	for c := range utf8.RuneSelf {
		switch {
		case c >= 0x20 && c != '"' && c != '\\':
			t[c] = 1
		case c == '"', c == '\\', c == '\n', c == '\r', c == '\t':
			t[c] = 2
		default:
			t[c] = 6
		}
	}
	return t
}()

// wideUnit is what AppendJSONString does with s's first bytes, which
// start at or above utf8.RuneSelf: in bytes of s (a character, or one
// invalid byte) become out bytes of JSON.
func wideUnit(s string) (in, out int) {
	r, size := utf8.DecodeRuneInString(s)
	if r == utf8.RuneError && size == 1 {
		return 1, len(replacement)
	}
	return size, size
}

// unit is what AppendJSONString does with the bytes of s from i on: in
// bytes become out bytes of JSON.
func unit(s string, i int) (in, out int) {
	if n := asciiLen[s[i]]; n != 0 {
		return 1, int(n)
	}
	return wideUnit(s[i:])
}

// jsonStringLen is the length of s as AppendJSONString writes it.
func jsonStringLen(s string) int {
	n := 2
	for i := 0; i < len(s); i++ {
		if l := asciiLen[s[i]]; l != 0 {
			n += int(l)
			continue
		}
		in, out := wideUnit(s[i:])
		n += out
		i += in - 1
	}
	return n
}

// MarshalledStringBound bounds the length of s as encoding/json writes
// it, and so as AppendJSONString does too (which writes no more): as
// AppendJSONString, but with <, > and & as \u00XX, an invalid byte as
// \ufffd, and U+2028 and U+2029 as six bytes for their three (counted at
// their lead byte, which a few other characters share: a bound, not a
// length). It stays for the answers encoding/json writes.
func MarshalledStringBound(s string) int64 {
	n := int64(2)
	for i := 0; i < len(s); i++ {
		if l := marshalledASCIILen[s[i]]; l != 0 {
			n += int64(l)
			continue
		}
		in, _ := wideUnit(s[i:])
		switch {
		case in == 1:
			n += 6 // an invalid byte: \ufffd
		case s[i] == 0xe2:
			n += int64(in) + 3
		default:
			n += int64(in)
		}
		i += in - 1
	}
	return n
}

// marshalledASCIILen is asciiLen as encoding/json writes it, at most.
var marshalledASCIILen = func() (t [256]uint8) {
	t = asciiLen
	for _, c := range "<>&" {
		t[c] = 6
	}
	return t
}()

// cutJSON cuts s so that AppendJSONString writes at most room bytes of
// it, on a character boundary, marking a cut with "…"; room -1 keeps s.
func cutJSON(s string, room int) string {
	if room < 0 || jsonStringLen(s) <= room {
		return s
	}
	const mark = "…"
	n, end := 2+len(mark), 0
	for end < len(s) {
		in, out := unit(s, end)
		if n+out > room {
			break
		}
		n += out
		end += in
	}
	return s[:end] + mark
}
