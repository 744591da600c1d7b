package target

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"

	"github.com/queengate/queengate/internal/bench"
	"github.com/queengate/queengate/internal/bench/proc"
	"github.com/queengate/queengate/internal/pgtest"
	"github.com/queengate/queengate/model"
)

// init lets the test binary play the nats-server role: proc.StartNATSServer
// re-executes the running binary, which under go test is this one. init runs
// before TestMain, so the child never starts the tests.
func init() {
	proc.PlayRole()
}

func TestMain(m *testing.M) { pgtest.Run(m) }

// peerWorkload is a small workload for the peer tests.
var peerWorkload = bench.Workload{
	Scenario:      "test",
	Producers:     8,
	PerRequest:    10,
	Queues:        1,
	Partitions:    2,
	PayloadBytes:  16,
	WindowSeconds: 3600,
}

// peerTarget makes one target of each kind, set up for w and closed when
// the test ends.
func peerTarget(t *testing.T, kind string, w bench.Workload) bench.Target {
	t.Helper()
	ctx := context.Background()
	var (
		target bench.Target
		err    error
	)
	switch kind {
	case "naive":
		target, err = NewNaive(ctx, pgtest.NewDB(t))
	case "ceiling":
		target, err = NewCeiling(ctx, pgtest.NewDB(t))
	case "jetstream":
		target, err = NewJetStream(ctx, t.TempDir())
	default:
		t.Fatalf("unknown target kind %q", kind)
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := target.Close(); err != nil {
			t.Errorf("close %s: %v", kind, err)
		}
	})
	if err := target.Setup(ctx, w); err != nil {
		t.Fatal(err)
	}
	return target
}

// peerBatch builds a batch of queue "q" with one small JSON payload per id.
func peerBatch(partition string, ids ...string) *bench.Batch {
	b := &bench.Batch{Queue: "q", Partition: partition, IDs: ids}
	for i, id := range ids {
		b.Data = append(b.Data, fmt.Appendf(nil, `{"id":%q,"i":%d}`, id, i))
	}
	return b
}

// peerSend sends b and fails the test on an error.
func peerSend(t *testing.T, target bench.Target, producer int, b *bench.Batch) []model.Status {
	t.Helper()
	statuses, err := target.Send(context.Background(), producer, b)
	if err != nil {
		t.Fatalf("send %v: %v", b.IDs, err)
	}
	if len(statuses) != len(b.IDs) {
		t.Fatalf("send %v: %d statuses", b.IDs, len(statuses))
	}
	return statuses
}

// TestPeerStatuses sends repeats within a batch, across batches, and the
// same id to another partition, to every peer, and checks each answer and
// what was stored.
func TestPeerStatuses(t *testing.T) {
	t.Parallel()
	const (
		q = model.StatusQueued
		d = model.StatusDuplicate
	)
	tests := []struct {
		kind string
		// want is the answers to [a b a] on p1, [a c] on p1, [a] on p2.
		want [3][]model.Status
		// stored checks what the target holds afterwards.
		stored func(t *testing.T, target bench.Target)
	}{
		{
			kind: "naive",
			want: [3][]model.Status{{q, q, d}, {d, q}, {q}},
			stored: func(t *testing.T, target bench.Target) {
				var n int64
				err := target.(*Naive).pool.QueryRow(context.Background(),
					"SELECT count(*) FROM bench_naive.messages").Scan(&n)
				if err != nil {
					t.Fatal(err)
				}
				if n != 4 {
					t.Errorf("rows = %d, want 4", n)
				}
			},
		},
		{
			kind: "ceiling",
			want: [3][]model.Status{{q, q, q}, {q, q}, {q}},
			stored: func(t *testing.T, target bench.Target) {
				var frames, msgs int64
				err := target.(*Ceiling).pool.QueryRow(context.Background(),
					"SELECT count(*), sum(cardinality(txn_ids)) FROM bench_ceiling.frames WHERE cardinality(data) = cardinality(txn_ids)").
					Scan(&frames, &msgs)
				if err != nil {
					t.Fatal(err)
				}
				if frames != 3 || msgs != 6 {
					t.Errorf("frames, messages = %d, %d; want 3, 6", frames, msgs)
				}
			},
		},
		{
			kind: "jetstream",
			want: [3][]model.Status{{q, q, d}, {d, q}, {q}},
			stored: func(t *testing.T, target bench.Target) {
				ctx := context.Background()
				stream, err := target.(*JetStream).AdminJS.Stream(ctx, JetStreamStream)
				if err != nil {
					t.Fatal(err)
				}
				info, err := stream.Info(ctx)
				if err != nil {
					t.Fatal(err)
				}
				if info.State.Msgs != 4 {
					t.Errorf("stream messages = %d, want 4", info.State.Msgs)
				}
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.kind, func(t *testing.T) {
			t.Parallel()
			target := peerTarget(t, tt.kind, peerWorkload)
			got := [3][]model.Status{
				peerSend(t, target, 0, peerBatch("p1", "a", "b", "a")),
				peerSend(t, target, 1, peerBatch("p1", "a", "c")),
				peerSend(t, target, 2, peerBatch("p2", "a")),
			}
			for i := range got {
				if !slices.Equal(got[i], tt.want[i]) {
					t.Errorf("batch %d: statuses %v, want %v", i, got[i], tt.want[i])
				}
			}
			tt.stored(t, target)

			f, err := target.Figures(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			if f.ProbeSkippedShare != -1 || f.CacheBytesPerHash != -1 {
				t.Errorf("figures %+v: want -1 for the queengate-only figures", f)
			}
			if tt.kind == "jetstream" && f.PeakRSSBytes <= 0 {
				t.Errorf("figures %+v: want the server's peak RSS", f)
			}
		})
	}
}

// TestPeerConcurrentRepeats has producers race on overlapping ids in one
// partition: whatever the interleaving, every id is answered queued exactly
// once, and every other answer is duplicate.
func TestPeerConcurrentRepeats(t *testing.T) {
	t.Parallel()
	const (
		producers = 8
		rounds    = 20
		perBatch  = 10
		distinct  = 50
	)
	for _, kind := range []string{"naive", "jetstream"} {
		t.Run(kind, func(t *testing.T) {
			t.Parallel()
			w := peerWorkload
			w.Producers, w.PerRequest = producers, perBatch
			target := peerTarget(t, kind, w)

			var (
				mu     sync.Mutex
				sent   = map[string]bool{}
				queued = map[string]int{}
				errs   []error
				wg     sync.WaitGroup
			)
			for p := range producers {
				wg.Go(func() {
					for r := range rounds {
						// Producers walk the same ids from different
						// starting points, in different orders, so that
						// batches overlap within and across producers.
						ids := make([]string, perBatch)
						for i := range ids {
							ids[i] = fmt.Sprintf("id-%d", (p*7+r*3+i*(p+1))%distinct)
						}
						statuses, err := target.Send(context.Background(), p, peerBatch("p1", ids...))
						mu.Lock()
						if err != nil {
							errs = append(errs, err)
						}
						for i, s := range statuses {
							sent[ids[i]] = true
							switch s {
							case model.StatusQueued:
								queued[ids[i]]++
							case model.StatusDuplicate:
							default:
								errs = append(errs, fmt.Errorf("%s answered %v", ids[i], s))
							}
						}
						mu.Unlock()
					}
				})
			}
			wg.Wait()
			for _, err := range errs {
				t.Error(err)
			}
			for id := range sent {
				if n := queued[id]; n != 1 {
					t.Errorf("%s queued %d times, want 1", id, n)
				}
			}
		})
	}
}
