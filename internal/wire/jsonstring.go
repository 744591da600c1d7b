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
	for i := 0; i < len(s); {
		c := s[i]
		if c >= utf8.RuneSelf {
			in, out := wideUnit(s[i:])
			if in == out {
				i += in
				continue
			}
			b = append(append(b, s[start:i]...), replacement...)
			i++
			start = i
			continue
		}
		if escapedLen(c) == 1 {
			i++
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
		i++
		start = i
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}

// escapedLen is how many bytes AppendJSONString writes for an ASCII byte.
func escapedLen(c byte) int {
	switch {
	case c >= 0x20 && c != '"' && c != '\\':
		return 1
	case c == '"', c == '\\', c == '\n', c == '\r', c == '\t':
		return 2
	}
	return 6
}

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
	if c := s[i]; c < utf8.RuneSelf {
		return 1, escapedLen(c)
	}
	return wideUnit(s[i:])
}

// jsonStringLen is the length of s as AppendJSONString writes it.
func jsonStringLen(s string) int {
	n := 2
	for i := 0; i < len(s); {
		in, out := unit(s, i)
		n += out
		i += in
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
	for i := 0; i < len(s); {
		in, out := unit(s, i)
		switch c := s[i]; {
		case c == '<', c == '>', c == '&':
			out += 5
		case c >= utf8.RuneSelf && in == 1:
			out += 3 // an invalid byte: \ufffd
		case c == 0xe2:
			out += 3
		}
		n += int64(out)
		i += in
	}
	return n
}

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
