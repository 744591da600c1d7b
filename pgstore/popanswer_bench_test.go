package pgstore_test

import (
	"context"
	"syscall"
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
//
// go-cpu-us/op is this process's CPU per round (pgx, the scan, the
// answer, the garbage collector; the untimed take-back or pushes too,
// but not PostgreSQL's): on a shared machine ns/op is mostly waiting for
// the server and for a CPU.
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
		pr := model.PopQuery{Group: g, Max: n, Lease: time.Minute, Consumer: "c", MaxBytes: 1 << 20, Room: 1 << 20}
		b.ReportAllocs()
		cpu0 := processCPU()
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
		reportProcessCPU(b, cpu0)
	})
	b.Run("cycle", func(b *testing.B) {
		st, p := benchSetup(b)
		ctx := context.Background()
		rows := benchRows{prefix: "answer-cycle-"}
		g, err := st.EnsureGroup(ctx, "bench", "g")
		if err != nil {
			b.Fatal(err)
		}
		pr := model.PopQuery{Group: g, Max: n, Lease: time.Minute, Consumer: "c", MaxBytes: 1 << 20, Room: 1 << 20}
		last, consumed := int64(-1), int64(0)
		var prev model.PopResult
		b.ReportAllocs()
		cpu0 := processCPU()
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
		reportProcessCPU(b, cpu0)
	})
}

// processCPU is the user and system time this process used so far.
func processCPU() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// reportProcessCPU reports the process's CPU per round since cpu0.
func reportProcessCPU(b *testing.B, cpu0 time.Duration) {
	b.ReportMetric(float64((processCPU()-cpu0).Microseconds())/float64(b.N), "go-cpu-us/op")
}
