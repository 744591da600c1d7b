package pgstore_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/queengate/queengate/internal/pgtest"
	"github.com/queengate/queengate/model"
	"github.com/queengate/queengate/tail"
)

// BenchmarkConsume is a consumer's round in the store: pop a batch, then
// acknowledge it by transactionId (or by offset), one partition stored in
// 1000-message frames; carried, each pop carries the previous batch's
// ack, as the gateway serves it (cyclePop).
func BenchmarkConsume(b *testing.B) {
	b.Run("batch=100/carried", benchmarkCarried(100, false))
	b.Run("batch=1000/carried", benchmarkCarried(1000, false))
	b.Run("batch=100/carried/tail", benchmarkCarried(100, true))
	b.Run("batch=1000/carried/tail", benchmarkCarried(1000, true))
	b.Run("partitions=10000/batch=25", benchmarkManyPartitions)
	for _, byOffset := range []bool{false, true} {
		for _, n := range []int{100, 1000} {
			b.Run(fmt.Sprintf("batch=%d/byOffset=%v", n, byOffset), func(b *testing.B) {
				st, p := benchSetup(b)
				ctx := context.Background()
				rows := benchRows{prefix: "consume-"}
				last := int64(-1)
				push := func() {
					res, err := st.Push(ctx, []model.Frame{rows.frame(p.ID, last, 1000)})
					if err != nil {
						b.Fatal(err)
					}
					last = res[0].LastOffset
				}
				g, err := st.EnsureGroup(ctx, "bench", "g")
				if err != nil {
					b.Fatal(err)
				}
				consumed := int64(0)
				var popT, ackT time.Duration
				for b.Loop() {
					for consumed+int64(n) > last+1 {
						b.StopTimer()
						push()
						b.StartTimer()
					}
					t0 := time.Now()
					r, err := st.Pop(ctx, model.PopQuery{Group: g, Max: n, Lease: time.Minute, Consumer: "c", MaxBytes: 1 << 20, Room: 1 << 20})
					if err != nil || len(r.Messages) != n {
						b.Fatalf("pop: %d messages, %v", len(r.Messages), err)
					}
					items := make([]model.Settlement, n)
					for i, m := range r.Messages {
						items[i] = model.Settlement{Offset: -1, TxnID: m.TxnID, Completed: true}
						if byOffset {
							items[i] = model.Settlement{Offset: m.Offset, Completed: true}
						}
					}
					t1 := time.Now()
					a, err := st.Ack(ctx, g, p.ID, r.LeaseID, items)
					popT += t1.Sub(t0)
					ackT += time.Since(t1)
					if err != nil || !a.LeaseEnded {
						b.Fatalf("ack: %+v, %v", a, err)
					}
					consumed += int64(n)
				}
				reportRows(b, n)
				b.ReportMetric(float64(popT.Microseconds())/float64(b.N), "pop-us")
				b.ReportMetric(float64(ackT.Microseconds())/float64(b.N), "ack-us")
			})
		}
	}
}

// benchmarkCarried is BenchmarkConsume's round with each pop of n
// carrying the whole ack of the batch before, by transactionId; withTail,
// the pushes feed a tail and the cycles are served from it (one plain
// statement, the messages from memory) as a gateway serves them.
func benchmarkCarried(n int, withTail bool) func(b *testing.B) {
	return func(b *testing.B) {
		st, p := benchSetup(b)
		ctx := context.Background()
		rows := benchRows{prefix: "carried-"}
		last := int64(-1)
		g, err := st.EnsureGroup(ctx, "bench", "g")
		if err != nil {
			b.Fatal(err)
		}
		epoch, _ := st.Epoch(ctx)
		tl := tail.New(tail.DefaultBudgetBytes)
		tl.Reset(epoch)
		s := &tail.Server{Tail: tl, Leases: tail.NewLeases(tail.DefaultMaxLeases), Store: st}
		pr := model.PopQuery{Group: g, Max: n, Lease: time.Minute, Consumer: "c", MaxBytes: 1 << 20, Room: 1 << 20}
		var prev model.PopResult
		consumed := int64(0)
		for b.Loop() {
			for consumed+int64(n) > last+1 {
				b.StopTimer()
				fr := rows.frame(p.ID, last, 1000)
				res, at, err := st.PushUnder(ctx, epoch, []model.Frame{fr})
				if err != nil {
					b.Fatal(err)
				}
				tl.Add(at, p.ID, tail.NewFrame(res[0].BaseOffset, fr.TxnIDs, fr.Data, nil, res[0].CreatedAt))
				last = res[0].LastOffset
				b.StartTimer()
			}
			if withTail {
				prev, err = cyclePopWith(ctx, st, s, pr, prev)
				s.Remember(g.ID, &prev)
			} else {
				prev, err = cyclePop(ctx, st, pr, prev)
			}
			if err != nil || len(prev.Messages) != n {
				b.Fatalf("pop: %d messages, %v", len(prev.Messages), err)
			}
			consumed += int64(n)
		}
		reportRows(b, n)
		served := tl.Counts().Served
		b.ReportMetric(float64(served)/float64(b.N), "tail-served/op")
	}
}

// benchmarkManyPartitions is a consumer's round over 10,000 partitions
// of 25 messages each: pop any partition (its whole 25), then ack the
// whole lease by transactionId, so every round pays the store's fixed
// cost of one partition's pop and ack. At most 10,000 rounds.
func benchmarkManyPartitions(b *testing.B) {
	const parts, each = 10_000, 25
	st := pgtest.Store(b, pgtest.NewDB(b))
	q := newManyPartitions(b, st, "many")
	q.grow(b, parts)
	q.push(b, each, q.parts...)
	g := q.group(b, "g")
	ctx := context.Background()
	pr := model.PopQuery{Group: g, Max: each, Lease: time.Minute, Consumer: "c", MaxBytes: 1 << 20, Room: 1 << 20}
	var popT, ackT time.Duration
	for b.Loop() {
		t0 := time.Now()
		r, err := st.Pop(ctx, pr)
		if err != nil || len(r.Messages) != each {
			b.Fatalf("pop: %d messages, %v", len(r.Messages), err)
		}
		t1 := time.Now()
		a, err := st.Ack(ctx, g, r.PartitionID, r.LeaseID, wholeAck(r))
		popT += t1.Sub(t0)
		ackT += time.Since(t1)
		if err != nil || !a.LeaseEnded {
			b.Fatalf("ack: %+v, %v", a, err)
		}
	}
	reportRows(b, each)
	b.ReportMetric(float64(popT.Microseconds())/float64(b.N), "pop-us")
	b.ReportMetric(float64(ackT.Microseconds())/float64(b.N), "ack-us")
}
