package wire

import (
	"bytes"
	"errors"
	"fmt"
	"math/bits"
	"slices"
	"strconv"
	"strings"

	"github.com/queengate/queengate/internal/jsonscan"
)

// ErrUnstorable marks valid JSON that PostgreSQL's jsonb cannot hold.
var ErrUnstorable = jsonscan.ErrUnstorable

// The push body is decoded in one pass of package jsonscan's scanner
// instead of encoding/json: decoding was 60 % of the gateway's CPU under
// load (encoding/json validates, then decodes again through reflection).
// The scan validates the whole body as strict JSON, keeps each message's
// data as a sub-slice of the body, and decodes only the transactionId. A
// string holding \u0000 or an unpaired UTF-16 surrogate escape is refused
// wherever it is (jsonscan.ErrUnstorable). FuzzDecodePush checks it
// against encoding/json with that rule added.

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
	ps := &pushScan{s: &jsonscan.Scanner{B: body}, body: body, limit: limit, extra: extra, failedIn: -1}
	ps.s.WS()
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
	if err := ps.s.Err; err != nil {
		if ps.failedIn >= 0 {
			return nil, ps.count, fmt.Errorf("message %d: %w", ps.failedIn, err)
		}
		return nil, ps.count, err
	}
	return ps.msgs, ps.count, nil
}

// pushScan is one push body being scanned.
type pushScan struct {
	s        *jsonscan.Scanner
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
	switch s.Peek() {
	case '[':
		s.Array(ps.message)
	case '{':
		ps.message()
	case 0:
		return errors.New("empty body")
	default:
		s.Value()
		if s.Err == nil {
			s.WS()
			if s.I == len(ps.body) {
				return errNotMessages
			}
			s.Fail("unexpected data after the JSON value")
		}
	}
	if s.Err == nil {
		s.WS()
		if s.I != len(ps.body) {
			s.Fail("unexpected data after the JSON value")
		}
	}
	return nil
}

// message scans one message of the body.
func (ps *pushScan) message() {
	s := ps.s
	defer func() {
		if s.Err != nil && ps.failedIn < 0 {
			ps.failedIn = ps.count - 1
		}
	}()
	s.WS()
	ps.count++
	if ps.count > ps.limit {
		s.Fail("too many messages")
		return
	}
	var m RawMessage
	if s.Peek() != '{' {
		m.notObj = true
		s.Value()
		ps.msgs = append(ps.msgs, m)
		return
	}
	var seen uint8 // bit i: field i of messageFields then extra
	s.Object(func(key []byte) bool { return ps.field(&m, key, &seen) })
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
		s.Where = "transactionId"
		m.scanTxnID(s)
	case 4:
		m.Headers = ps.headers()
	default:
		s.Where = ps.fieldName(bit)
		start := s.I
		s.Value()
		raw := ps.body[start:s.I]
		switch bit {
		case 2:
			m.Data = raw
		case 8:
			m.DataEncoding = raw
		default:
			m.Extra[bits.TrailingZeros8(bit)-4] = raw
		}
	}
	s.Where = ""
	return true
}

// headers scans a message's headers value. Producers send the same
// headers message after message, so a value repeating the bytes of the
// last message's object is taken without scanning again: an object ends
// where its bytes say, so the same bytes are the same valid object, at
// the same depth.
func (ps *pushScan) headers() []byte {
	s := ps.s
	if n := len(ps.lastHeaders); n > 0 && bytes.HasPrefix(s.B[s.I:], ps.lastHeaders) {
		s.I += n
		return ps.lastHeaders
	}
	s.Where = "headers"
	start := s.I
	s.Value()
	raw := ps.body[start:s.I]
	if s.Err == nil && raw[0] == '{' {
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

func (m *RawMessage) scanTxnID(s *jsonscan.Scanner) {
	switch s.Peek() {
	case '"':
		start := s.I
		escaped := s.Str(nil)
		switch {
		case s.Err != nil:
		case !escaped:
			m.TxnID = s.B[start+1 : s.I-1] // the text between the quotes is the value
		default:
			end := s.I
			s.I = start
			m.TxnID = make([]byte, 0, end-start)
			s.Str(&m.TxnID)
		}
		m.TxnIDSet = true
	case 'n':
		s.Literal("null")
	default:
		s.Value()
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
	s := &jsonscan.Scanner{B: body}
	s.WS()
	if s.Peek() != '{' {
		if s.I == len(body) {
			return nil, fmt.Errorf("%s is empty: send a JSON object", what())
		}
		return nil, fmt.Errorf("%s must be a JSON object", what())
	}
	fields := make([]Member, 0, 4) // one allocation for an ack item
	s.Object(func(key []byte) bool {
		start := s.I
		s.Value()
		fields = append(fields, Member{Key: key, Raw: body[start:s.I]})
		return true
	})
	if s.Err == nil {
		s.WS()
		if s.I != len(body) {
			s.Fail("unexpected data after the JSON object")
		}
	}
	switch {
	case errors.Is(s.Err, ErrUnstorable):
		return nil, fmt.Errorf("%s: %v", what(), s.Err)
	case s.Err != nil:
		return nil, fmt.Errorf("%s is not valid JSON: %v", what(), s.Err)
	}
	return fields, nil
}

// DecodeString decodes raw as a JSON string; ok is false for any other
// value.
func DecodeString(raw []byte) (string, bool) {
	s := &jsonscan.Scanner{B: raw}
	if s.Peek() != '"' {
		return "", false
	}
	out := s.StringValue()
	return string(out), s.Err == nil && s.I == len(raw)
}

// CheckValue checks that b is one JSON value by the scanner's rules; an
// error that is ErrUnstorable names an escape no message may store.
func CheckValue(b []byte) error {
	s := &jsonscan.Scanner{B: b}
	s.WS()
	s.Value()
	s.WS()
	if s.Err == nil && s.I != len(s.B) {
		s.Fail("unexpected data after the JSON value")
	}
	return s.Err
}
