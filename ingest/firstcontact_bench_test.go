package ingest_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/queengate/queengate/ingest"
	"github.com/queengate/queengate/internal/pgtest"
	"github.com/queengate/queengate/model"
	"github.com/queengate/queengate/pgstore"
)

// oneByOneStore replays the first contact of before the batched calls on
// the real store: one round trip per partition resolved and one per
// partition hydrated, in sequence, and no partition reported created
// (so every new partition is hydrated, as it was).
type oneByOneStore struct{ *pgstore.Store }

func (s oneByOneStore) EnsurePartitions(ctx context.Context, queues, partitions []string) ([]model.Partition, []bool, error) {
	parts := make([]model.Partition, len(queues))
	for i := range queues {
		p, err := s.EnsurePartition(ctx, queues[i], partitions[i])
		if err != nil {
			return nil, nil, err
		}
		parts[i] = p
	}
	return parts, make([]bool, len(queues)), nil
}

func (s oneByOneStore) HydrateMany(ctx context.Context, pids []int64) (map[int64]model.Hydration, error) {
	out := make(map[int64]model.Hydration, len(pids))
	for _, pid := range pids {
		h, err := s.Hydrate(ctx, pid)
		if err != nil {
			return nil, err
		}
		out[pid] = h
	}
	return out, nil
}

// timedStore adds up the time a flush spends in each kind of round trip.
type timedStore struct {
	ingest.Store
	resolve, hydrate, push time.Duration
}

func (s *timedStore) EnsurePartitions(ctx context.Context, queues, partitions []string) ([]model.Partition, []bool, error) {
	defer s.add(&s.resolve, time.Now())
	return s.Store.EnsurePartitions(ctx, queues, partitions)
}

func (s *timedStore) HydrateMany(ctx context.Context, pids []int64) (map[int64]model.Hydration, error) {
	defer s.add(&s.hydrate, time.Now())
	return s.Store.HydrateMany(ctx, pids)
}

func (s *timedStore) PushUnder(ctx context.Context, n uint64, frames []model.Frame) ([]model.FrameResult, uint64, error) {
	defer s.add(&s.push, time.Now())
	return s.Store.PushUnder(ctx, n, frames)
}

func (s *timedStore) add(d *time.Duration, since time.Time) { *d += time.Since(since) }

// BenchmarkFirstContact is one flush of 10-message requests to n
// partitions the gateway has never seen: new ones (the flush creates
// them), or existing ones with a few frames stored (a fresh gateway's
// cache). one-by-one is the path before the batched calls, batched the
// current one, in the same run; ns/op is the flush, from the first submit
// to the last answer.
func BenchmarkFirstContact(b *testing.B) {
	st := pgtest.Store(b, pgtest.NewDB(b))
	stores := []struct {
		name  string
		store ingest.Store
	}{{"one-by-one", oneByOneStore{st}}, {"batched", st}}
	ctx := context.Background()
	round := 0
	seeded := map[string]bool{}
	// seed gives a variant its own existing partitions, so that each
	// variant's flushes meet the same history.
	seed := func(b *testing.B, prefix string, n int) {
		if seeded[prefix] {
			return
		}
		seeded[prefix] = true
		for i := range n {
			p, err := st.EnsurePartition(ctx, "bench", fmt.Sprint(prefix, i))
			if err != nil {
				b.Fatal(err)
			}
			for k := range 3 {
				if _, err := st.Push(ctx, []model.Frame{newFrame(p.ID, fmt.Sprint("seed", k, "a"), fmt.Sprint("seed", k, "b"))}); err != nil {
					b.Fatal(err)
				}
			}
		}
	}
	for _, n := range []int{100, 1000} {
		for _, shape := range []string{"created", "existing"} {
			for _, v := range stores {
				b.Run(fmt.Sprintf("%s/%s/partitions=%d", shape, v.name, n), func(b *testing.B) {
					existing := fmt.Sprintf("e%d-%s-", n, v.name)
					if shape == "existing" {
						seed(b, existing, n)
					}
					timed := &timedStore{Store: v.store}
					for b.Loop() {
						b.StopTimer()
						round++
						prefix := existing
						if shape == "created" {
							prefix = fmt.Sprintf("c%d-", round)
						}
						ing, err := ingest.New(timed, ingest.Config{Shards: 1, Linger: time.Hour}, zerolog.Nop(), nil)
						if err != nil {
							b.Fatal(err)
						}
						if err := ing.Start(ctx); err != nil {
							b.Fatal(err)
						}
						answers := make(chan []model.PushOutcome, n)
						b.StartTimer()
						for i := range n {
							req := &ingest.Request{Queue: "bench", Partition: fmt.Sprint(prefix, i),
								Done: func(r []model.PushOutcome) { answers <- r }}
							for k := range 10 {
								req.Messages = append(req.Messages, model.Incoming{TxnID: fmt.Sprint(round, "-", k), Data: []byte(`{"k":1}`)})
							}
							if err := ing.Submit(req); err != nil {
								b.Fatal(err)
							}
						}
						ing.Stop() // the drain sends everything in one bundle
						for range n {
							if r := <-answers; r[0].Status != model.StatusQueued {
								b.Fatalf("%v: %v", r[0].Status, r[0].Err)
							}
						}
					}
					// The flush's time by round trip (pushes included, which
					// both variants share).
					for name, d := range map[string]time.Duration{"resolve": timed.resolve, "hydrate": timed.hydrate, "push": timed.push} {
						b.ReportMetric(float64(d.Microseconds())/1000/float64(b.N), name+"-ms/op")
					}
				})
			}
		}
	}
}
