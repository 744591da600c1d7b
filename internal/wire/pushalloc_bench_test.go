package wire_test

import (
	"fmt"
	"runtime"
	"testing"

	"github.com/queengate/queengate/internal/wire"
	"github.com/queengate/queengate/model"
)

// BenchmarkPushDecodeAnswer is what the gateway allocates on its side of
// a sessions-shape push (issue 35): a 10-message request of ~100-byte
// messages decoded and checked, and its answer encoded into a buffer
// reused, as the gateway reuses its answers' buffers. B/msg is B/op over
// the 10 messages. With headers=3 every message carries the three small
// headers of queenbench's headers3 target, the same in every message, as
// a producer's are.
//
//	go test -run '^$' -bench PushDecodeAnswer ./internal/wire
func BenchmarkPushDecodeAnswer(b *testing.B) {
	cases := []struct{ name, headers string }{
		{"headers=0", ""},
		{"headers=3", `"headers":{"content-type":"application/json","x-tenant":"acme","x-schema":"v3"},`},
	}
	for _, c := range cases {
		b.Run(c.name, func(b *testing.B) { benchPushDecodeAnswer(b, c.headers) })
	}
}

func benchPushDecodeAnswer(b *testing.B, headers string) {
	const perRequest = 10
	body := []byte{'['}
	for i := range perRequest {
		if i > 0 {
			body = append(body, ',')
		}
		body = fmt.Appendf(body, `{"transactionId":"s-1234-%d",%s"data":{"orderId":%d,"amount":99.5,"note":"about a hundred bytes of payload"}}`, i, headers, i)
	}
	body = append(body, ']')
	results := make([]model.PushOutcome, perRequest)
	for i := range results {
		results[i] = model.PushOutcome{Status: model.StatusQueued, PartitionID: 81234, Offset: int64(1000 + i)}
	}
	var answer []byte
	var before runtime.MemStats
	runtime.ReadMemStats(&before)
	b.ReportAllocs()
	for b.Loop() {
		msgs, werr := wire.DecodePush(body, 1000)
		if werr != nil {
			b.Fatal(werr)
		}
		if werr := wire.CheckPushSizes(msgs, 1<<20); werr != nil {
			b.Fatal(werr)
		}
		answer = wire.AppendReply(answer, msgs, results, 1<<20)
		if len(answer) == 0 {
			b.Fatal("no answer")
		}
	}
	var after runtime.MemStats
	runtime.ReadMemStats(&after)
	b.ReportMetric(float64(after.TotalAlloc-before.TotalAlloc)/float64(b.N*perRequest), "B/msg")
}
