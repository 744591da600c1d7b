package ingest_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/queengate/queengate/dedup"
	"github.com/queengate/queengate/ingest"
	"github.com/queengate/queengate/internal/pgtest"
	"github.com/queengate/queengate/pgstore"
)

// soundStore is the real store, asserting the cache's one load-bearing
// claim on every segment before it is pushed: with p_verified = v >= 0, no
// hash of the segment occurs in the window at or below v.
type soundStore struct {
	*pgstore.Store
	t          *testing.T
	mu         sync.Mutex
	violations int
	vouched    int
}

func (s *soundStore) Push(ctx context.Context, segs []pgstore.Segment) ([]pgstore.SegmentResult, error) {
	for _, seg := range segs {
		if seg.Verified < 0 {
			continue
		}
		var found int
		err := s.Pool().QueryRow(ctx, `
			SELECT count(*) FROM queen.log_txns t
			  JOIN queen.log_partitions p ON p.id = t.partition_id
			  JOIN queen.queues q ON q.id = p.queue_id
			 CROSS JOIN LATERAL queen.log_unnest_hashes(t.hashes) th
			 WHERE t.partition_id = $1 AND t.base_offset + th.idx - 1 <= $2
			   AND t.created_at >= now() - make_interval(secs => q.dedup_window_seconds)
			   AND th.h = ANY ($3)`, seg.PartitionID, seg.Verified, seg.Hashes).Scan(&found)
		if err != nil {
			return nil, err
		}
		s.mu.Lock()
		s.vouched++
		if found > 0 {
			s.violations++
			s.t.Errorf("unsound: partition %d vouched %d but %d of its hashes are stored at or below it", seg.PartitionID, seg.Verified, found)
		}
		s.mu.Unlock()
	}
	return s.Store.Push(ctx, segs)
}

// TestModelCacheNeverChangesAVerdict drives random pushes through the real
// ingest path with the cache on, interleaved with a second writer pushing
// straight into the same partitions, window changes, clock advances past
// the window, and a budget small enough to evict and suppress. Every answer
// is checked against the outcome computed from the database alone before
// the push, and the soundness invariant is checked on every segment.
func TestModelCacheNeverChangesAVerdict(t *testing.T) {
	t.Parallel()
	ops := 100_000 // messages; QUEEN_MODEL_OPS overrides
	if v, err := strconv.Atoi(os.Getenv("QUEEN_MODEL_OPS")); err == nil {
		ops = v
	}
	url := pgtest.NewDB(t)
	store := &soundStore{Store: pgtest.Store(t, url), t: t}
	clock := &modelClock{now: time.Now()}
	ing, err := ingest.New(store, ingest.Config{
		Shards: 1, Linger: time.Millisecond, PartitionTTL: time.Nanosecond,
		// Room for two or three partitions' entries: the others are
		// evicted or suppressed as their windows grow.
		Cache: dedup.Config{BudgetBytes: 200 << 10, Now: clock.Now, Guard: time.Nanosecond, Cooldown: time.Second},
	}, zerolog.New(zerolog.NewTestWriter(t)).Level(zerolog.ErrorLevel), nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := ing.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(ing.Stop)

	ctx := context.Background()
	queue := "model"
	parts := []string{"a", "b", "c", "d"}
	pids := map[string]int64{}
	for _, name := range parts {
		p, err := store.EnsurePartition(ctx, queue, name)
		if err != nil {
			t.Fatal(err)
		}
		pids[name] = p.ID
	}
	r := rand.New(rand.NewPCG(7, 11))
	window := 60
	setWindow := func(w int) {
		if _, err := store.Pool().Exec(ctx, "UPDATE queen.queues SET dedup_window_seconds = $1 WHERE name = $2", w, queue); err != nil {
			t.Fatal(err)
		}
		window = w
	}
	setWindow(window)
	// Mostly fresh ids, and a small hot set that keeps coming back.
	id := func(part string) string {
		if r.IntN(100) < 3 {
			return part + "-hot-" + strconv.Itoa(r.IntN(20))
		}
		return part + "-" + strconv.Itoa(r.IntN(1_000_000))
	}

	sent, mismatches := 0, 0
	for sent < ops && !t.Failed() {
		switch x := r.IntN(100); {
		case x < 75: // a request through ingest
			part := parts[r.IntN(len(parts))]
			n := 1 + r.IntN(30)
			ids := make([]string, n)
			for i := range ids {
				ids[i] = id(part)
			}
			want := expected(t, store.Store, pids[part], ids)
			ch := make(chan []ingest.Result, 1)
			req := &ingest.Request{Queue: queue, Partition: part, Done: func(res []ingest.Result) { ch <- res }}
			for _, s := range ids {
				req.Messages = append(req.Messages, ingest.Message{TxnID: s})
			}
			if err := ing.Submit(req); err != nil {
				t.Fatal(err)
			}
			got := <-ch
			for i := range got {
				if got[i].Status != want[i].Status || got[i].Offset != want[i].Offset {
					mismatches++
					t.Errorf("op %d, %s[%d] %s: got %v@%d, want %v@%d (window %d)", sent, part, i, ids[i],
						got[i].Status, got[i].Offset, want[i].Status, want[i].Offset, window)
				}
			}
			sent += n
		case x < 85: // the other broker
			part := parts[r.IntN(len(parts))]
			ids := []string{id(part), id(part)}
			if _, err := store.Store.Push(ctx, []pgstore.Segment{seg(pids[part], ids...)}); err != nil {
				t.Fatal(err)
			}
			sent += len(ids)
		case x < 90: // a window change
			setWindow([]int{0, 30, 60, 600}[r.IntN(4)])
		default: // time passes: the cache's clock, and the rows' ages in SQL
			d := time.Duration(1+r.IntN(40)) * time.Second
			clock.Add(d)
			if _, err := store.Pool().Exec(ctx, "UPDATE queen.log_txns SET created_at = created_at - $1::interval",
				fmt.Sprintf("%d milliseconds", d.Milliseconds())); err != nil {
				t.Fatal(err)
			}
		}
	}
	t.Logf("%d messages, %d segments vouched for (p_verified >= 0), %d unsound, %d mismatching answers",
		sent, store.vouched, store.violations, mismatches)
	if store.vouched == 0 {
		t.Error("the cache never vouched: the model exercised nothing")
	}
}

// expected computes a request's outcome from the database alone, before it
// is pushed: within the window a stored id is a duplicate of its first
// occurrence, a repeat within the request follows its first occurrence,
// anything else takes the next offset.
func expected(t *testing.T, store *pgstore.Store, pid int64, ids []string) []ingest.Result {
	t.Helper()
	ctx := context.Background()
	var last int64
	var window int
	if err := store.Pool().QueryRow(ctx, `
		SELECT p.last_offset, q.dedup_window_seconds FROM queen.log_partitions p
		JOIN queen.queues q ON q.id = p.queue_id WHERE p.id = $1`, pid).Scan(&last, &window); err != nil {
		t.Fatal(err)
	}
	stored := map[pgstore.Hash]int64{}
	if window > 0 {
		rows, err := store.Pool().Query(ctx, `
			SELECT th.h, min(t.base_offset + th.idx - 1) FROM queen.log_txns t
			 CROSS JOIN LATERAL queen.log_unnest_hashes(t.hashes) th
			 WHERE t.partition_id = $1 AND t.created_at >= now() - make_interval(secs => $2)
			 GROUP BY th.h`, pid, window)
		if err != nil {
			t.Fatal(err)
		}
		for rows.Next() {
			var h pgstore.Hash
			var off int64
			if err := rows.Scan(&h, &off); err != nil {
				t.Fatal(err)
			}
			stored[h] = off
		}
		if err := rows.Err(); err != nil {
			t.Fatal(err)
		}
	}
	out := make([]ingest.Result, len(ids))
	seen := map[pgstore.Hash]int64{}
	for i, s := range ids {
		h := pgstore.HashTxnID(s)
		if window > 0 {
			if off, ok := stored[h]; ok {
				out[i] = ingest.Result{Status: ingest.StatusDuplicate, Offset: off, PartitionID: pid}
				continue
			}
			if off, ok := seen[h]; ok {
				out[i] = ingest.Result{Status: ingest.StatusDuplicate, Offset: off, PartitionID: pid}
				continue
			}
		}
		last++
		seen[h] = last
		out[i] = ingest.Result{Status: ingest.StatusQueued, Offset: last, PartitionID: pid}
	}
	return out
}

type modelClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *modelClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *modelClock) Add(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}
