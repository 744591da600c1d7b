package queengate

import (
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"
)

// gatewayPopAnswer is a pop's answer written as the gateway writes it
// (field order, formats): n messages of about 100 bytes each and the
// answer of the ack the pop carried.
func gatewayPopAnswer(n int) []byte {
	var b strings.Builder
	b.WriteString(`{"queue":"bench","group":"g","partition":"p3","partitionId":12,"leaseId":"5f0c2a9e-3b1d-4c6e-9a8f-0123456789ab",` +
		`"leaseUntil":"2026-12-01T18:10:11.123456Z","deadLettered":1,"ack":{"items":[`)
	for i := range n {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `{"index":%d,"offset":%d,"result":"acked"}`, i, 1000000+i)
	}
	b.WriteString(`],"nextOffset":1000100,"leaseEnded":true},"messages":[`)
	for i := range n {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `{"offset":%d,"messageId":"12-%d","transactionId":"t-%d-é","createdAt":"2026-12-01T18:10:01.123456Z",`+
			`"data":{"n":%d,"s":"x\"y\u00e9","l":[1.5e3,-0,true,false,null,{}],"payload":"%s"},"attempts":%d`,
			1000100+i, 1000100+i, i, i, strings.Repeat("x", 40), 1+i%2)
		if i%2 == 1 {
			b.WriteString(`,"lastError":"handler: timeout"`)
		}
		b.WriteByte('}')
	}
	b.WriteString(`]}`)
	return []byte(b.String())
}

// gatewayMultiPopAnswer is a multi-partition pop's answer as the gateway
// writes it: the first partition's as gatewayPopAnswer's, leases-1 more
// partitions of n messages each, and the answers of two carried acks.
func gatewayMultiPopAnswer(n, leases int) []byte {
	first := gatewayPopAnswer(n)
	ack := `{"items":[{"index":0,"offset":3,"result":"acked"}],"nextOffset":4,"leaseEnded":true}`
	var b strings.Builder
	b.Write(first[:len(first)-1])
	b.WriteString(`,"acks":[` + ack + `,` + ack + `],"more":[`)
	for l := 1; l < leases; l++ {
		if l > 1 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `{"partition":"p%d","partitionId":%d,"leaseId":"5f0c2a9e-3b1d-4c6e-9a8f-01234567890%d","leaseUntil":"2026-12-01T18:10:11.5Z","messages":[`, l, 12+l, l)
		for i := range n {
			if i > 0 {
				b.WriteByte(',')
			}
			fmt.Fprintf(&b, `{"offset":%d,"messageId":"%d-%d","transactionId":"t-%d","createdAt":"2026-12-01T18:10:01Z","data":{"n":%d},"attempts":1}`,
				i, 12+l, i, i, i)
		}
		b.WriteString(`]}`)
	}
	b.WriteString(`]}`)
	return []byte(b.String())
}

// gatewayReadAnswer is a read's answer written as the gateway writes it
// (internal/wire's EncodeRead: field order, formats): n messages of about
// 100 bytes each.
func gatewayReadAnswer(n int) []byte {
	var b strings.Builder
	b.WriteString(`{"queue":"bench","partition":"p3","partitionId":12,"messages":[`)
	for i := range n {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `{"offset":%d,"messageId":"12-%d","transactionId":"t-%d-é","createdAt":"2026-12-01T18:10:01.123456Z",`+
			`"data":{"n":%d,"s":"x\"y\u00e9","payload":"%s"}}`, 500+i, 500+i, i, i, strings.Repeat("x", 60))
	}
	fmt.Fprintf(&b, `],"next":%d,"firstOffset":500,"lastOffset":9000,"purged":true}`, 500+n)
	return []byte(b.String())
}

// checkAsEncodingJSON fails t when the hand decoder takes body but
// decodes it otherwise than json.Unmarshal (or json.Unmarshal refuses
// it); it reports whether the hand decoder took it.
func checkAsEncodingJSON[T any](t *testing.T, body []byte, decode func([]byte, *T) bool) bool {
	t.Helper()
	var hand, ref T
	took := decode(body, &hand)
	err := json.Unmarshal(body, &ref)
	switch {
	case took && err != nil:
		t.Fatalf("the hand decoder took %q, which json.Unmarshal refuses: %v", body, err)
	case took && !reflect.DeepEqual(hand, ref):
		t.Fatalf("%q: the hand decoder gives\n%+v\njson.Unmarshal\n%+v", body, hand, ref)
	case !took && !reflect.DeepEqual(hand, *new(T)):
		t.Fatalf("%q: declined, but the answer was changed: %+v", body, hand)
	}
	return took
}

func TestTheGatewaysPopAnswerIsDecodedByHandAsEncodingJSONWould(t *testing.T) {
	for _, n := range []int{0, 1, 3, 100} {
		if !checkAsEncodingJSON(t, gatewayPopAnswer(n), decodePopAnswer) {
			t.Fatalf("the hand decoder declined the gateway's answer of %d messages", n)
		}
	}
	for _, leases := range []int{1, 2, 5} {
		if !checkAsEncodingJSON(t, gatewayMultiPopAnswer(3, leases), decodePopAnswer) {
			t.Fatalf("the hand decoder declined the gateway's answer of %d leases", leases)
		}
	}
	empty := []byte(`{"queue":"q","group":"g","messages":[]}`)
	if !checkAsEncodingJSON(t, empty, decodePopAnswer) {
		t.Fatalf("the hand decoder declined %s", empty)
	}
	until := time.Date(2026, 12, 1, 18, 0, 0, 5, time.UTC)
	off := int64(7)
	marshalled, _ := json.Marshal(PopAnswer{Queue: "q", Group: "g", Partition: "p", PartitionID: 3, LeaseID: "l", LeaseUntil: &until,
		Messages: []Delivery{{StoredMessage: StoredMessage{Offset: 7, MessageID: "3-7", TransactionID: "t", CreatedAt: until, Data: json.RawMessage(`[1,{"a":"b"}]`)}, Attempts: 2, LastError: "e"}},
		Ack:      &AckAnswer{Items: []AckResult{{Index: 0, Offset: &off, Result: "notInLease"}}, NextOffset: 8, DeadLettered: 1},
		Acks:     []AckAnswer{{Items: []AckResult{{Index: 0, Offset: &off, Result: "acked"}}, NextOffset: 8, LeaseEnded: true}},
		More: []PopLease{{Partition: "p2", PartitionID: 4, LeaseID: "l2", LeaseUntil: &until,
			Messages: []Delivery{{StoredMessage: StoredMessage{Offset: 1, MessageID: "4-1", TransactionID: "u", CreatedAt: until, Data: json.RawMessage(`1`)}, Attempts: 1}}}}})
	if !checkAsEncodingJSON(t, marshalled, decodePopAnswer) {
		t.Fatalf("the hand decoder declined %s", marshalled)
	}
}

func TestTheGatewaysReadAnswerIsDecodedByHandAsEncodingJSONWould(t *testing.T) {
	for _, n := range []int{0, 1, 3, 1000} {
		if !checkAsEncodingJSON(t, gatewayReadAnswer(n), decodeReadAnswer) {
			t.Fatalf("the hand decoder declined the gateway's read answer of %d messages", n)
		}
	}
	at := time.Date(2026, 12, 1, 18, 0, 0, 5, time.UTC)
	marshalled, _ := json.Marshal(ReadAnswer{Queue: "q", Partition: "p", PartitionID: 3, Next: 8, FirstOffset: 0, LastOffset: 7,
		Messages: []StoredMessage{{Offset: 7, MessageID: "3-7", TransactionID: "t", CreatedAt: at, Data: json.RawMessage(`[1,{"a":"b"}]`)}}})
	if !checkAsEncodingJSON(t, marshalled, decodeReadAnswer) {
		t.Fatalf("the hand decoder declined %s", marshalled)
	}
	for _, body := range []string{
		`{"queue":"q","messages":[{"offset":1,"attempts":2}]}`, // a delivery's field is no stored message's
		`{"queue":"q","messages":null}`,
		`{"queue":"q","next":1,"next":2}`,
		`{"queue":"q","purged":"yes"}`,
		`{"queue":"q","messages":[{"offset":1}]`,
	} {
		if checkAsEncodingJSON(t, []byte(body), decodeReadAnswer) {
			t.Errorf("the hand decoder took %s", body)
		}
	}
}

// declinedAnswers are answers the hand decoder leaves to json.Unmarshal
// (or that are no answer at all).
var declinedAnswers = []string{
	`{"queue":null,"group":"g","messages":[]}`,
	`{"Queue":"q","group":"g","messages":[]}`,
	`{"queue":"q","queue":"r","messages":[]}`,
	`{"queue":"q\u0041","messages":[]}`,
	`{"queue":"q","unknown":1,"messages":[]}`,
	`{"partitionId":1.0,"messages":[]}`,
	`{"partitionId":01,"messages":[]}`,
	`{"partitionId":99999999999999999999,"messages":[]}`,
	`{"leaseUntil":"yesterday","messages":[]}`,
	`{"messages":[{"data":[1,]}]}`,
	`{"messages":[{"data":"\x"}]}`,
	`{"messages":[{"data":tru}]}`,
	`{"messages":[]} x`,
	`{"messages":[`,
	`{"ack":{"items":[{"index":0,"result":"acked"}],"leaseEnded":1}}`,
	"{\"queue\":\"q\xff\",\"messages\":[]}",
	`[]`, ``, `null`,
	`{"more":null,"messages":[]}`,
	`{"acks":{},"messages":[]}`,
	`{"more":[{"partition":"p","other":1}],"messages":[]}`,
	`{"more":[{"partition":"p","partition":"q"}],"messages":[]}`,
	`{"more":[{"messages":null}],"messages":[]}`,
	// Data no gateway writes (jsonb holds neither): the strict scanner
	// refuses it, json.Unmarshal decodes it.
	`{"messages":[{"data":{"k\u00e9":"\ud800"}}]}`,
	"{\"messages\":[{\"data\":\"\xff\"}]}",
}

// takenAnswers are answers the hand decoder takes though the gateway
// does not write them so: data is kept as it is, whatever it holds.
var takenAnswers = []string{
	`{"messages":[{"data":{"a":1,"a":2}}]}`,
	` { "queue" : "q" , "messages" : [ { "data" : [ ] } ] } `,
	`{"ack":{"items":[],"nextOffset":-1,"leaseEnded":false}}`,
	`{"messages":[{"data":null,"attempts":0}]}`,
	`{"acks":[],"more":[],"messages":[]}`,
	`{"more":[{}],"acks":[{}]}`,
}

func TestTheHandDecoderTakesWhatItCanDecodeExactlyAndLeavesTheRest(t *testing.T) {
	for _, body := range declinedAnswers {
		if checkAsEncodingJSON(t, []byte(body), decodePopAnswer) {
			t.Errorf("the hand decoder took %s", body)
		}
	}
	for _, body := range takenAnswers {
		if !checkAsEncodingJSON(t, []byte(body), decodePopAnswer) {
			t.Errorf("the hand decoder declined %s", body)
		}
	}
}

func FuzzPopAnswerDecodesAsEncodingJSON(f *testing.F) {
	f.Add(gatewayPopAnswer(2))
	f.Add(gatewayMultiPopAnswer(2, 3))
	for _, body := range append(declinedAnswers, takenAnswers...) {
		f.Add([]byte(body))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		checkAsEncodingJSON(t, body, decodePopAnswer)
		checkAsEncodingJSON(t, body, decodeAckAnswer)
	})
}

func FuzzReadAnswerDecodesAsEncodingJSON(f *testing.F) {
	f.Add(gatewayReadAnswer(2))
	for _, body := range append(declinedAnswers, takenAnswers...) {
		f.Add([]byte(body))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		checkAsEncodingJSON(t, body, decodeReadAnswer)
	})
}

// BenchmarkDecodeReadAnswer: a read's page of 1000 messages, by hand and
// by json.Unmarshal (what a reader paid before).
func BenchmarkDecodeReadAnswer(b *testing.B) {
	body := gatewayReadAnswer(1000)
	b.Run("hand", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			var a ReadAnswer
			if !decodeReadAnswer(body, &a) {
				b.Fatal("declined")
			}
		}
	})
	b.Run("encoding-json", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			var a ReadAnswer
			if err := json.Unmarshal(body, &a); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// BenchmarkDecodePopAnswer: decoding a batch of 100 with json.Unmarshal
// was about 3 µs per message, most of a consumer's CPU.
func BenchmarkDecodePopAnswer(b *testing.B) {
	body := gatewayPopAnswer(100)
	b.ReportAllocs()
	for b.Loop() {
		var a PopAnswer
		if !decodePopAnswer(body, &a) {
			b.Fatal("declined")
		}
	}
}

// TestAPopAnswerDecodesInAllocationsPerAnswer: decoding a pop's answer
// allocates per answer, not per message (it was four per message: its
// messageId, transactionId, data and the ack item's offset): the data
// are slices of the body, the strings substrings of one per array.
func TestAPopAnswerDecodesInAllocationsPerAnswer(t *testing.T) {
	for _, n := range []int{100, 1000} {
		body := gatewayPopAnswer(n)
		allocs := testing.AllocsPerRun(10, func() {
			var a PopAnswer
			if !decodePopAnswer(body, &a) {
				t.Fatal("declined")
			}
		})
		if allocs > 40 {
			t.Errorf("decoding a pop's answer of %d messages allocates %.0f times; want at most 40, whatever the messages", n, allocs)
		}
	}
}

// TestADecodedMessagesDataIsItsOwn: a message's data is a slice of the
// answer as received; appending to it, or changing it, leaves the other
// messages as they were.
func TestADecodedMessagesDataIsItsOwn(t *testing.T) {
	body := gatewayPopAnswer(3)
	var a, want PopAnswer
	if !decodePopAnswer(body, &a) {
		t.Fatal("declined")
	}
	if err := json.Unmarshal(gatewayPopAnswer(3), &want); err != nil {
		t.Fatal(err)
	}
	first := &a.Messages[0]
	_ = append(first.Data, strings.Repeat(" ", 300)...) // over the next message, were its capacity the body's
	clear(first.Data)
	first.Data = want.Messages[0].Data
	if !reflect.DeepEqual(a, want) {
		t.Fatalf("after the first message's data was appended to and cleared, the answer is\n%+v\nwant\n%+v", a, want)
	}
}
