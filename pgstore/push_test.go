package pgstore_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/queengate/queengate/internal/pgtest"
	"github.com/queengate/queengate/model"
	"github.com/queengate/queengate/pgstore"
)

type testBundle struct {
	store *pgstore.Store
	queue string
	part  model.Partition
}

// setup gives each test its own queue and partition in the shared database.
func setup(t *testing.T) *testBundle {
	t.Helper()
	return setupIn(t, pgtest.SharedURL(t))
}

// setupIn is setup in the database at url: retention tests take their own,
// since a pass sweeps every partition of a database.
func setupIn(t *testing.T, url string) *testBundle {
	t.Helper()
	st := pgtest.Store(t, url)
	queue := pgtest.UniqueName(t)
	p, err := st.EnsurePartition(context.Background(), queue, "Default")
	if err != nil {
		t.Fatal(err)
	}
	return &testBundle{store: st, queue: queue, part: p}
}

func (b *testBundle) setWindow(t *testing.T, seconds int) {
	t.Helper()
	if _, err := b.store.Pool().Exec(context.Background(),
		"UPDATE queen.queues SET dedup_window_seconds = $1 WHERE name = $2", seconds, b.queue); err != nil {
		t.Fatal(err)
	}
}

// newFrame builds a newFrame of the given transactionIds with small payloads.
func newFrame(pid, verified int64, txnIDs ...string) model.Frame {
	fr := model.Frame{PartitionID: pid, Verified: verified, VerifiedWindow: model.MaxOptionSeconds}
	for i, id := range txnIDs {
		fr.TxnIDs = append(fr.TxnIDs, id)
		fr.Hashes = append(fr.Hashes, model.HashTxnID(id))
		fr.Data = append(fr.Data, []byte(frameData(i, id)))
	}
	return fr
}

// frameData is the data frame gives its i-th message, id.
func frameData(i int, id string) string { return fmt.Sprintf(`{"i":%d,"id":%q}`, i, id) }

func (b *testBundle) push(t *testing.T, verified int64, txnIDs ...string) model.FrameResult {
	t.Helper()
	res, err := b.store.Push(context.Background(), []model.Frame{newFrame(b.part.ID, verified, txnIDs...)})
	if err != nil {
		t.Fatal(err)
	}
	return res[0]
}

// hashFrames counts the partition's frames whose hashes are read.
func (b *testBundle) hashFrames(t *testing.T) int {
	t.Helper()
	return pgtest.HashFrames(t, b.store.Pool(), b.part.ID)
}

func (b *testBundle) count(t *testing.T, table string) int {
	t.Helper()
	var n int
	if err := b.store.Pool().QueryRow(context.Background(),
		"SELECT count(*) FROM queen."+table+" WHERE partition_id = $1", b.part.ID).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

func (b *testBundle) lastOffset(t *testing.T) int64 {
	t.Helper()
	var last int64
	if err := b.store.Pool().QueryRow(context.Background(),
		"SELECT last_offset FROM queen.log_partitions WHERE id = $1", b.part.ID).Scan(&last); err != nil {
		t.Fatal(err)
	}
	return last
}

func wantOutcomes(t *testing.T, got model.FrameResult, want ...model.Outcome) {
	t.Helper()
	if len(got.Outcomes) != len(want) {
		t.Fatalf("got %d outcomes, want %d: %+v", len(got.Outcomes), len(want), got.Outcomes)
	}
	for i := range want {
		if got.Outcomes[i] != want[i] {
			t.Errorf("outcome %d = %+v, want %+v (all: %+v)", i, got.Outcomes[i], want[i], got.Outcomes)
		}
	}
}

func queued(off int64) model.Outcome { return model.Outcome{Offset: off} }
func dup(off int64) model.Outcome    { return model.Outcome{Offset: off, Duplicate: true} }

func TestRetryInWindowIsDuplicateOfOriginal(t *testing.T) {
	t.Parallel()
	b := setup(t)
	first := b.push(t, -1, "order-9137-paid", "order-9138-paid")
	wantOutcomes(t, first, queued(0), queued(1))
	if first.BaseOffset != 0 || first.LastOffset != 1 {
		t.Fatalf("first push: base %d last %d, want 0 and 1", first.BaseOffset, first.LastOffset)
	}

	retry := b.push(t, -1, "order-9138-paid")
	wantOutcomes(t, retry, dup(1))
	if !retry.Probed() {
		t.Error("probe did not run for p_verified = -1")
	}
	if retry.BaseOffset != -1 || retry.LastOffset != 1 {
		t.Errorf("duplicate push: base %d last %d, want -1 and 1 (nothing written)", retry.BaseOffset, retry.LastOffset)
	}
	if n := b.hashFrames(t); n != 1 {
		t.Errorf("frames with hashes = %d, want 1: a duplicate writes no hashes", n)
	}
	if n := b.count(t, "log_segments"); n != 1 {
		t.Errorf("log_segments rows = %d, want 1: a duplicate writes no frame", n)
	}
	if last := b.lastOffset(t); last != 1 {
		t.Errorf("allocator = %d, want 1: a duplicate does not bump it", last)
	}
}

func TestOffsetsStayContiguousAfterDuplicates(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.push(t, -1, "a", "b", "c")                    // 0, 1, 2
	mixed := b.push(t, -1, "x", "b", "y", "a", "z") // x=3, y=4, z=5
	wantOutcomes(t, mixed, queued(3), dup(1), queued(4), dup(0), queued(5))
	if mixed.BaseOffset != 3 || mixed.LastOffset != 5 {
		t.Errorf("base %d last %d, want 3 and 5", mixed.BaseOffset, mixed.LastOffset)
	}
	next := b.push(t, -1, "w")
	wantOutcomes(t, next, queued(6))

	// The stored frame holds only the new messages, at their offsets.
	var txnIDs []string
	if err := b.store.Pool().QueryRow(context.Background(),
		"SELECT txn_ids FROM queen.log_segments WHERE partition_id = $1 AND base_offset = 3",
		b.part.ID).Scan(&txnIDs); err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(txnIDs) != "[x y z]" {
		t.Errorf("frame at 3 holds %v, want [x y z]", txnIDs)
	}
}

func TestRepeatsWithinOneRequestFollowFirstOccurrence(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.push(t, -1, "old") // 0
	res := b.push(t, -1, "new", "new", "old", "other", "new", "old")
	wantOutcomes(t, res, queued(1), dup(1), dup(0), queued(2), dup(1), dup(0))
	if n := b.hashFrames(t); n != 2 {
		t.Errorf("frames with hashes = %d, want 2", n)
	}

	// Even when the caller vouches for everything (probe skipped), in-request
	// repeats are still resolved in SQL.
	vouched := b.push(t, b.lastOffset(t), "v", "v", "v")
	wantOutcomes(t, vouched, queued(3), dup(3), dup(3))
	if vouched.Probed() {
		t.Error("probe ran although p_verified = last_offset")
	}
}

func TestWindowZeroStoresRetryAndStillWritesTxns(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.setWindow(t, 0)
	first := b.push(t, -1, "t1", "t1")
	wantOutcomes(t, first, queued(0), queued(1))
	retry := b.push(t, -1, "t1")
	wantOutcomes(t, retry, queued(2))
	if retry.Probed() {
		t.Error("probe ran with window 0")
	}
	if n := b.hashFrames(t); n != 2 {
		t.Errorf("frames with hashes = %d, want 2: window 0 skips the probe, not the write", n)
	}
}

func TestRetryPastWindowIsNew(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.setWindow(t, 60)
	b.push(t, -1, "late")
	// Backdate the stored row past the window instead of sleeping.
	pgtest.AgeFrames(t, b.store.Pool(), 61*time.Second, "partition_id = $1", b.part.ID)
	retry := b.push(t, -1, "late")
	wantOutcomes(t, retry, queued(1))
	if !retry.Probed() {
		t.Error("probe did not run")
	}
}

func TestMinPicksFirstOfSeveralStoredMatches(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.setWindow(t, 0)
	b.push(t, -1, "pad")   // 0
	b.push(t, -1, "twice") // 1
	b.push(t, -1, "pad2")  // 2
	b.push(t, -1, "twice") // 3: stored again, deduplication was off
	b.setWindow(t, 3600)
	res := b.push(t, -1, "twice")
	wantOutcomes(t, res, dup(1))
}

func TestVerifiedAtLastOffsetSkipsProbeAndWrites(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.push(t, -1, "a", "b")
	res := b.push(t, 1, "c", "d")
	if res.Probed() {
		t.Error("probe ran although p_verified = last_offset")
	}
	wantOutcomes(t, res, queued(2), queued(3))

	// The skipped probe trusts the caller: a vouched-for retry is written
	// again. This is why only a cache that knows the window may vouch.
	trusted := b.push(t, 3, "a")
	if trusted.Probed() {
		t.Error("probe ran although p_verified = last_offset")
	}
	wantOutcomes(t, trusted, queued(4))
}

func TestVerifiedMinusOneProbesWholeWindow(t *testing.T) {
	t.Parallel()
	b := setup(t)
	for i := range 5 {
		b.push(t, -1, fmt.Sprintf("m%d", i))
	}
	res := b.push(t, -1, "m0", "m4", "fresh")
	if !res.Probed() {
		t.Fatal("probe did not run")
	}
	wantOutcomes(t, res, dup(0), dup(4), queued(5))

	// A watermark restricts the probe to rows ending above it: m0 (offset
	// 0) is beyond the probed span and a caller vouching for offset 2 is
	// trusted about it, but m4 (offset 4) is above and still caught.
	partial := b.push(t, 2, "m4", "fresh2")
	if !partial.Probed() {
		t.Fatal("probe did not run for p_verified below last_offset")
	}
	wantOutcomes(t, partial, dup(4), queued(6))
}

func TestRowsBelowTxnsStartAreNotCompared(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.push(t, -1, "purged")   // 0
	b.push(t, -1, "retained") // 1
	// Simulate retention: the row covering offset 0 is gone from the
	// comparison span once txns_start passes it.
	if _, err := b.store.Pool().Exec(context.Background(),
		"UPDATE queen.log_partitions SET txns_start = 1 WHERE id = $1", b.part.ID); err != nil {
		t.Fatal(err)
	}
	res := b.push(t, -1, "purged", "retained")
	wantOutcomes(t, res, queued(2), dup(1))
}

func TestBundleDuplicateInOnePartitionCommitsOthers(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	other, err := b.store.EnsurePartition(ctx, b.queue, "other")
	if err != nil {
		t.Fatal(err)
	}
	b.push(t, -1, "seen")
	// Frames deliberately in descending id order: the function must still
	// lock in ascending order and answer in input order.
	res, err := b.store.Push(ctx, []model.Frame{
		newFrame(other.ID, -1, "o1", "o2"),
		newFrame(b.part.ID, -1, "seen"),
	})
	if err != nil {
		t.Fatal(err)
	}
	wantOutcomes(t, res[0], queued(0), queued(1))
	wantOutcomes(t, res[1], dup(0))
	if res[0].PartitionID != other.ID || res[1].PartitionID != b.part.ID {
		t.Errorf("results out of input order: %+v", res)
	}
	if n := pgtest.HashFrames(t, b.store.Pool(), other.ID); n != 1 {
		t.Errorf("other partition has %d frames with hashes, want 1", n)
	}
}

func TestSamePartitionTwiceInOneBundleIsExact(t *testing.T) {
	t.Parallel()
	b := setup(t)
	last := b.lastOffset(t)
	// Both frames claim the same (pre-bundle) watermark; the second must
	// still see the first's writes.
	res, err := b.store.Push(context.Background(), []model.Frame{
		newFrame(b.part.ID, last, "p", "q"),
		newFrame(b.part.ID, last, "q", "r"),
	})
	if err != nil {
		t.Fatal(err)
	}
	wantOutcomes(t, res[0], queued(0), queued(1))
	wantOutcomes(t, res[1], dup(1), queued(2))
}

func TestRacingPushersQueueEachIDOnce(t *testing.T) {
	t.Parallel()
	b := setup(t)
	const (
		goroutines = 16
		ids        = 200
	)
	ctx := context.Background()
	type result struct {
		id  string
		out model.Outcome
	}
	var (
		mu  sync.Mutex
		all []result
		wg  sync.WaitGroup
	)
	for g := range goroutines {
		wg.Go(func() {
			// Each goroutine pushes every id, in its own order and batching.
			for start := 0; start < ids; start += 10 + g {
				var txnIDs []string
				for i := start; i < min(start+10+g, ids); i++ {
					txnIDs = append(txnIDs, fmt.Sprintf("race-%d", (i+g*7)%ids))
				}
				res, err := b.store.Push(ctx, []model.Frame{newFrame(b.part.ID, -1, txnIDs...)})
				if err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				for i, o := range res[0].Outcomes {
					all = append(all, result{txnIDs[i], o})
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if t.Failed() {
		return
	}
	queuedAt := map[string]int64{}
	for _, r := range all {
		if r.out.Duplicate {
			continue
		}
		if prev, ok := queuedAt[r.id]; ok {
			t.Errorf("%s queued twice, at %d and %d", r.id, prev, r.out.Offset)
		}
		queuedAt[r.id] = r.out.Offset
	}
	if len(queuedAt) != ids {
		t.Fatalf("%d ids queued, want %d", len(queuedAt), ids)
	}
	for _, r := range all {
		if r.out.Duplicate && r.out.Offset != queuedAt[r.id] {
			t.Errorf("duplicate of %s names offset %d, original is at %d", r.id, r.out.Offset, queuedAt[r.id])
		}
	}
	if last := b.lastOffset(t); last != ids-1 {
		t.Errorf("allocator = %d, want %d: offsets must be contiguous", last, ids-1)
	}
	if len(all) != goroutines*ids {
		t.Errorf("%d answers, want %d", len(all), goroutines*ids)
	}
}

func TestPushRejectsMalformedFrames(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	bad := newFrame(b.part.ID, -1, "a", "b")
	bad.Data = bad.Data[:1]
	if _, err := b.store.Push(ctx, []model.Frame{bad}); !errors.Is(err, model.ErrInvalidFrame) {
		t.Errorf("mismatched lengths: err = %v, want ErrInvalidFrame", err)
	}
	if _, err := b.store.Push(ctx, []model.Frame{{PartitionID: b.part.ID, Verified: -1}}); !errors.Is(err, model.ErrInvalidFrame) {
		t.Errorf("empty frame: err = %v, want ErrInvalidFrame", err)
	}
	// An unknown partition fails the whole bundle: nothing is written.
	_, err := b.store.Push(ctx, []model.Frame{newFrame(b.part.ID, -1, "ok"), newFrame(1<<60, -1, "x")})
	if !errors.Is(err, model.ErrPartitionNotFound) {
		t.Errorf("unknown partition: err = %v, want ErrPartitionNotFound", err)
	}
	if n := b.hashFrames(t); n != 0 {
		t.Errorf("frames with hashes = %d after failed bundles, want 0", n)
	}
	// Invalid JSON data is refused by SQL and stores nothing.
	badJSON := newFrame(b.part.ID, -1, "j")
	badJSON.Data[0] = []byte(`{"unterminated"`)
	if _, err := b.store.Push(ctx, []model.Frame{badJSON}); err == nil {
		t.Error("invalid JSON data was accepted")
	}
	if last := b.lastOffset(t); last != -1 {
		t.Errorf("allocator = %d after failed pushes, want -1", last)
	}
}

func TestDataRoundTrips(t *testing.T) {
	t.Parallel()
	b := setup(t)
	fr := newFrame(b.part.ID, -1, "d1", "d2")
	fr.Data[0] = []byte(`{"orderId": 9137, "amount": 99.5}`)
	fr.Data[1] = nil
	if _, err := b.store.Push(context.Background(), []model.Frame{fr}); err != nil {
		t.Fatal(err)
	}
	var data []string
	if err := b.store.Pool().QueryRow(context.Background(),
		"SELECT data::text[] FROM queen.log_segments WHERE partition_id = $1", b.part.ID).Scan(&data); err != nil {
		t.Fatal(err)
	}
	if len(data) != 2 || data[0] != `{"orderId": 9137, "amount": 99.5}` || data[1] != "null" {
		t.Errorf("stored data = %q", data)
	}
}

func TestHydrateReadsWindowAndAllocatorTogether(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	b.setWindow(t, 600)
	b.push(t, -1, "old1", "old2") // 0, 1
	b.push(t, -1, "new1")         // 2
	b.push(t, -1, "new2", "new3") // 3, 4
	// Only rows older than window + 5 s of slack are left out.
	pgtest.AgeFrames(t, b.store.Pool(), 606*time.Second, "partition_id = $1 AND base_offset = 0", b.part.ID)
	pgtest.AgeFrames(t, b.store.Pool(), 603*time.Second, "partition_id = $1 AND base_offset = 2", b.part.ID)
	h, err := b.store.Hydrate(ctx, b.part.ID)
	if err != nil {
		t.Fatal(err)
	}
	if h.LastOffset != 4 || h.WindowSeconds != 600 || h.TxnsStart != 0 {
		t.Errorf("hydration header = last %d window %d txns_start %d, want 4 600 0", h.LastOffset, h.WindowSeconds, h.TxnsStart)
	}
	if len(h.Txns) != 2 || h.Txns[0].BaseOffset != 2 || h.Txns[1].BaseOffset != 3 || h.Txns[1].EndOffset != 4 {
		t.Fatalf("hydrated ranges = %+v, want [2,2] and [3,4]", h.Txns)
	}
	if h.Txns[1].Hashes[1] != model.HashTxnID("new3") {
		t.Errorf("hydrated hash at offset 4 = %x, want hash of new3", h.Txns[1].Hashes[1])
	}
	if time.Since(h.DBNow) > time.Minute || h.DBNow.Sub(h.Txns[1].CreatedAt) < 0 {
		t.Errorf("db clock %v is not after the newest row %v", h.DBNow, h.Txns[1].CreatedAt)
	}

	empty, err := b.store.EnsurePartition(ctx, b.queue, "empty")
	if err != nil {
		t.Fatal(err)
	}
	he, err := b.store.Hydrate(ctx, empty.ID)
	if err != nil {
		t.Fatal(err)
	}
	if he.LastOffset != -1 || len(he.Txns) != 0 {
		t.Errorf("empty partition hydrates to last %d with %d ranges", he.LastOffset, len(he.Txns))
	}
	if _, err := b.store.Hydrate(ctx, 1<<60); !errors.Is(err, model.ErrPartitionNotFound) {
		t.Errorf("hydrate of unknown partition: err = %v", err)
	}
}

// TestHydrateManyEqualsHydrateEach: one call reads, for each partition,
// what Hydrate reads of it alone (the window's rows in offset order, the
// allocator, the window), and leaves out a partition that does not exist.
func TestHydrateManyEqualsHydrateEach(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	var pids []int64
	for i := range 5 {
		p, err := b.store.EnsurePartition(ctx, b.queue, fmt.Sprintf("h%d", i))
		if err != nil {
			t.Fatal(err)
		}
		pids = append(pids, p.ID)
		for k := range i { // partition i gets i frames, the first aged out of the window
			if _, err := b.store.Push(ctx, []model.Frame{newFrame(p.ID, -1, fmt.Sprintf("h%d-%d-a", i, k), fmt.Sprintf("h%d-%d-b", i, k))}); err != nil {
				t.Fatal(err)
			}
			if k == 0 {
				pgtest.AgeFrames(t, b.store.Pool(), 2*time.Hour, "partition_id = $1", p.ID)
			}
		}
	}
	missing := int64(1 << 60)
	got, err := b.store.HydrateMany(ctx, append([]int64{missing}, pids...))
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := got[missing]; ok || len(got) != len(pids) {
		t.Fatalf("%d hydrations for %d partitions (and one unknown)", len(got), len(pids))
	}
	for i, pid := range pids {
		one, err := b.store.Hydrate(ctx, pid)
		if err != nil {
			t.Fatal(err)
		}
		many := got[pid]
		if many.PartitionID != pid || many.LastOffset != one.LastOffset || many.WindowSeconds != one.WindowSeconds ||
			many.TxnsStart != one.TxnsStart || fmt.Sprint(many.Txns) != fmt.Sprint(one.Txns) {
			t.Errorf("partition %d: HydrateMany %+v, Hydrate %+v", i, many, one)
		}
		if want := max(i-1, 0); len(many.Txns) != want || many.LastOffset != int64(2*i-1) {
			t.Errorf("partition %d: %d ranges up to %d, want %d up to %d", i, len(many.Txns), many.LastOffset, want, 2*i-1)
		}
	}
}

func TestWideBundleMixesCleanAndDirtyFrames(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	part := func(name string) model.Partition {
		p, err := b.store.EnsurePartition(ctx, b.queue, name)
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	a, bb, d := part("a"), part("b"), part("d")
	// c lives in a queue with deduplication off.
	offQueue := b.queue + "-off"
	c, err := b.store.EnsurePartition(ctx, offQueue, "c")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.store.Pool().Exec(ctx, "UPDATE queen.queues SET dedup_window_seconds = 0 WHERE name = $1", offQueue); err != nil {
		t.Fatal(err)
	}
	if _, err := b.store.Push(ctx, []model.Frame{
		newFrame(a.ID, -1, "a0"), newFrame(c.ID, -1, "c0"), newFrame(d.ID, -1, "d0"),
	}); err != nil {
		t.Fatal(err)
	}
	res, err := b.store.Push(ctx, []model.Frame{
		newFrame(d.ID, -1, "d0", "d1"),  // stored duplicate: decided one by one
		newFrame(a.ID, -1, "a1", "a2"),  // clean, probe runs
		newFrame(bb.ID, -1, "b1", "b1"), // repeat inside the frame
		newFrame(c.ID, -1, "c0", "c0"),  // window 0: everything stored
	})
	if err != nil {
		t.Fatal(err)
	}
	wantOutcomes(t, res[0], dup(0), queued(1))
	wantOutcomes(t, res[1], queued(1), queued(2))
	wantOutcomes(t, res[2], queued(0), dup(0))
	wantOutcomes(t, res[3], queued(1), queued(2))
	if !res[0].Probed() || !res[1].Probed() || res[3].Probed() {
		t.Errorf("probe ran: %v %v %v %v; want true true (any) false", res[0].Probed(), res[1].Probed(), res[2].Probed(), res[3].Probed())
	}
	for i, want := range []int64{1, 2, 0, 2} {
		if res[i].LastOffset != want {
			t.Errorf("frame %d: last offset %d, want %d", i, res[i].LastOffset, want)
		}
	}
	// A vouched-for frame in a wide bundle skips the probe.
	vouched, err := b.store.Push(ctx, []model.Frame{newFrame(a.ID, 2, "a3"), newFrame(bb.ID, 0, "b2")})
	if err != nil {
		t.Fatal(err)
	}
	if vouched[0].Probed() || vouched[1].Probed() {
		t.Errorf("probe ran for vouched frames: %+v", vouched)
	}
	wantOutcomes(t, vouched[0], queued(3))
	wantOutcomes(t, vouched[1], queued(1))
	var frames, messages int
	if err := b.store.Pool().QueryRow(ctx, `
		SELECT count(*), sum(cardinality(h.hashes)) FROM queen.log_partitions p
		 CROSS JOIN LATERAL queen.log_hashes(p.id, -1, p.txns_start, p.txns_end) AS h WHERE p.id = ANY ($1)`,
		[]int64{a.ID, bb.ID, c.ID, d.ID}).Scan(&frames, &messages); err != nil {
		t.Fatal(err)
	}
	if frames != 9 || messages != 11 {
		t.Errorf("stored: %d frames with %d hashes, want 9 and 11", frames, messages)
	}
}

func TestRacingWideBundlesAreExactAndDoNotDeadlock(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	var parts []model.Partition
	for i := range 4 {
		p, err := b.store.EnsurePartition(ctx, b.queue, fmt.Sprintf("w%d", i))
		if err != nil {
			t.Fatal(err)
		}
		parts = append(parts, p)
	}
	const goroutines, rounds, ids = 12, 20, 40
	type answer struct {
		part int
		id   string
		out  model.Outcome
	}
	var (
		mu  sync.Mutex
		all []answer
		wg  sync.WaitGroup
	)
	for g := range goroutines {
		wg.Go(func() {
			for r := range rounds {
				// Every goroutine names the partitions in its own order.
				var bundle []model.Frame
				var idx []int
				for k := range parts {
					pi := (k + g) % len(parts)
					id1, id2 := fmt.Sprintf("r%d", (r*3+g)%ids), fmt.Sprintf("r%d", (r*7+g*5)%ids)
					bundle = append(bundle, newFrame(parts[pi].ID, -1, id1, id2))
					idx = append(idx, pi)
				}
				res, err := b.store.Push(ctx, bundle)
				if err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				for j, sr := range res {
					for m, o := range sr.Outcomes {
						all = append(all, answer{idx[j], bundle[j].TxnIDs[m], o})
					}
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	queuedAt := map[[2]string]int64{}
	for _, a := range all {
		if a.out.Duplicate {
			continue
		}
		key := [2]string{fmt.Sprint(a.part), a.id}
		if prev, ok := queuedAt[key]; ok {
			t.Fatalf("%v queued twice, at %d and %d", key, prev, a.out.Offset)
		}
		queuedAt[key] = a.out.Offset
	}
	for _, a := range all {
		if key := [2]string{fmt.Sprint(a.part), a.id}; a.out.Duplicate && queuedAt[key] != a.out.Offset {
			t.Fatalf("duplicate of %v names %d, original at %d", key, a.out.Offset, queuedAt[key])
		}
	}
}

// narrowed is a frame vouched at verified, with candidates.
func narrowed(pid, verified int64, cands []model.Candidate, txnIDs ...string) model.Frame {
	fr := newFrame(pid, verified, txnIDs...)
	fr.Candidates = cands
	return fr
}

// TestNarrowedProbeChecksTheNamedSlotsAndAboveTheWatermark: a vouched
// frame's candidates are checked exactly (the hash at that offset, in
// the window), rows above the watermark are probed, the earliest match is
// the original, and nothing else of the window is read.
func TestNarrowedProbeChecksTheNamedSlotsAndAboveTheWatermark(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	b.push(t, -1, "a", "b", "c") // 0, 1, 2
	b.push(t, -1, "d", "a")      // d=3, a is a duplicate of 0
	b.setWindow(t, 0)
	b.push(t, -1, "b") // 4: window 0 stores "b" again
	b.setWindow(t, 3600)
	b.push(t, -1, "e", "f") // 5, 6

	push := func(fr model.Frame) model.FrameResult {
		t.Helper()
		res, err := b.store.Push(ctx, []model.Frame{fr})
		if err != nil {
			t.Fatal(err)
		}
		return res[0]
	}
	// "b" is at 1 and 4; the cache names both: the earliest is the original.
	r := push(narrowed(b.part.ID, 6, []model.Candidate{{Index: 1, Offset: 4}, {Index: 1, Offset: 1}}, "new-1", "b"))
	wantOutcomes(t, r, queued(7), dup(1))
	if r.Probe != model.ProbeNarrowed || r.Unrolled != 2 {
		t.Errorf("probe %v unrolled %d, want narrowed over the 2 named slots", r.Probe, r.Unrolled)
	}
	// A named slot holding another hash is no match; one below the watermark
	// that is not named is not looked at (the caller vouched for it).
	r = push(narrowed(b.part.ID, 7, []model.Candidate{{Index: 0, Offset: 2}}, "d"))
	wantOutcomes(t, r, queued(8))
	// Rows above the watermark are probed: "e" at 5, vouched only up to 4.
	r = push(narrowed(b.part.ID, 4, []model.Candidate{{Index: 1, Offset: 0}}, "e", "a"))
	wantOutcomes(t, r, dup(5), dup(0))
	if r.Probe != model.ProbeNarrowed || r.Unrolled != 1+4 {
		t.Errorf("probe %v unrolled %d, want 1 slot and the 4 offsets above 4 (5..8)", r.Probe, r.Unrolled)
	}
	// A named slot past the window is no match: the original is gone.
	pgtest.AgeFrames(t, b.store.Pool(), 2*time.Hour, "partition_id = $1 AND base_offset = 0", b.part.ID)
	r = push(narrowed(b.part.ID, 8, []model.Candidate{{Index: 0, Offset: 2}}, "c"))
	wantOutcomes(t, r, queued(9))
	// After the window grew past the vouch, candidates are not trusted:
	// the whole window is probed.
	fr := narrowed(b.part.ID, 9, nil, "e")
	fr.VerifiedWindow = 60
	r = push(fr)
	wantOutcomes(t, r, dup(5))
	if r.Probe != model.ProbeFull {
		t.Errorf("probe %v after the window grew, want full", r.Probe)
	}
	// Nothing stored above the watermark and no candidates: skipped.
	if r = push(narrowed(b.part.ID, 9, nil, "g")); r.Probe != model.ProbeSkipped || r.Unrolled != 0 {
		t.Errorf("probe %v unrolled %d, want skipped", r.Probe, r.Unrolled)
	}
}

// TestWideBundleMixesNarrowedFullAndDirtyFrames: in one bundle, frames
// with duplicates found by candidates, by the range probe and within the
// frame are classified, and clean frames written as sent, all at once.
func TestWideBundleMixesNarrowedFullAndDirtyFrames(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := pgtest.Store(t, pgtest.SharedURL(t))
	queue := pgtest.UniqueName(t)
	var pids []int64
	for _, name := range []string{"p0", "p1", "p2", "p3"} {
		p, err := st.EnsurePartition(ctx, queue, name)
		if err != nil {
			t.Fatal(err)
		}
		pids = append(pids, p.ID)
	}
	first := []model.Frame{newFrame(pids[0], -1, "x", "y"), newFrame(pids[1], -1, "x", "y"), newFrame(pids[2], -1, "x"), newFrame(pids[3], -1, "x")}
	if _, err := st.Push(ctx, first); err != nil {
		t.Fatal(err)
	}
	res, err := st.Push(ctx, []model.Frame{
		narrowed(pids[0], 1, []model.Candidate{{Index: 1, Offset: 1}}, "n0", "y"), // a candidate hit
		newFrame(pids[1], -1, "x", "n1", "n1"),                                    // full probe hit, and a repeat
		newFrame(pids[2], 0, "n2", "n3"),                                          // clean, probe skipped
		newFrame(pids[3], -1, "x"),                                                // all duplicates: writes nothing
	})
	if err != nil {
		t.Fatal(err)
	}
	wantOutcomes(t, res[0], queued(2), dup(1))
	wantOutcomes(t, res[1], dup(0), queued(2), dup(2))
	wantOutcomes(t, res[2], queued(1), queued(2))
	wantOutcomes(t, res[3], dup(0))
	if res[3].BaseOffset != -1 || res[3].LastOffset != 0 {
		t.Errorf("all-duplicate frame: base %d last %d, want nothing written", res[3].BaseOffset, res[3].LastOffset)
	}
	for i, want := range []model.Probe{model.ProbeNarrowed, model.ProbeFull, model.ProbeSkipped, model.ProbeFull} {
		if res[i].Probe != want {
			t.Errorf("frame %d probe %v, want %v", i, res[i].Probe, want)
		}
	}
}
