package pgstore_test

import (
	"context"
	"runtime"
	"testing"

	"github.com/queengate/queengate/model"
)

// BenchmarkPushSessionsAllocs is what the gateway allocates to push one
// bundle of the sessions shape (issue 35): 100 frames of 10 ~100-byte
// messages, each to a partition of its own among 10,000, vouched (the
// cache's steady state). The frames are built before the timer, so the
// figures are the store's alone: the arguments' encoding, the statement
// and the reading of its answer; B/msg is B/op over the 1000 messages.
//
//	go test -run '^$' -bench PushSessionsAllocs -benchtime 200x ./pgstore
func BenchmarkPushSessionsAllocs(b *testing.B) {
	const frames, perFrame = 100, 10
	st, pids := benchPartitions(b, 10_000)
	ctx := context.Background()
	rows := benchRows{prefix: "alloc-"}
	next := 0
	bundle := func() []model.Frame {
		fs := make([]model.Frame, frames)
		for i := range fs {
			fs[i] = rows.frame(pids[next%len(pids)], 1<<62, perFrame)
			next++
		}
		return fs
	}
	push := func(fs []model.Frame) {
		res, err := st.Push(ctx, fs)
		if err != nil {
			b.Fatal(err)
		}
		if len(res) != frames || res[0].BaseOffset < 0 {
			b.Fatalf("%d results, base %d", len(res), res[0].BaseOffset)
		}
	}
	push(bundle()) // the session plans the routine once, before the timer
	bundles := make([][]model.Frame, b.N)
	for i := range bundles {
		bundles[i] = bundle()
	}
	b.ReportAllocs()
	measure := startAllocCount()
	b.ResetTimer()
	for i := range b.N {
		push(bundles[i])
	}
	b.StopTimer()
	measure.report(b, frames*perFrame)
}

// allocCount measures the bytes allocated between its start and report,
// as testing does for B/op, to report them per message.
type allocCount struct{ start uint64 }

func startAllocCount() allocCount {
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return allocCount{m.TotalAlloc}
}

func (c allocCount) report(b *testing.B, perOp int) {
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	b.ReportMetric(float64(m.TotalAlloc-c.start)/float64(b.N*perOp), "B/msg")
}
