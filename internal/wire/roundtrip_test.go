package wire

import (
	"bytes"
	"encoding/json"
	"errors"
	"math"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	queengate "github.com/queengate/queengate"
	"github.com/queengate/queengate/model"
)

// The answers internal/wire writes by hand, decoded by encoding/json into
// the root package's types (what a client reads by their JSON tags), are
// the values encoded, their strings as every decoder reads them; and the
// request bodies encoding/json writes from the root package's types
// decode with internal/wire's decoders to the values encoded.

// wireStrings are strings an encoder must get right: JSON's escapes,
// what encoding/json escapes and the one encoder does not, invalid UTF-8.
var wireStrings = []string{"", "plain", `"q" \ back/`, "\n\r\t\b\f\x00\x1f\x7f", "<a>&amp;</a>", "\u2028\u2029",
	"é€😀", "\xff\xfe", "cut\xe2\x80", "\xed\xa0\x80", "\u2019 ’", "\ufffd"}

// answerValues are the strings and number one check of the answers uses.
type answerValues struct {
	id, text, name string
	n              int64
}

// TestAnswersDecodeAsEncoded checks every answer over the table's strings
// in every role, and over random ones.
func TestAnswersDecodeAsEncoded(t *testing.T) {
	t.Parallel()
	for i, s := range wireStrings {
		other := wireStrings[(i+1)%len(wireStrings)]
		checkAnswers(t, answerValues{id: s, text: other, name: s, n: int64(i)})
		checkAnswers(t, answerValues{id: other, text: s, name: other, n: -int64(i)})
		checkRequests(t, answerValues{id: s, text: other, n: int64(i) << 40})
	}
	r := rand.New(rand.NewPCG(25, 3))
	for range 500 {
		v := answerValues{id: randomString(r), text: randomString(r), name: randomString(r), n: r.Int64() - math.MaxInt64/2}
		checkAnswers(t, v)
		checkRequests(t, v)
	}
}

// FuzzAnswersDecodeAsEncoded is TestAnswersDecodeAsEncoded over any strings.
func FuzzAnswersDecodeAsEncoded(f *testing.F) {
	for i, s := range wireStrings {
		f.Add(s, wireStrings[(i+1)%len(wireStrings)], s, int64(i))
	}
	f.Fuzz(func(t *testing.T, id, text, name string, n int64) {
		v := answerValues{id: id, text: text, name: name, n: n}
		checkAnswers(t, v)
		checkRequests(t, v)
	})
}

// randomString strings together pieces of wireStrings and single bytes.
func randomString(r *rand.Rand) string {
	var b strings.Builder
	for range r.IntN(8) {
		if r.IntN(3) == 0 {
			b.WriteByte(byte(r.IntN(256)))
			continue
		}
		b.WriteString(wireStrings[r.IntN(len(wireStrings))])
	}
	return b.String()
}

// decoded is s as a JSON decoder reads it back: a U+FFFD for each byte of
// invalid UTF-8.
func decoded(s string) string { return string([]rune(s)) }

// decodeStrict decodes an answer into T, refusing bytes that are not
// UTF-8, anything after the value, and a field T does not have (a name
// misspelt by a hand encoder).
func decodeStrict[T any](t *testing.T, b []byte) T {
	t.Helper()
	var v T
	d := json.NewDecoder(bytes.NewReader(b))
	d.DisallowUnknownFields()
	if err := d.Decode(&v); err != nil || d.More() || !utf8.Valid(b) || !json.Valid(b) {
		t.Fatalf("%s: not one valid UTF-8 JSON %T (%v)", b, v, err)
	}
	return v
}

// same checks that the answer encoded decodes to want, and that want
// goes through encoding/json unchanged (the root type's tags and
// omitempty lose nothing the wire carries).
func same[T any](t *testing.T, what string, encoded []byte, want T) {
	t.Helper()
	if got := decodeStrict[T](t, encoded); !reflect.DeepEqual(got, want) {
		t.Fatalf("%s %s decodes to\n%#v\nwant\n%#v", what, encoded, got, want)
	}
	if back := decodeStrict[T](t, mustMarshal(want)); !reflect.DeepEqual(back, want) {
		t.Fatalf("%s: %#v goes through encoding/json as %#v", what, want, back)
	}
}

func checkAnswers(t *testing.T, v answerValues) {
	t.Helper()
	checkPushReply(t, v)
	checkReadAnswers(t, v)
	checkPopAnswer(t, v)
	checkErrorBody(t, v)
}

func checkPushReply(t *testing.T, v answerValues) {
	t.Helper()
	pid, off := max(v.n&0xffff, 1), v.n&0xffffff
	msgs := []model.Incoming{{TxnID: v.id}, {TxnID: v.text}, {TxnID: v.id}, {TxnID: v.name}}
	results := []model.PushOutcome{
		{Status: model.StatusQueued, PartitionID: pid, Offset: off},
		{Status: model.StatusDuplicate, PartitionID: pid, Offset: off + 1, Conflict: true},
		{Status: model.StatusFailed, PartitionID: pid, Err: errors.New(v.text)},
		{Status: model.StatusFailed},
	}
	want := []queengate.Result{
		{Index: 0, TransactionID: decoded(v.id), Status: queengate.StatusQueued, PartitionID: pid, MessageID: model.MessageID(pid, off), Offset: off},
		{Index: 1, TransactionID: decoded(v.text), Status: queengate.StatusDuplicate, PartitionID: pid, MessageID: model.MessageID(pid, off+1), Offset: off + 1, Conflict: true},
		{Index: 2, TransactionID: decoded(v.id), Status: queengate.StatusFailed, PartitionID: pid, Error: decoded(v.text)},
		{Index: 3, TransactionID: decoded(v.name), Status: queengate.StatusFailed, Error: "not stored"},
	}
	same(t, "push reply", EncodeReply(msgs, results, math.MaxInt), want)
}

// stored is a stored message of v's, and what a client reads of it.
func stored(v answerValues) (queengate.StoredMessage, queengate.StoredMessage) {
	pid, off := max(v.n&0xffff, 1), v.n&0xffffff
	at := time.Unix(v.n&0xffffffff, v.n&0x3fffffff).UTC()
	m := queengate.StoredMessage{Offset: off, MessageID: model.MessageID(pid, off), TransactionID: v.id, CreatedAt: at,
		Data: mustMarshal(map[string]string{v.name: v.text})}
	want := m
	want.TransactionID = decoded(v.id)
	return m, want
}

func checkReadAnswers(t *testing.T, v answerValues) {
	t.Helper()
	m, wantMsg := stored(v)
	a := queengate.ReadAnswer{Queue: v.name, Partition: v.text, PartitionID: v.n, Messages: []queengate.StoredMessage{m, m},
		Next: v.n + 1, FirstOffset: v.n - 1, LastOffset: v.n, Purged: v.n%2 == 0}
	want := a
	want.Queue, want.Partition, want.Messages = decoded(v.name), decoded(v.text), []queengate.StoredMessage{wantMsg, wantMsg}
	same(t, "read answer", EncodeRead(&a, nil), want)
	a.Messages, want.Messages = nil, []queengate.StoredMessage{}
	same(t, "empty read answer", EncodeRead(&a, nil), want)

	one := queengate.MessageAnswer{Queue: v.text, Partition: v.name, PartitionID: v.n, StoredMessage: m}
	wantOne := queengate.MessageAnswer{Queue: decoded(v.text), Partition: decoded(v.name), PartitionID: v.n, StoredMessage: wantMsg}
	same(t, "message answer", EncodeMessage(&one, nil), wantOne)
}

func checkPopAnswer(t *testing.T, v answerValues) {
	t.Helper()
	m, wantMsg := stored(v)
	pid := max(v.n&0xffff, 1)
	until := m.CreatedAt.Add(time.Minute)
	ack := queengate.AckAnswer{Items: []queengate.AckResult{{Index: 0, TransactionID: v.id, Offset: &m.Offset, Result: "acked"},
		{Index: 1, TransactionID: v.text, Result: v.name}}, NextOffset: v.n, LeaseEnded: v.n%2 == 0, DeadLettered: int(v.n & 3)}
	wantAck := ack
	wantAck.Items = []queengate.AckResult{{Index: 0, TransactionID: decoded(v.id), Offset: &m.Offset, Result: "acked"},
		{Index: 1, TransactionID: decoded(v.text), Result: decoded(v.name)}}
	same(t, "ack answer", AppendAckAnswer(nil, &ack), wantAck)

	r := model.PopResult{PartitionID: pid, Partition: v.name, LeaseID: "0b0e6d1c-6c1a-4a4e-9d3f-6a3c6f0e2b1d", LeaseUntil: until,
		DeadLettered: int(v.n & 7), Messages: []model.LeasedMessage{{LogMessage: model.LogMessage{PartitionID: pid, Offset: m.Offset,
			TxnID: v.id, CreatedAt: m.CreatedAt, Data: m.Data}, Attempts: int(v.n & 0xff), LastError: v.text}}}
	want := queengate.PopAnswer{Queue: decoded(v.text), Group: decoded(v.id), Partition: decoded(v.name), PartitionID: pid,
		LeaseID: r.LeaseID, LeaseUntil: &until, DeadLettered: r.DeadLettered, Ack: &wantAck,
		Messages: []queengate.Delivery{{StoredMessage: wantMsg, Attempts: r.Messages[0].Attempts, LastError: decoded(v.text)}}}
	same(t, "pop answer", EncodePop(v.text, v.id, &r, AppendAckAnswer(nil, &ack)), want)

	second := r
	second.PartitionID, second.Partition = pid+1, v.text
	second.Messages = []model.LeasedMessage{{LogMessage: model.LogMessage{PartitionID: pid + 1, Offset: m.Offset, TxnID: v.id,
		CreatedAt: m.CreatedAt, Data: m.Data}, Attempts: 1}}
	acks := append(append([]byte{'['}, AppendAckAnswer(nil, &ack)...), ']')
	wantMulti := want
	wantMulti.Ack, wantMulti.Acks = nil, []queengate.AckAnswer{wantAck}
	wantMulti.More = []queengate.PopLease{{Partition: decoded(v.text), PartitionID: pid + 1, LeaseID: r.LeaseID, LeaseUntil: &until,
		Messages: []queengate.Delivery{{StoredMessage: wantMsg, Attempts: 1}}}}
	wantMulti.More[0].Messages[0].MessageID = model.MessageID(pid+1, m.Offset)
	same(t, "multi-partition pop answer", EncodePopLeases(v.text, v.id, &r, []model.PopResult{second}, "acks", acks), wantMulti)

	empty := queengate.PopAnswer{Queue: decoded(v.name), Group: decoded(v.text), Messages: []queengate.Delivery{}}
	same(t, "empty pop answer", EncodePop(v.name, v.text, &model.PopResult{}, nil), empty)
}

func checkErrorBody(t *testing.T, v answerValues) {
	t.Helper()
	e := &queengate.Error{Code: int(v.n & 0x3ff), Text: v.text}
	same(t, "error body", ErrorBody(e), queengate.ErrorBody{Error: queengate.Error{Code: e.Code, Text: decoded(v.text)}})
	same(t, "error answer", ErrorMsg(e, "reply").Data, queengate.ErrorBody{Error: queengate.Error{Code: e.Code, Text: decoded(v.text)}})
}

// checkRequests: bodies encoding/json writes from the root package's
// request types decode with internal/wire's decoders to the values
// encoded, or are refused for what the protocol refuses (\u0000, which
// encoding/json writes for a NUL and jsonb cannot hold; an overlong id).
func checkRequests(t *testing.T, v answerValues) {
	t.Helper()
	data := mustMarshal([]string{v.text, v.name})
	body := mustMarshal([]queengate.Message{{TransactionID: v.id, Data: data}, {}})
	msgs, werr := DecodePush(body, 2)
	id := decoded(v.id)
	switch {
	case strings.Contains(v.id+v.text+v.name, "\x00") || len(id) > queengate.MaxTxnIDBytes:
		if werr == nil {
			t.Fatalf("push %s decoded, want a 400", body)
		}
	case werr != nil:
		t.Fatalf("push %s: %v", body, werr)
	case v.id == "" && !strings.HasPrefix(msgs[0].TxnID, "qg-"), v.id != "" && msgs[0].TxnID != id,
		!bytes.Equal(msgs[0].Data, data), msgs[1].Data != nil || !strings.HasPrefix(msgs[1].TxnID, "qg-"):
		t.Fatalf("push %s decodes to %+v", body, msgs)
	}
	checkAckItem(t, v)

	read := queengate.ReadRequest{From: v.n, Max: int(v.n >> 3), MaxBytes: -v.n}
	var got queengate.ReadRequest
	if werr := DecodeObject(mustMarshal(read), TheBody, Shape{Name: "a read"},
		Field{Name: "from", Decode: WholeNumberInto("from", math.MinInt64, math.MaxInt64, &got.From)},
		Field{Name: "max", Decode: WholeNumberInto("max", math.MinInt64, math.MaxInt64, &got.Max)},
		Field{Name: "maxBytes", Decode: WholeNumberInto("maxBytes", math.MinInt64, math.MaxInt64, &got.MaxBytes)},
	); werr != nil || got != read {
		t.Fatalf("read request %+v decodes to %+v (%v)", read, got, werr)
	}
}

// checkAckItem decodes an ack item's strings with StringInto.
func checkAckItem(t *testing.T, v answerValues) {
	t.Helper()
	off := v.n
	item := queengate.AckItem{TransactionID: v.id, Offset: &off, Status: v.name, Error: v.text, DelayMs: v.n}
	body := mustMarshal(item)
	var got queengate.AckItem
	werr := DecodeObject(body, TheBody, Shape{Name: "an ack item"},
		Field{Name: "transactionId", Decode: StringInto("transactionId", &got.TransactionID)},
		Field{Name: "offset", Decode: func(raw []byte) *queengate.Error {
			got.Offset = new(int64)
			return WholeNumberInto("offset", math.MinInt64, math.MaxInt64, got.Offset)(raw)
		}},
		Field{Name: "status", Decode: StringInto("status", &got.Status)},
		Field{Name: "error", Decode: StringInto("error", &got.Error)},
		Field{Name: "delayMs", Decode: WholeNumberInto("delayMs", math.MinInt64, math.MaxInt64, &got.DelayMs)},
	)
	want := queengate.AckItem{TransactionID: decoded(v.id), Offset: &off, Status: decoded(v.name), Error: decoded(v.text), DelayMs: v.n}
	switch {
	case strings.Contains(v.id+v.name+v.text, "\x00"):
		if werr == nil {
			t.Fatalf("ack item %s decoded, want a 400 for \\u0000", body)
		}
	case werr != nil || !reflect.DeepEqual(got, want):
		t.Fatalf("ack item %s decodes to %+v, want %+v (%v)", body, got, want, werr)
	}
}
