package pgstore_test

import (
	"context"
	"testing"
	"time"

	"github.com/queengate/queengate/internal/wire"
	"github.com/queengate/queengate/model"
)

// BenchmarkPopAnswer is the gateway's side of a pop of 100 messages,
// from the statement's rows to the answer's payload: the store's pop
// (its scan of the routine's arrays) and the answer written as the
// gateway sends it. What it allocates is what a pop's answer costs the
// gateway beyond pgx's fixed cost per statement.
//
// pop: a general pop, taken back (Undo, untimed) after each round so
// that every round delivers the same 100 messages of one frame.
// cycle: each pop carries the whole ack of the batch before, the
// consumer's usual round (consumer_cycle).
func BenchmarkPopAnswer(b *testing.B) {
	const n = 100
	b.Run("pop", func(b *testing.B) {
		st, p := benchSetup(b)
		ctx := context.Background()
		rows := benchRows{prefix: "answer-"}
		if _, err := st.Push(ctx, []model.Frame{rows.frame(p.ID, -1, n)}); err != nil {
			b.Fatal(err)
		}
		g, err := st.EnsureGroup(ctx, "bench", "g")
		if err != nil {
			b.Fatal(err)
		}
		pr := model.PopRequest{Group: g, Max: n, Lease: time.Minute, Consumer: "c", MaxBytes: 1 << 20, Room: 1 << 20}
		b.ReportAllocs()
		for b.Loop() {
			r, err := st.Pop(ctx, pr)
			if err != nil || len(r.Messages) != n {
				b.Fatalf("pop: %d messages, %v", len(r.Messages), err)
			}
			_ = wire.EncodePop("bench", "g", &r, nil)
			b.StopTimer()
			if undone, err := st.Undo(ctx, g, r.PartitionID, r.LeaseID); err != nil || !undone {
				b.Fatalf("undo: %v, %v", undone, err)
			}
			b.StartTimer()
		}
	})
	b.Run("cycle", func(b *testing.B) {
		st, p := benchSetup(b)
		ctx := context.Background()
		rows := benchRows{prefix: "answer-cycle-"}
		g, err := st.EnsureGroup(ctx, "bench", "g")
		if err != nil {
			b.Fatal(err)
		}
		pr := model.PopRequest{Group: g, Max: n, Lease: time.Minute, Consumer: "c", MaxBytes: 1 << 20, Room: 1 << 20}
		last, consumed := int64(-1), int64(0)
		var prev model.PopResult
		b.ReportAllocs()
		for b.Loop() {
			for consumed+n > last+1 {
				b.StopTimer()
				res, err := st.Push(ctx, []model.Frame{rows.frame(p.ID, last, 1000)})
				if err != nil {
					b.Fatal(err)
				}
				last = res[0].LastOffset
				b.StartTimer()
			}
			if prev, err = cyclePop(ctx, st, pr, prev); err != nil || len(prev.Messages) != n {
				b.Fatalf("pop: %d messages, %v", len(prev.Messages), err)
			}
			_ = wire.EncodePop("bench", "g", &prev, nil)
			consumed += n
		}
	})
}
