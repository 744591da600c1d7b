package timers_test

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/queengate/queengate/internal/pgtest"
	"github.com/queengate/queengate/model"
	"github.com/queengate/queengate/pgstore"
	"github.com/queengate/queengate/timers"
)

// BenchmarkTimers measures, with 0 and with 1,000,000 far-future timers
// pending: the fire lag of timers due over the next two seconds (the loop
// wakes on the earliest due time), the fire loop's throughput on a due
// backlog, and pushes of 1000-message frames beside it.
func BenchmarkTimers(b *testing.B) {
	for _, pendingFar := range []int{0, 1_000_000} {
		b.Run(fmt.Sprintf("pending=%d", pendingFar), func(b *testing.B) {
			ctx := context.Background()
			store := pgtest.Store(b, pgtest.NewDB(b))
			p, err := store.EnsurePartition(ctx, "bench-timers", "p")
			if err != nil {
				b.Fatal(err)
			}
			if pendingFar > 0 {
				if _, err := store.Pool().Exec(ctx, `
					INSERT INTO queen.timers (partition_id, fire_at, txn_id, hash, data, data_bytes)
					SELECT $1, now() + interval '1 day' + i * interval '1 ms', 'far-' || i, md5(i::text)::uuid, '1', 1
					  FROM generate_series(1, $2) AS i`, p.ID, pendingFar); err != nil {
					b.Fatal(err)
				}
				if _, err := store.Pool().Exec(ctx, "VACUUM ANALYZE queen.timers"); err != nil {
					b.Fatal(err)
				}
			}
			b.Run("fire-lag", func(b *testing.B) { benchFireLag(b, store, p.ID) })
			b.Run("fire-backlog", func(b *testing.B) { benchFireBacklog(b, store, p.ID) })
			b.Run("push", func(b *testing.B) { benchPush(b, store, p.ID) })
		})
	}
}

func benchFireLag(b *testing.B, store *pgstore.Store, pid int64) {
	ctx := context.Background()
	var (
		mu   sync.Mutex
		lags []time.Duration
	)
	svc, err := timers.New(store, timers.Config{BeforeCommit: func(f []model.FiredTimer) error {
		mu.Lock()
		for _, x := range f {
			lags = append(lags, x.FiredAt.Sub(x.FireAt))
		}
		mu.Unlock()
		return nil
	}}, zerolog.Nop(), nil)
	if err != nil {
		b.Fatal(err)
	}
	if err := svc.Start(ctx); err != nil {
		b.Fatal(err)
	}
	defer svc.Stop()
	const perRound = 200
	round := 0
	for b.Loop() {
		start := time.Now()
		for i := range perRound {
			at := start.Add(time.Duration(i) * 10 * time.Millisecond) // one every 10 ms for 2 s
			if _, err := svc.Schedule(ctx, "bench-timers", "p", fmt.Sprintf("lag-%d-%d", round, i), nil, nil, at); err != nil {
				b.Fatal(err)
			}
		}
		for {
			mu.Lock()
			n := len(lags)
			mu.Unlock()
			if n >= (round+1)*perRound {
				break
			}
			time.Sleep(10 * time.Millisecond)
		}
		round++
	}
	slices.Sort(lags)
	pct := func(p float64) float64 { return float64(lags[int(p*float64(len(lags)-1))].Microseconds()) / 1000 }
	b.ReportMetric(pct(0.5), "lag-p50-ms")
	b.ReportMetric(pct(0.99), "lag-p99-ms")
	b.ReportMetric(pct(1), "lag-max-ms")
}

func benchFireBacklog(b *testing.B, store *pgstore.Store, pid int64) {
	ctx := context.Background()
	const backlog = 20_000
	fired := 0
	var elapsed time.Duration
	for b.Loop() {
		b.StopTimer()
		if _, err := store.Pool().Exec(ctx, `
			INSERT INTO queen.timers (partition_id, fire_at, txn_id, hash, data, data_bytes)
			SELECT $1, now() - interval '1 s', 'due-' || gen_random_uuid(), gen_random_uuid(), '1', 1
			  FROM generate_series(1, $2)`, pid, backlog); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
		start := time.Now()
		for {
			f, err := store.FireDue(ctx, 1000, nil)
			if err != nil {
				b.Fatal(err)
			}
			fired += len(f)
			if len(f) < 1000 {
				break
			}
		}
		elapsed += time.Since(start)
	}
	b.ReportMetric(float64(fired)/elapsed.Seconds(), "fires/s")
}

func benchPush(b *testing.B, store *pgstore.Store, pid int64) {
	ctx := context.Background()
	const frame = 1000
	fr := model.Frame{PartitionID: pid, Verified: -1, TxnIDs: make([]string, frame),
		Hashes: make([]model.Hash, frame), Data: make([][]byte, frame)}
	n := 0
	for b.Loop() {
		last, err := store.EnsurePartition(ctx, "bench-timers", "p")
		if err != nil {
			b.Fatal(err)
		}
		for i := range frame {
			n++
			fr.TxnIDs[i] = fmt.Sprint("push-", n)
			fr.Hashes[i] = model.HashTxnID(fr.TxnIDs[i])
			fr.Data[i] = []byte(`{"v":1}`)
		}
		// Vouched at the allocator, as a steady-state cache does: the push
		// itself, not the probe, is what is measured.
		fr.Verified, fr.VerifiedWindow = last.LastOffset, model.MaxOptionSeconds
		if _, err := store.Push(ctx, []model.Frame{fr}); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N*frame)/b.Elapsed().Seconds(), "rows/s")
}
