package queengate

import (
	"bytes"
	"encoding/json"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/queengate/queengate/internal/jsonscan"
)

// A pop's or a read's answer is decoded by hand when it has the shape
// the gateway writes: encoding/json's reflection was most of a consumer's
// CPU (about 3 µs per message delivered) and of a reader's. The hand
// decoder accepts only what it can decode exactly as json.Unmarshal
// would — the fields by their exact names, each once, no null, strings
// without escapes, whole numbers, and only what package jsonscan's strict
// scanner takes — and declines anything else, which
// json.Unmarshal then decodes: the answer is the same either way
// (FuzzPopAnswerDecodesAsEncodingJSON, FuzzReadAnswerDecodesAsEncodingJSON).
//
// It allocates per answer, not per message: a message's data is a slice
// of the body (the answer's NATS payload, which nothing else holds), and
// the strings of an answer's messages are substrings of one string.

// decodeByHand makes a pop's answer a handDecoded one for the Client.
func (a *PopAnswer) decodeByHand(body []byte) bool { return decodePopAnswer(body, a) }

// decodeByHand makes a read's answer a handDecoded one for the Client.
func (a *ReadAnswer) decodeByHand(body []byte) bool { return decodeReadAnswer(body, a) }

// decodeByHand makes an ack's answer a handDecoded one for the Client.
func (a *AckAnswer) decodeByHand(body []byte) bool { return decodeAckAnswer(body, a) }

// answerReader reads one answer over the project's one scanner: its Err
// is set at the first thing the hand decoder declines (or the scanner
// refuses), and the answer is then left to json.Unmarshal.
type answerReader struct {
	jsonscan.Scanner
	// run holds the strings of the messages array being read (runStr).
	run runStrings
	// lastTime is the last createdAt read and its text: the messages of
	// one pushed frame share theirs, parsed once.
	lastTime     time.Time
	lastTimeText []byte
	// int64s is the block newInt64 takes from.
	int64s []int64
}

// decodePopAnswer decodes body into a when the hand decoder takes it;
// a is left as it was when not. The messages' data are slices of body,
// which must not change afterwards.
func decodePopAnswer(body []byte, a *PopAnswer) bool {
	return decodeWhole(body, a, (*answerReader).popAnswer)
}

// decodeWhole reads body with read into a new T, and makes it *a only if
// the hand decoder took all of body.
func decodeWhole[T any](body []byte, a *T, read func(r *answerReader, out *T)) bool {
	if len(body) > math.MaxInt32 { // stringSpan's offsets
		return false
	}
	r := &answerReader{Scanner: jsonscan.Scanner{B: body}}
	var out T
	read(r, &out)
	if !r.end() {
		return false
	}
	*a = out
	return true
}

func (r *answerReader) popAnswer(out *PopAnswer) {
	lease := leaseFields{&out.Partition, &out.PartitionID, &out.LeaseID, &out.LeaseUntil, &out.Messages}
	r.object(func(key []byte) bool {
		switch string(key) {
		case "queue":
			out.Queue = r.str()
		case "group":
			out.Group = r.str()
		case "deadLettered":
			out.DeadLettered = r.int()
		case "ack":
			out.Ack = &AckAnswer{}
			r.ackAnswer(out.Ack)
		case "acks":
			out.Acks = make([]AckAnswer, 0, 4)
			r.array(func() {
				out.Acks = append(out.Acks, AckAnswer{})
				r.ackAnswer(&out.Acks[len(out.Acks)-1])
			})
		case "more":
			out.More = make([]PopLease, 0, 4)
			r.array(func() {
				out.More = append(out.More, PopLease{})
				r.popLease(&out.More[len(out.More)-1])
			})
		default:
			return r.leaseField(key, lease)
		}
		return true
	})
}

// popLease reads one further partition of a multi-partition pop.
func (r *answerReader) popLease(out *PopLease) {
	lease := leaseFields{&out.Partition, &out.PartitionID, &out.LeaseID, &out.LeaseUntil, &out.Messages}
	r.object(func(key []byte) bool { return r.leaseField(key, lease) })
}

// leaseFields are where a lease's fields go: a pop answer's first
// partition and each of its further ones have the same.
type leaseFields struct {
	partition   *string
	partitionID *int64
	leaseID     *string
	leaseUntil  **time.Time
	messages    *[]Delivery
}

// leaseField reads key's value into to when it is a lease's field.
func (r *answerReader) leaseField(key []byte, to leaseFields) bool {
	switch string(key) {
	case "partition":
		*to.partition = r.str()
	case "partitionId":
		*to.partitionID = r.int64()
	case "leaseId":
		*to.leaseID = r.str()
	case "leaseUntil":
		t := r.time()
		*to.leaseUntil = &t
	case "messages":
		*to.messages = r.deliveries()
	default:
		return false
	}
	return true
}

// deliveries reads a pop's array of messages.
func (r *answerReader) deliveries() []Delivery {
	ds := make([]Delivery, 0, 16)
	r.array(func() {
		ds = append(ds, Delivery{})
		r.delivery(&ds[len(ds)-1], len(ds)-1)
	})
	r.run.assign(r.B, func(msg int, f messageField) *string {
		switch d := &ds[msg]; f {
		case fieldLastError:
			return &d.LastError
		default:
			return d.StoredMessage.field(f)
		}
	})
	return ds
}

// decodeReadAnswer is decodePopAnswer for a read's answer.
func decodeReadAnswer(body []byte, a *ReadAnswer) bool {
	return decodeWhole(body, a, (*answerReader).readAnswer)
}

func (r *answerReader) readAnswer(out *ReadAnswer) {
	r.object(func(key []byte) bool {
		switch string(key) {
		case "queue":
			out.Queue = r.str()
		case "partition":
			out.Partition = r.str()
		case "partitionId":
			out.PartitionID = r.int64()
		case "messages":
			ms := make([]StoredMessage, 0, 16)
			r.array(func() {
				ms = append(ms, StoredMessage{})
				m := &ms[len(ms)-1]
				r.object(func(key []byte) bool { return r.storedField(key, m, len(ms)-1) })
			})
			r.run.assign(r.B, func(msg int, f messageField) *string { return ms[msg].field(f) })
			out.Messages = ms
		case "next":
			out.Next = r.int64()
		case "firstOffset":
			out.FirstOffset = r.int64()
		case "lastOffset":
			out.LastOffset = r.int64()
		case "purged":
			out.Purged = r.boolean()
		default:
			return false
		}
		return true
	})
}

// decodeAckAnswer is decodePopAnswer for an ack's answer.
func decodeAckAnswer(body []byte, a *AckAnswer) bool {
	return decodeWhole(body, a, (*answerReader).ackAnswer)
}

func (r *answerReader) ackAnswer(a *AckAnswer) {
	r.object(func(key []byte) bool {
		switch string(key) {
		case "items":
			items := make([]AckResult, 0, 16)
			r.array(func() {
				items = append(items, AckResult{})
				r.ackResult(&items[len(items)-1], len(items)-1)
			})
			r.run.assign(r.B, func(item int, _ messageField) *string { return &items[item].TransactionID })
			a.Items = items
		case "nextOffset":
			a.NextOffset = r.int64()
		case "leaseEnded":
			a.LeaseEnded = r.boolean()
		case "deadLettered":
			a.DeadLettered = r.int()
		default:
			return false
		}
		return true
	})
}

// ackResult reads it, the item at index item of its array.
func (r *answerReader) ackResult(it *AckResult, item int) {
	r.object(func(key []byte) bool {
		switch string(key) {
		case "index":
			it.Index = r.int()
		case "transactionId":
			r.runStr(item, fieldTransactionID)
		case "offset":
			it.Offset = r.newInt64(r.int64())
		case "result":
			it.Result = r.result()
		default:
			return false
		}
		return true
	})
}

// delivery reads d, the message at index msg of its array.
func (r *answerReader) delivery(d *Delivery, msg int) {
	r.object(func(key []byte) bool {
		switch string(key) {
		case "attempts":
			d.Attempts = r.int()
		case "lastError":
			r.runStr(msg, fieldLastError)
		default:
			return r.storedField(key, &d.StoredMessage, msg)
		}
		return true
	})
}

// storedField reads the field key of a stored message into m, the
// message at index msg of its array (its strings once the array is
// read); false: m has no such field.
func (r *answerReader) storedField(key []byte, m *StoredMessage, msg int) bool {
	switch string(key) {
	case "offset":
		m.Offset = r.int64()
	case "messageId":
		r.runStr(msg, fieldMessageID)
	case "transactionId":
		r.runStr(msg, fieldTransactionID)
	case "createdAt":
		m.CreatedAt = r.createdAt()
	case "data":
		m.Data = r.raw()
	case "dataEncoding":
		m.DataEncoding = r.str()
	case "headers":
		raw := r.raw()
		if r.Err == nil && m.Headers.UnmarshalJSON(raw) != nil {
			r.decline()
		}
	default:
		return false
	}
	return true
}

// messageField names a string field of a message.
type messageField uint8

const (
	fieldMessageID messageField = iota
	fieldTransactionID
	fieldLastError
)

// field is where m's string f goes.
func (m *StoredMessage) field(f messageField) *string {
	if f == fieldMessageID {
		return &m.MessageID
	}
	return &m.TransactionID
}

// runStrings are the strings of the messages (or ack items) of one
// array, where they lie in the body, until the array is read whole: then
// they become substrings of one string (assign), not a string each.
type runStrings struct {
	spans []stringSpan
	bytes int
}

// stringSpan is where a message's string field lies in the body (an
// answer is a NATS payload, far below 2 GiB).
type stringSpan struct {
	msg        int32
	field      messageField
	start, end int32
}

// runStr reads a string field of the message at index msg of the array
// being read, to be assigned with the array's others.
func (r *answerReader) runStr(msg int, f messageField) {
	s := r.plainString()
	if r.Err != nil {
		return
	}
	end := r.I - 1 // before the closing quote
	if r.run.spans == nil {
		r.run.spans = make([]stringSpan, 0, 64) // a batch's messages, two strings each
	}
	r.run.spans = append(r.run.spans, stringSpan{msg: int32(msg), field: f, start: int32(end - len(s)), end: int32(end)})
	r.run.bytes += len(s)
}

// assign sets each string gathered, through to, to its text in body, all
// of them substrings of one string, and empties run for the next array.
func (run *runStrings) assign(body []byte, to func(msg int, f messageField) *string) {
	var all strings.Builder
	all.Grow(run.bytes)
	for _, sp := range run.spans {
		all.Write(body[sp.start:sp.end])
	}
	text, at := all.String(), 0
	for _, sp := range run.spans {
		n := int(sp.end - sp.start)
		*to(int(sp.msg), sp.field) = text[at : at+n]
		at += n
	}
	run.spans, run.bytes = run.spans[:0], 0
}

// end reports a body read whole by the hand decoder.
func (r *answerReader) end() bool {
	r.WS()
	return r.Err == nil && r.I == len(r.B)
}

// decline gives the answer up to json.Unmarshal.
func (r *answerReader) decline() { r.Fail("declined by the hand decoder") }

// object reads one of an answer's objects, {"key": value, …}: member
// reads the value of a field it knows and returns false for any other.
// A field given twice is declined (encoding/json keeps the last; not
// worth following).
func (r *answerReader) object(member func(key []byte) bool) {
	if r.WS(); r.Peek() != '{' {
		r.decline()
		return
	}
	var seenFirst [8][]byte // the fields of an answer's objects, on the stack
	seen := seenFirst[:0]
	r.Object(func(key []byte) bool {
		for _, k := range seen {
			if bytes.Equal(k, key) {
				r.decline()
				return true
			}
		}
		if seen = append(seen, key); !member(key) {
			r.decline()
		}
		return true
	})
}

// array reads [elem, …], calling elem at each element.
func (r *answerReader) array(elem func()) {
	if r.WS(); r.Peek() != '[' {
		r.decline()
		return
	}
	r.Array(elem)
}

// plainString is the text of the string at r.I, without its quotes,
// when it holds no escape (the scanner refuses control characters and
// invalid UTF-8): then encoding/json decodes it to that text too.
func (r *answerReader) plainString() []byte {
	if r.WS(); r.Peek() != '"' {
		r.decline()
		return nil
	}
	start := r.I
	if r.Str(nil) {
		r.decline()
	}
	if r.Err != nil {
		return nil
	}
	return r.B[start+1 : r.I-1]
}

func (r *answerReader) str() string { return string(r.plainString()) }

// ackResults are the usual results of an ack item, named once: not a
// string per item.
var ackResults = []string{"acked", "alreadyAcked"}

// result reads an ack item's result.
func (r *answerReader) result() string {
	b := r.plainString()
	for _, known := range ackResults {
		if string(b) == known {
			return known
		}
	}
	return string(b)
}

// int64 reads a whole number: -?(0|[1-9][0-9]*) that fits in 64 bits.
func (r *answerReader) int64() int64 {
	r.WS()
	start := r.I
	r.Number()
	n, err := strconv.ParseInt(string(r.B[start:r.I]), 10, 64)
	if r.Err != nil || err != nil { // a fraction or an exponent does not parse
		r.decline()
		return 0
	}
	return n
}

// newInt64 is a pointer to n, taken from a block of the answer's: an
// ack's items' offsets are not an allocation each. A full block is left
// to the pointers into it, and a larger one started.
func (r *answerReader) newInt64(n int64) *int64 {
	if len(r.int64s) == cap(r.int64s) {
		r.int64s = make([]int64, 0, max(16, 2*cap(r.int64s)))
	}
	r.int64s = append(r.int64s, n)
	return &r.int64s[len(r.int64s)-1]
}

// int reads a whole number that fits in an int.
func (r *answerReader) int() int {
	n := r.int64()
	if int64(int(n)) != n {
		r.decline()
	}
	return int(n)
}

func (r *answerReader) boolean() bool {
	switch r.WS(); r.Peek() {
	case 't':
		r.Literal("true")
		return true
	case 'f':
		r.Literal("false")
		return false
	}
	r.decline()
	return false
}

// time reads a time as time.Time's UnmarshalJSON does, which is what
// encoding/json calls.
func (r *answerReader) time() time.Time {
	r.WS()
	start := r.I
	r.plainString()
	var t time.Time
	if r.Err != nil || t.UnmarshalJSON(r.B[start:r.I]) != nil {
		r.decline()
	}
	return t
}

// createdAt reads a message's time, parsed once for a run of messages
// that give the same text.
func (r *answerReader) createdAt() time.Time {
	r.WS()
	start := r.I
	r.plainString()
	if r.Err != nil {
		return time.Time{}
	}
	if text := r.B[start:r.I]; !bytes.Equal(text, r.lastTimeText) {
		var t time.Time
		if t.UnmarshalJSON(text) != nil {
			r.decline()
			return t
		}
		r.lastTime, r.lastTimeText = t, text
	}
	return r.lastTime
}

// raw reads any JSON value (a message's data) and returns its text, as
// json.RawMessage's UnmarshalJSON keeps it: a slice of the body, its
// capacity ending with it (an append copies, never overwriting what
// follows).
func (r *answerReader) raw() json.RawMessage {
	r.WS()
	start := r.I
	r.Value()
	if r.Err != nil {
		return nil
	}
	return json.RawMessage(r.B[start:r.I:r.I])
}
