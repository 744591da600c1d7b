package pgstore_test

import (
	"context"
	"testing"
	"time"

	"github.com/queengate/queengate/model"
)

// countedLeases counts the group's cursors in consumer_cursors_counted:
// what a pop under maxAckPending reads.
func (b *consumerBundle) countedLeases(t *testing.T) int {
	t.Helper()
	var n int
	if err := b.store.Pool().QueryRow(context.Background(),
		"SELECT count(*) FROM queen.consumer_cursors WHERE group_id = $1 AND lease_counted", b.group.ID).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// Pops and acks without a limit count nothing (the counted index stays
// empty: no cost when unused); a lease under a limit is counted until its
// ack or release ends it, so the index holds running leases only; and
// the count excludes what the lease's acks settled.
func TestMaxAckPendingCountsOnlyLeasesUnderALimit(t *testing.T) {
	t.Parallel()
	b := setupConsumer(t, 6)
	r := b.pop(t, b.group, 2)
	b.ack(t, r.LeaseID, doneAt(0), doneAt(1))
	if n := b.countedLeases(t); n != 0 {
		t.Fatalf("%d leases counted after a pop without a limit", n)
	}
	limited := func(max int) model.PopResult {
		t.Helper()
		res, err := b.store.Pop(context.Background(), model.PopQuery{Group: b.group, Max: max, Lease: time.Minute, Consumer: "c",
			MaxBytes: 1 << 20, Room: 1 << 20, MaxAckPending: 3})
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	r = limited(10)
	if len(r.Messages) != 3 || b.countedLeases(t) != 1 {
		t.Fatalf("a pop under a limit of 3: %v, %d counted", offsetsOf(r), b.countedLeases(t))
	}
	if held := limited(10); !held.Held || len(held.Messages) != 0 {
		t.Fatalf("a pop at the limit: %+v, want held", held)
	}
	if a := b.ack(t, r.LeaseID, doneAt(2)); a.LeaseEnded || !a.LeaseCounted {
		t.Fatalf("a partial ack of a counted lease: %+v", a)
	}
	if other := limited(10); other.Held {
		t.Fatalf("a pop with room (its one partition leased): %+v, want nothing, not held", other)
	}
	if a := b.ack(t, r.LeaseID, doneAt(3), doneAt(4)); !a.LeaseEnded || b.countedLeases(t) != 0 {
		t.Fatalf("the ack ending the lease: %+v, %d still counted", a, b.countedLeases(t))
	}
}
