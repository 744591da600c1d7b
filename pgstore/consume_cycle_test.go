package pgstore_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/queengate/queengate/internal/pgtest"
	"github.com/queengate/queengate/model"
)

// A pop carrying the whole ack of its lease takes the partition's next
// lease in the same statement only when the general pop would take that
// partition, least recently leased first: with one consumer the two
// partitions take turns, the cycle settling the ack alone and the pop
// taking the other; while the other is leased, or when the pop names the
// partition, the cycle delivers its next messages.
func TestACycleKeepsLeastRecentlyLeasedFirst(t *testing.T) {
	t.Parallel()
	q, st := sharedManyPartitions(t, 2)
	q.push(t, 6, q.parts...)
	g := q.group(t, "g")
	ctx := context.Background()
	pr := model.PopQuery{Group: g, Max: 2, Lease: time.Minute, Consumer: "c", MaxBytes: 1 << 20, Room: 1 << 20}
	pop := func(pr model.PopQuery) model.PopResult {
		t.Helper()
		r, err := st.Pop(ctx, pr)
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	cycle := func(pr model.PopQuery, prev model.PopResult) *model.PopResult {
		t.Helper()
		a, popped, ok, err := st.Cycle(ctx, pr, prev.PartitionID, prev.LeaseID, wholeAck(prev))
		if err != nil || !ok || !a.LeaseEnded || a.NextOffset != prev.Messages[len(prev.Messages)-1].Offset+1 {
			t.Fatalf("cycle acking %v of %s: %+v ok %v, %v", offsetsOf(prev), prev.Partition, a, ok, err)
		}
		return popped
	}
	want := func(r model.PopResult, partition string, offsets ...int64) {
		t.Helper()
		if r.Partition != partition || !slices.Equal(offsetsOf(r), offsets) {
			t.Fatalf("delivered %v of %q, want %v of %q", offsetsOf(r), r.Partition, offsets, partition)
		}
	}
	a0 := pop(pr)
	want(a0, "p0", 0, 1)
	if popped := cycle(pr, a0); popped != nil {
		t.Fatalf("the cycle took p0 again over p1, never leased: %v", offsetsOf(*popped))
	}
	b0 := pop(pr)
	want(b0, "p1", 0, 1)
	if popped := cycle(pr, b0); popped != nil {
		t.Fatalf("the cycle took p1 again over p0, leased before: %v", offsetsOf(*popped))
	}
	a2 := pop(pr)
	want(a2, "p0", 2, 3)
	other := pr
	other.Consumer = "d"
	b2 := pop(other)
	want(b2, "p1", 2, 3)
	popped := cycle(pr, a2) // p1 is leased to d
	if popped == nil {
		t.Fatal("the cycle did not take p0 again while p1 is leased")
	}
	want(*popped, "p0", 4, 5)
	named := other
	named.PartitionID = b2.PartitionID
	if popped = cycle(named, b2); popped == nil {
		t.Fatal("the cycle did not take the partition its pop names")
	}
	want(*popped, "p1", 4, 5)
}

// A cycle checks that no cursor of the group comes before its own by
// walking only those before it: with 1000 partitions, all leased after
// its own, a cycle is one statement of about as many buffers as with one
// (an index level more, in the few indexes it reads, at most). On a
// cluster of its own, as TestAPopReadsAsMuchAt100kPartitionsAsAt8: its
// wake reads again the frames written since the oldest transaction
// running in the cluster when the group last looked, and other tests'
// transactions in the shared cluster held that back (1572 buffers in a
// loaded run).
func TestACycleReadsAsMuchAt1000PartitionsAsAtOne(t *testing.T) {
	t.Parallel()
	url := pgtest.NewCluster(t).URL
	st := pgtest.Store(t, url)
	log := openPlanLogWith(t, url, "SET auto_explain.log_analyze = on; SET auto_explain.log_buffers = on; SET auto_explain.log_timing = off;")
	ctx := context.Background()
	// The logging session makes its plans on a queue of its own first.
	warm, err := log.store.EnsurePartition(ctx, "warm", "Default")
	if err != nil {
		t.Fatal(err)
	}
	rows := benchRows{prefix: "warm-"}
	if _, err := log.store.Push(ctx, []model.Frame{rows.frame(warm.ID, -1, 100)}); err != nil {
		t.Fatal(err)
	}
	wg, err := log.store.EnsureGroup(ctx, "warm", "g")
	if err != nil {
		t.Fatal(err)
	}
	var prev model.PopResult
	for range 10 {
		if prev, err = cyclePop(ctx, log.store, model.PopQuery{Group: wg, Max: 2, Lease: time.Minute, Consumer: "c",
			MaxBytes: 1 << 20, Room: 1 << 20}, prev); err != nil || len(prev.Messages) != 2 {
			t.Fatalf("warming up: %v, %v", offsetsOf(prev), err)
		}
	}

	q := newManyPartitions(t, st, "many")
	q.grow(t, 1000)
	q.push(t, 4, q.parts...)
	g := q.group(t, "g")
	pr := model.PopQuery{Group: g, Max: 2, Lease: time.Minute, Consumer: "c", MaxBytes: 1 << 20, Room: 1 << 20}
	first, err := st.Pop(ctx, pr)
	if err != nil || len(first.Messages) != 2 {
		t.Fatalf("first pop: %v, %v", offsetsOf(first), err)
	}
	other := pr
	other.Consumer = "d"
	for range len(q.parts) - 1 {
		if r, err := st.Pop(ctx, other); err != nil || len(r.Messages) != 2 {
			t.Fatalf("pop: %v, %v", offsetsOf(r), err)
		}
	}
	log.take()
	a, popped, ok, err := log.store.Cycle(ctx, pr, first.PartitionID, first.LeaseID, wholeAck(first))
	if err != nil || !ok || !a.LeaseEnded || popped == nil || popped.PartitionID != first.PartitionID ||
		!slices.Equal(offsetsOf(*popped), []int64{2, 3}) {
		t.Fatalf("cycle: %+v %+v ok %v, %v", a, popped, ok, err)
	}
	cost := statementCost(log.take())
	t.Logf("a cycle at 1000 partitions: %d statement, %d buffers", cost.statements, cost.buffers)
	if most := maxCycleBuffers + 10; cost.statements != 1 || cost.buffers > most {
		t.Errorf("a cycle at 1000 partitions: %d statements, %d buffers; want 1, at most %d", cost.statements, cost.buffers, most)
	}
}
