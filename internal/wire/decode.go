package wire

import (
	"bytes"
	"errors"
	"fmt"
	"math/bits"
	"slices"
	"strconv"
	"strings"
	"unicode/utf16"
	"unicode/utf8"
)

// The push body is decoded by a single-pass scanner instead of
// encoding/json: decoding was 60 % of the gateway's CPU under load
// (encoding/json validates, then decodes again through reflection). The
// scanner validates the whole body as strict JSON (RFC 8259, UTF-8), keeps
// each message's data as a sub-slice of the body, and decodes only the
// transactionId. It is stricter than RFC 8259 in one way: a string holding
// \u0000 or an unpaired UTF-16 surrogate escape is refused wherever it
// is, because PostgreSQL's jsonb cannot hold either, and what is stored
// must be readable back as jsonb. FuzzDecodePush checks it against
// encoding/json with that rule added.

// maxDepth bounds nesting, so a hostile body cannot exhaust the stack.
const maxDepth = 512

type scanner struct {
	b     []byte
	i     int
	err   error
	depth int
	// where names the part being scanned ("data", "transactionId"), for
	// error messages; empty for the body's structure.
	where string
}

func (s *scanner) fail(msg string) {
	if s.err == nil {
		if s.where != "" {
			msg = s.where + ": " + msg
		}
		s.err = errors.New(msg + " at byte " + strconv.Itoa(s.i))
	}
}

// ErrUnstorable marks valid JSON that PostgreSQL's jsonb cannot hold.
var ErrUnstorable = errors.New("not storable")

type unstorableError struct{ msg string }

func (e *unstorableError) Error() string        { return e.msg }
func (e *unstorableError) Is(target error) bool { return target == ErrUnstorable }

// failUnstorable is fail for text jsonb refuses (the JSON itself is fine).
func (s *scanner) failUnstorable(msg string) {
	if s.err == nil {
		s.fail(msg)
		s.err = &unstorableError{msg: s.err.Error()}
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
// decoded value is appended to it. It reports whether the string held an
// escape (when not, its text between the quotes is its value). Runs of
// plain ASCII are skipped (or appended) in one step: most of a body.
func (s *scanner) str(out *[]byte) (escaped bool) {
	s.i++ // opening quote
	for s.i < len(s.b) {
		start := s.i
		for s.i < len(s.b) {
			if c := s.b[s.i]; c < 0x20 || c == '"' || c == '\\' || c >= utf8.RuneSelf {
				break
			}
			s.i++
		}
		if out != nil && s.i > start {
			*out = append(*out, s.b[start:s.i]...)
		}
		if s.i >= len(s.b) {
			break
		}
		switch c := s.b[s.i]; {
		case c == '"':
			s.i++
			return escaped
		case c == '\\':
			escaped = true
			s.escape(out)
			if s.err != nil {
				return escaped
			}
		case c < 0x20:
			s.fail("control character in string")
			return escaped
		default:
			r, size := utf8.DecodeRune(s.b[s.i:])
			if r == utf8.RuneError && size == 1 {
				s.fail("invalid UTF-8")
				return escaped
			}
			if out != nil {
				*out = append(*out, s.b[s.i:s.i+size]...)
			}
			s.i += size
		}
	}
	s.fail("unterminated string")
	return escaped
}

// stringValue scans the string at s.i and returns its value: a
// sub-slice of the body when it holds no escape, else a decoded copy.
func (s *scanner) stringValue() []byte {
	start := s.i
	if !s.str(nil) {
		return s.b[start+1 : max(start+1, s.i-1)]
	}
	if s.err != nil {
		return nil
	}
	out := make([]byte, 0, s.i-start)
	s.i = start
	s.str(&out)
	return out
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
		r = s.unicodeEscape()
		if s.err != nil {
			return
		}
	default:
		s.fail("invalid escape")
		return
	}
	if out != nil {
		*out = utf8.AppendRune(*out, r)
	}
}

// unicodeEscape decodes the \uXXXX escape at s.i (after the "u"), and a
// low surrogate escape following a high one. \u0000 and unpaired
// surrogates are refused: jsonb cannot store them (encoding/json would
// turn a lone surrogate into U+FFFD, silently changing the text).
func (s *scanner) unicodeEscape() rune {
	start := s.i - 2
	r := s.hex4()
	switch {
	case s.err != nil:
		return 0
	case r == 0:
		s.i = start
		s.failUnstorable(`\u0000 (NUL) cannot be stored: PostgreSQL refuses it in text and jsonb`)
		return 0
	case !utf16.IsSurrogate(r):
		return r
	}
	if r < 0xdc00 && len(s.b)-s.i >= 6 && s.b[s.i] == '\\' && s.b[s.i+1] == 'u' {
		s.i += 2
		r2 := s.hex4()
		if s.err != nil {
			return 0
		}
		if dec := utf16.DecodeRune(r, r2); dec != utf8.RuneError {
			return dec
		}
	}
	s.i = start
	s.failUnstorable(`unpaired UTF-16 surrogate ` + string(s.b[start:start+6]) + `: PostgreSQL refuses it in jsonb (and it is no Unicode text); escape the whole pair or send UTF-8`)
	return 0
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
// it returns false to let the value be skipped instead. The key is never
// overwritten later: a key without escapes is a sub-slice of the body
// (no copy: an ack's every item has keys), one with escapes a copy.
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
	for s.err == nil {
		s.ws()
		if s.peek() != '"' {
			s.fail("expected a string key in object")
			return
		}
		key := s.stringValue()
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

// messageFields are the fields of a push message object (PROTOCOL: a
// message has no others); a timer adds its own (timerFields).
var messageFields = []string{"transactionId", "data", "headers", "dataEncoding"}

// RawMessage is one decoded message object.
type RawMessage struct {
	TxnID    []byte // decoded; nil when absent or null
	TxnIDSet bool   // the key was present with a string value
	txnIDBad string // why a present transactionId is unacceptable
	Data     []byte // the raw value, a sub-slice of the body; nil when absent
	// Headers and DataEncoding are the raw values of those fields; nil
	// when absent (RawMessage.Payload reads them).
	Headers, DataEncoding []byte
	index                 int // its position in its body, once its meta is made
	// Extra holds the raw values of the Extra fields scanPush was asked
	// for, in that order; nil where absent.
	Extra  [2][]byte
	notObj bool
	// bad is the first field problem: unknown or repeated.
	bad string
}

// scanPush validates body and splits it into messages. A message object
// may carry transactionId, data and the extra fields named (at most two:
// a timer's); any other field, or one given twice, marks it bad. It stops
// early, with count > limit, once more than limit messages are seen.
//
// The messages are appended to dst[:0] when it has room (DecodePush's
// scratch, reused).
func scanPush(dst []RawMessage, body []byte, limit int, extra ...string) (msgs []RawMessage, count int, err error) {
	ps := &pushScan{s: &scanner{b: body}, body: body, limit: limit, extra: extra, failedIn: -1}
	ps.s.ws()
	ps.msgs = dst[:0]
	if cap(dst) == 0 {
		// Messages usually take over 100 bytes each: one allocation, mostly.
		ps.msgs = make([]RawMessage, 0, min(limit, len(body)/128+1))
	}
	if err := ps.top(); err != nil {
		return nil, 0, err
	}
	if ps.count > limit {
		return nil, ps.count, nil
	}
	if err := ps.s.err; err != nil {
		if ps.failedIn >= 0 {
			return nil, ps.count, fmt.Errorf("message %d: %w", ps.failedIn, err)
		}
		return nil, ps.count, err
	}
	return ps.msgs, ps.count, nil
}

// pushScan is one push body being scanned.
type pushScan struct {
	s        *scanner
	body     []byte
	limit    int
	extra    []string // fields allowed beyond transactionId and data
	msgs     []RawMessage
	count    int
	failedIn int // the message the scan failed in, -1 for none
	// lastHeaders is the last headers object scanned (pushScan.headers).
	lastHeaders []byte
}

// top scans the body: one message object or an array of them. It returns
// only the errors that are not about a message (an empty body, a value
// that is no message at all).
func (ps *pushScan) top() error {
	s := ps.s
	switch s.peek() {
	case '[':
		s.array(ps.message)
	case '{':
		ps.message()
	case 0:
		return errors.New("empty body")
	default:
		s.value()
		if s.err == nil {
			s.ws()
			if s.i == len(ps.body) {
				return errNotMessages
			}
			s.fail("unexpected data after the JSON value")
		}
	}
	if s.err == nil {
		s.ws()
		if s.i != len(ps.body) {
			s.fail("unexpected data after the JSON value")
		}
	}
	return nil
}

// message scans one message of the body.
func (ps *pushScan) message() {
	s := ps.s
	defer func() {
		if s.err != nil && ps.failedIn < 0 {
			ps.failedIn = ps.count - 1
		}
	}()
	s.ws()
	ps.count++
	if ps.count > ps.limit {
		s.fail("too many messages")
		return
	}
	var m RawMessage
	if s.peek() != '{' {
		m.notObj = true
		s.value()
		ps.msgs = append(ps.msgs, m)
		return
	}
	var seen uint8 // bit i: field i of messageFields then extra
	s.object(func(key []byte) bool { return ps.field(&m, key, &seen) })
	ps.msgs = append(ps.msgs, m)
}

// field scans the value of a message's field key; it returns false for a
// field the message may not have (skipped, and noted in m.bad).
func (ps *pushScan) field(m *RawMessage, key []byte, seen *uint8) bool {
	s := ps.s
	bit, known := fieldBit(key, ps.extra)
	switch {
	case !known:
		if m.bad == "" {
			m.bad = unknownField(Excerpt(key), "a message", append(messageFields[:len(messageFields):len(messageFields)], ps.extra...))
		}
		return false
	case *seen&bit != 0:
		if m.bad == "" {
			m.bad = fmt.Sprintf("field %q is given twice: send it once", key)
		}
		return false
	}
	*seen |= bit
	switch bit {
	case 1:
		s.where = "transactionId"
		m.scanTxnID(s)
	case 4:
		m.Headers = ps.headers()
	default:
		s.where = ps.fieldName(bit)
		start := s.i
		s.value()
		raw := ps.body[start:s.i]
		switch bit {
		case 2:
			m.Data = raw
		case 8:
			m.DataEncoding = raw
		default:
			m.Extra[bits.TrailingZeros8(bit)-4] = raw
		}
	}
	s.where = ""
	return true
}

// headers scans a message's headers value. Producers send the same
// headers message after message, so a value repeating the bytes of the
// last message's object is taken without scanning again: an object ends
// where its bytes say, so the same bytes are the same valid object, at
// the same depth.
func (ps *pushScan) headers() []byte {
	s := ps.s
	if n := len(ps.lastHeaders); n > 0 && bytes.HasPrefix(s.b[s.i:], ps.lastHeaders) {
		s.i += n
		return ps.lastHeaders
	}
	s.where = "headers"
	start := s.i
	s.value()
	raw := ps.body[start:s.i]
	if s.err == nil && raw[0] == '{' {
		ps.lastHeaders = raw
	}
	return raw
}

// fieldName is the name of the field of bit (fieldBit), without
// allocating it again for every message.
func (ps *pushScan) fieldName(bit uint8) string {
	i := bits.TrailingZeros8(bit)
	if i < len(messageFields) {
		return messageFields[i]
	}
	return ps.extra[i-len(messageFields)]
}

// fieldBit maps a message field to its bit: transactionId 1, data 2,
// headers 4, dataEncoding 8, extra fields 16 and 32.
func fieldBit(key []byte, extra []string) (uint8, bool) {
	switch string(key) {
	case "transactionId":
		return 1, true
	case "data":
		return 2, true
	case "headers":
		return 4, true
	case "dataEncoding":
		return 8, true
	}
	for i, e := range extra {
		if string(key) == e {
			return 16 << i, true
		}
	}
	return 0, false
}

func (m *RawMessage) scanTxnID(s *scanner) {
	switch s.peek() {
	case '"':
		start := s.i
		escaped := s.str(nil)
		switch {
		case s.err != nil:
		case !escaped:
			m.TxnID = s.b[start+1 : s.i-1] // the text between the quotes is the value
		default:
			end := s.i
			s.i = start
			m.TxnID = make([]byte, 0, end-start)
			s.str(&m.TxnID)
		}
		m.TxnIDSet = true
	case 'n':
		s.literal("null")
	default:
		s.value()
		m.txnIDBad = "must be a string"
	}
}

var errNotMessages = errors.New("not a message object or array")

// fieldAliases are names producers reach for instead of a field, mapped
// to the field they meant.
var fieldAliases = map[string]string{
	"txnid": "transactionId", "txid": "transactionId", "transaction": "transactionId",
	"idempotencykey": "transactionId", "dedupid": "transactionId", "msgid": "transactionId",
	"messageid": "transactionId", "id": "transactionId",
	"payload": "data", "body": "data", "value": "data", "content": "data", "message": "data",
}

// unknownField explains an unknown field of holder ("a message", "a
// pop"), naming the known field it most likely meant: the same letters in
// another case or with separators, a typo of one or two letters, or a
// common alias.
func unknownField(key, holder string, known []string) string {
	msg := fmt.Sprintf("unknown field %q: %s has only %s", key, holder, JoinAnd(QuoteAll(known)))
	norm := normalizeField(key)
	// The same letters first: "LeaseMS" is "leaseMs", not "leaseId".
	for _, near := range []func(k string) bool{
		func(k string) bool { return norm == k },
		func(k string) bool { return len(norm) >= 4 && editDistance(norm, k) <= 2 },
	} {
		for _, k := range known {
			if near(normalizeField(k)) {
				return msg + fmt.Sprintf("; did you mean %q?", k)
			}
		}
	}
	if k, ok := fieldAliases[norm]; ok && slices.Contains(known, k) {
		return msg + fmt.Sprintf("; did you mean %q?", k)
	}
	return msg
}

// JoinAnd joins a list as prose: "a", "a and b", "a, b and c".
func JoinAnd(xs []string) string {
	if len(xs) < 2 {
		return strings.Join(xs, "")
	}
	return strings.Join(xs[:len(xs)-1], ", ") + " and " + xs[len(xs)-1]
}

func QuoteAll(xs []string) []string {
	out := make([]string, len(xs))
	for i, x := range xs {
		out[i] = strconv.Quote(x)
	}
	return out
}

// normalizeField lowercases a field name and drops separators.
func normalizeField(s string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(s) {
		if r != '_' && r != '-' && r != ' ' && r != '.' {
			b.WriteRune(r)
		}
	}
	return b.String()
}

// editDistance is the Levenshtein distance of two short strings.
func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}

// Member is one member of a JSON object: its key and raw value.
type Member struct {
	Key []byte // a sub-slice of the body unless it held escapes
	Raw []byte
}

// ScanObject validates body as one JSON object (the scanner's rules, so
// no \u0000 or unpaired surrogate anywhere) and returns its members in
// order, repeated keys included (DecodeObject refuses them). what names
// the object in messages (built only for one).
func ScanObject(body []byte, what func() string) ([]Member, error) {
	s := &scanner{b: body}
	s.ws()
	if s.peek() != '{' {
		if s.i == len(body) {
			return nil, fmt.Errorf("%s is empty: send a JSON object", what())
		}
		return nil, fmt.Errorf("%s must be a JSON object", what())
	}
	fields := make([]Member, 0, 4) // one allocation for an ack item
	s.object(func(key []byte) bool {
		start := s.i
		s.value()
		fields = append(fields, Member{Key: key, Raw: body[start:s.i]})
		return true
	})
	if s.err == nil {
		s.ws()
		if s.i != len(body) {
			s.fail("unexpected data after the JSON object")
		}
	}
	switch {
	case errors.Is(s.err, ErrUnstorable):
		return nil, fmt.Errorf("%s: %v", what(), s.err)
	case s.err != nil:
		return nil, fmt.Errorf("%s is not valid JSON: %v", what(), s.err)
	}
	return fields, nil
}

// DecodeString decodes raw as a JSON string; ok is false for any other
// value.
func DecodeString(raw []byte) (string, bool) {
	s := &scanner{b: raw}
	if s.peek() != '"' {
		return "", false
	}
	out := s.stringValue()
	return string(out), s.err == nil && s.i == len(raw)
}

// CheckValue checks that b is one JSON value by the scanner's rules; an
// error that is ErrUnstorable names an escape no message may store.
func CheckValue(b []byte) error {
	s := &scanner{b: b}
	s.ws()
	s.value()
	s.ws()
	if s.err == nil && s.i != len(s.b) {
		s.fail("unexpected data after the JSON value")
	}
	return s.err
}
