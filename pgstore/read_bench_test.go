package pgstore_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/queengate/queengate/internal/pgtest"
	"github.com/queengate/queengate/model"
)

// paddedData is a 100-byte JSON message.
func paddedData(k int) []byte { return fmt.Appendf(nil, `{"k":%d,"pad":"%090d"}`, k, 0) }

// BenchmarkMessageAt fetches one message from frames of 10 and of 1000
// messages (100-byte data): PostgreSQL decompresses a frame's whole
// arrays to subscript them, so the larger frame costs more per get.
func BenchmarkMessageAt(b *testing.B) {
	for _, frame := range []int{10, 1000} {
		b.Run(fmt.Sprintf("frame=%d", frame), func(b *testing.B) {
			s := pgtest.Store(b, pgtest.NewDB(b))
			p := pushFrames(b, s, "bench", "p", 10_000, frame, paddedData)
			b.ResetTimer()
			for i := range b.N {
				if _, _, _, err := s.MessageAt(context.Background(), p.ID, int64(i*7919%10_000)); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkRead reads 1000 messages at a time from frames of 1000.
func BenchmarkRead(b *testing.B) {
	s := pgtest.Store(b, pgtest.NewDB(b))
	pushFrames(b, s, "bench", "p", 100_000, 1000, paddedData)
	b.ResetTimer()
	for i := range b.N {
		from := int64(i*1000) % 100_000
		res, err := s.Read(context.Background(), model.ReadQuery{Queue: "bench", Partition: "p", From: from, Max: 1000, MaxBytes: 1 << 20})
		if err != nil || len(res.Messages) != 1000 {
			b.Fatalf("%d messages, %v", len(res.Messages), err)
		}
	}
	b.ReportMetric(float64(b.N*1000)/b.Elapsed().Seconds(), "msg/s")
}
