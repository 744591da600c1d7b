package gateway

import (
	"errors"
	"strconv"
	"unicode/utf16"
	"unicode/utf8"
)

// The push body is decoded by a single-pass scanner instead of
// encoding/json: decoding was 60 % of the gateway's CPU under load
// (encoding/json validates, then decodes again through reflection). The
// scanner validates the whole body as strict JSON (RFC 8259, UTF-8), keeps
// each message's data as a sub-slice of the body, and decodes only the
// transactionId. FuzzDecodePush checks it against encoding/json.

// maxDepth bounds nesting, so a hostile body cannot exhaust the stack.
const maxDepth = 512

var errSyntax = errors.New("malformed JSON")

type scanner struct {
	b     []byte
	i     int
	err   error
	depth int
}

func (s *scanner) fail(msg string) {
	if s.err == nil {
		s.err = errors.New(msg + " at byte " + strconv.Itoa(s.i))
	}
}

func (s *scanner) ws() {
	for s.i < len(s.b) {
		switch s.b[s.i] {
		case ' ', '\t', '\n', '\r':
			s.i++
		default:
			return
		}
	}
}

func (s *scanner) peek() byte {
	if s.i < len(s.b) {
		return s.b[s.i]
	}
	return 0
}

// value skips one JSON value, validating it.
func (s *scanner) value() {
	s.ws()
	if s.i >= len(s.b) {
		s.fail("unexpected end of input")
		return
	}
	switch c := s.b[s.i]; {
	case c == '{':
		s.object(nil)
	case c == '[':
		s.array(func() { s.value() })
	case c == '"':
		s.str(nil)
	case c == 't':
		s.literal("true")
	case c == 'f':
		s.literal("false")
	case c == 'n':
		s.literal("null")
	case c == '-' || c >= '0' && c <= '9':
		s.number()
	default:
		s.fail("unexpected character " + strconv.QuoteRune(rune(c)))
	}
}

func (s *scanner) literal(lit string) {
	if len(s.b)-s.i >= len(lit) && string(s.b[s.i:s.i+len(lit)]) == lit {
		s.i += len(lit)
		return
	}
	s.fail("invalid literal")
}

func (s *scanner) digits() int {
	n := 0
	for s.i < len(s.b) && s.b[s.i] >= '0' && s.b[s.i] <= '9' {
		s.i++
		n++
	}
	return n
}

func (s *scanner) number() {
	if s.peek() == '-' {
		s.i++
	}
	switch {
	case s.peek() == '0':
		s.i++
	case s.peek() >= '1' && s.peek() <= '9':
		s.digits()
	default:
		s.fail("invalid number")
		return
	}
	if s.peek() == '.' {
		s.i++
		if s.digits() == 0 {
			s.fail("invalid number")
			return
		}
	}
	if c := s.peek(); c == 'e' || c == 'E' {
		s.i++
		if c := s.peek(); c == '+' || c == '-' {
			s.i++
		}
		if s.digits() == 0 {
			s.fail("invalid number")
		}
	}
}

// str scans a string starting at its opening quote. If out is non-nil the
// decoded value is appended to it.
func (s *scanner) str(out *[]byte) {
	s.i++ // opening quote
	for s.i < len(s.b) {
		c := s.b[s.i]
		switch {
		case c == '"':
			s.i++
			return
		case c == '\\':
			s.escape(out)
			if s.err != nil {
				return
			}
		case c < 0x20:
			s.fail("control character in string")
			return
		case c < utf8.RuneSelf:
			if out != nil {
				*out = append(*out, c)
			}
			s.i++
		default:
			r, size := utf8.DecodeRune(s.b[s.i:])
			if r == utf8.RuneError && size == 1 {
				s.fail("invalid UTF-8")
				return
			}
			if out != nil {
				*out = append(*out, s.b[s.i:s.i+size]...)
			}
			s.i += size
		}
	}
	s.fail("unterminated string")
}

func (s *scanner) escape(out *[]byte) {
	s.i++ // backslash
	if s.i >= len(s.b) {
		s.fail("unterminated string")
		return
	}
	c := s.b[s.i]
	s.i++
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
		r = s.hex4()
		if s.err != nil {
			return
		}
		if utf16.IsSurrogate(r) {
			// A high surrogate followed by \uDC00-\uDFFF is one rune;
			// anything else decodes to U+FFFD, as encoding/json does.
			r2 := rune(-1)
			if len(s.b)-s.i >= 6 && s.b[s.i] == '\\' && s.b[s.i+1] == 'u' {
				save := s.i
				s.i += 2
				r2 = s.hex4()
				if s.err != nil {
					return
				}
				if dec := utf16.DecodeRune(r, r2); dec != utf8.RuneError {
					r = dec
				} else {
					s.i = save
					r = utf8.RuneError
				}
			} else {
				r = utf8.RuneError
			}
		}
	default:
		s.fail("invalid escape")
		return
	}
	if out != nil {
		*out = utf8.AppendRune(*out, r)
	}
}

func (s *scanner) hex4() rune {
	if len(s.b)-s.i < 4 {
		s.fail("invalid \\u escape")
		return 0
	}
	var r rune
	for _, c := range s.b[s.i : s.i+4] {
		switch {
		case c >= '0' && c <= '9':
			r = r<<4 | rune(c-'0')
		case c >= 'a' && c <= 'f':
			r = r<<4 | rune(c-'a'+10)
		case c >= 'A' && c <= 'F':
			r = r<<4 | rune(c-'A'+10)
		default:
			s.fail("invalid \\u escape")
			return 0
		}
	}
	s.i += 4
	return r
}

func (s *scanner) nest() bool {
	s.depth++
	if s.depth > maxDepth {
		s.fail("nesting deeper than " + strconv.Itoa(maxDepth))
		return false
	}
	return true
}

// array scans [elem, elem, …], calling elem at each element's start.
func (s *scanner) array(elem func()) {
	if !s.nest() {
		return
	}
	defer func() { s.depth-- }()
	s.i++ // [
	s.ws()
	if s.peek() == ']' {
		s.i++
		return
	}
	for s.err == nil {
		elem()
		s.ws()
		switch s.peek() {
		case ',':
			s.i++
		case ']':
			s.i++
			return
		default:
			s.fail("expected , or ] in array")
		}
	}
}

// object scans {"key": value, …}. For each key, member (if non-nil) is
// called with the scanner positioned at the value and must consume it;
// it returns false to let the value be skipped instead.
func (s *scanner) object(member func(key []byte) bool) {
	if !s.nest() {
		return
	}
	defer func() { s.depth-- }()
	s.i++ // {
	s.ws()
	if s.peek() == '}' {
		s.i++
		return
	}
	var key []byte
	for s.err == nil {
		s.ws()
		if s.peek() != '"' {
			s.fail("expected a string key in object")
			return
		}
		key = key[:0]
		s.str(&key)
		s.ws()
		if s.peek() != ':' {
			s.fail("expected : after object key")
			return
		}
		s.i++
		s.ws()
		if member == nil || !member(key) {
			s.value()
		}
		s.ws()
		switch s.peek() {
		case ',':
			s.i++
		case '}':
			s.i++
			return
		default:
			s.fail("expected , or } in object")
		}
	}
}

// rawMessage is one decoded message object.
type rawMessage struct {
	txnID    []byte // decoded; nil when absent or null
	txnIDSet bool   // the key was present with a string value
	txnIDBad string // why a present transactionId is unacceptable
	data     []byte // the raw value, a sub-slice of the body; nil when absent
	notObj   bool
}

// scanPush validates body and splits it into messages. It stops early,
// with count > limit, once more than limit messages are seen.
func scanPush(body []byte, limit int) (msgs []rawMessage, count int, err error) {
	s := &scanner{b: body}
	s.ws()
	parseMessage := func() {
		s.ws()
		count++
		if count > limit {
			s.fail("too many messages")
			return
		}
		var m rawMessage
		if s.peek() != '{' {
			m.notObj = true
			s.value()
			msgs = append(msgs, m)
			return
		}
		s.object(func(key []byte) bool {
			switch string(key) {
			case "transactionId":
				switch s.peek() {
				case '"':
					m.txnID = m.txnID[:0]
					if m.txnID == nil {
						m.txnID = []byte{}
					}
					s.str(&m.txnID)
					m.txnIDSet, m.txnIDBad = true, ""
				case 'n':
					s.literal("null")
					m.txnID, m.txnIDSet, m.txnIDBad = nil, false, ""
				default:
					s.value()
					m.txnIDBad = "must be a string"
				}
				return true
			case "data":
				start := s.i
				s.value()
				m.data = body[start:s.i]
				return true
			}
			return false
		})
		msgs = append(msgs, m)
	}
	switch s.peek() {
	case '[':
		s.array(parseMessage)
	case '{':
		parseMessage()
	case 0:
		return nil, 0, errors.New("empty body")
	default:
		s.value()
		if s.err == nil {
			s.ws()
			if s.i == len(body) {
				return nil, 0, errNotMessages
			}
			s.fail("unexpected data after the JSON value")
		}
	}
	if s.err == nil {
		s.ws()
		if s.i != len(body) {
			s.fail("unexpected data after the JSON value")
		}
	}
	if count > limit {
		return nil, count, nil
	}
	if s.err != nil {
		return nil, count, s.err
	}
	return msgs, count, nil
}

var errNotMessages = errors.New("not a message object or array")
