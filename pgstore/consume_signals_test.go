package pgstore_test

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/queengate/queengate/model"
)

// groupPartition is the group's row of GroupPartitions on the test's
// partition.
func (b *consumerBundle) groupPartition(t *testing.T) model.GroupPartition {
	t.Helper()
	gps, err := b.store.GroupPartitions(context.Background(), b.part.QueueID)
	if err != nil {
		t.Fatal(err)
	}
	for _, gp := range gps {
		if gp.Group == b.group.Name && gp.PartitionID == b.part.ID {
			return gp
		}
	}
	t.Fatalf("no group %s on partition %d in %+v", b.group.Name, b.part.ID, gps)
	return model.GroupPartition{}
}

func (b *consumerBundle) undo(t *testing.T, lease string) bool {
	t.Helper()
	undone, err := b.store.Undo(context.Background(), b.group, b.part.ID, lease)
	if err != nil {
		t.Fatal(err)
	}
	return undone
}

func attemptsOf(r model.PopResult) []int {
	var out []int
	for _, m := range r.Messages {
		out = append(out, m.Attempts)
	}
	return out
}

// A pop taken back (its answer was never sent) counts no attempt and
// keeps no lease: the next pop gets the same messages, as they were.
func TestAnUndonePopCountsNoAttemptAndKeepsNoLease(t *testing.T) {
	t.Parallel()
	b := setupConsumer(t, 3)
	r := b.pop(t, b.group, 2)
	b.ack(t, r.LeaseID, failed("t0", "boom"), done("t1"))
	r = b.pop(t, b.group, 2) // t0 a second time, t2 a first
	if !slices.Equal(offsetsOf(r), []int64{0, 2}) || !slices.Equal(attemptsOf(r), []int{2, 1}) {
		t.Fatalf("redelivery: %+v", r)
	}
	if !b.undo(t, r.LeaseID) {
		t.Fatal("the pop's lease was not taken back")
	}
	again := b.pop(t, b.group, 2)
	if !slices.Equal(offsetsOf(again), []int64{0, 2}) || !slices.Equal(attemptsOf(again), []int{2, 1}) ||
		again.Messages[0].LastError != "boom" {
		t.Fatalf("after the undo: %+v; want t0 (attempt 2, boom) and t2 (attempt 1) again at once", again)
	}
	if b.undo(t, r.LeaseID) {
		t.Error("an undo of a lease replaced since changed something")
	}
	b.renew(t, again.LeaseID)
	if b.undo(t, again.LeaseID) {
		t.Error("an undo of a lease heard from changed something")
	}
	if gp := b.groupPartition(t); gp.Unconfirmed != 0 {
		t.Errorf("an undone pop counted %d unconfirmed deliveries", gp.Unconfirmed)
	}
}

// A lease that runs out with nothing heard from its consumer costs no
// attempt (its answer may have been lost): its deliveries are taken back
// and counted as unconfirmed. One heard from counts its attempts. (Three
// in a row would count with the default maxUnheardDeliveries: see
// consume_unheard_test.go.)
func TestALeaseRunningOutUnheardCostsNoAttempt(t *testing.T) {
	t.Parallel()
	b := setupConsumer(t, 2)
	b.setMaxAttempts(t, 1)
	four := 4
	b.configure(t, model.OptionsPatch{MaxUnheardDeliveries: &four})
	for range 3 {
		b.pop(t, b.group, 2)
		if gp := b.groupPartition(t); gp.LeaseConsumer != "c" {
			t.Fatalf("leaseConsumer %q while the lease runs", gp.LeaseConsumer)
		}
		b.backdateLease(t)
		if gp := b.groupPartition(t); gp.LeaseConsumer != "" {
			t.Fatalf("leaseConsumer %q after the lease ran out", gp.LeaseConsumer)
		}
	}
	r := b.pop(t, b.group, 2)
	if !slices.Equal(offsetsOf(r), []int64{0, 1}) || !slices.Equal(attemptsOf(r), []int{1, 1}) || r.DeadLettered != 0 {
		t.Fatalf("after three leases ran out unheard: %+v; want both messages at their first attempt", r)
	}
	if gp := b.groupPartition(t); gp.Unconfirmed != 6 {
		t.Errorf("unconfirmed %d, want 6", gp.Unconfirmed)
	}
	b.ack(t, r.LeaseID, done("t0"))
	b.backdateLease(t)
	if r := b.pop(t, b.group, 2); len(r.Messages) != 0 || r.DeadLettered != 1 {
		t.Fatalf("after a lease heard from ran out at maxAttempts 1: %+v; want t1 dead-lettered", r)
	}
	if dl := b.deadLetters(t); len(dl) != 1 || !strings.Contains(string(dl[0].Data), `"error":"lease ran out (consumer 'c', attempt 1)"`) {
		t.Fatalf("dead letters: %+v", dl)
	}
}

// Pops are bounded by what their messages take in the answer: at most
// MaxBytes, but always one message if it fits in Room, and none if not.
func TestPopsAreBoundedByBytes(t *testing.T) {
	t.Parallel()
	b := setupConsumer(t, 4)
	all := b.pop(t, b.group, 4)
	if !b.undo(t, all.LeaseID) {
		t.Fatal("undo")
	}
	two := model.DeliverySize(all.Messages[0]) + model.DeliverySize(all.Messages[1])
	pop := func(maxBytes, room int64) model.PopResult {
		r, err := b.store.Pop(context.Background(), model.PopQuery{Group: b.group, Max: 4, Lease: time.Minute, Consumer: "c",
			MaxBytes: maxBytes, Room: room})
		if err != nil {
			t.Fatal(err)
		}
		if r.LeaseID != "" && !b.undo(t, r.LeaseID) {
			t.Fatal("undo")
		}
		return r
	}
	if r := pop(two, 1<<20); !slices.Equal(offsetsOf(r), []int64{0, 1}) {
		t.Errorf("maxBytes of two messages delivered %v", offsetsOf(r))
	}
	if r := pop(two-1, 1<<20); !slices.Equal(offsetsOf(r), []int64{0}) {
		t.Errorf("maxBytes one short of two messages delivered %v", offsetsOf(r))
	}
	if r := pop(1, 1<<20); !slices.Equal(offsetsOf(r), []int64{0}) {
		t.Errorf("maxBytes 1 delivered %v, want the first message alone", offsetsOf(r))
	}
	if r := pop(1, model.DeliverySize(all.Messages[0])-1); len(r.Messages) != 0 || r.LeaseID != "" {
		t.Errorf("no room for the first message, yet delivered %v (lease %q)", offsetsOf(r), r.LeaseID)
	}
}

// A dead letter keeps the message's data byte for byte as pushed.
func TestADeadLetterKeepsTheDataAsPushed(t *testing.T) {
	t.Parallel()
	b := setupConsumer(t, 0)
	b.setMaxAttempts(t, 1)
	data := `{"b": "<i>&</i>", "n": [1, 2]}`
	fr := model.Frame{PartitionID: b.part.ID, Verified: -1, TxnIDs: []string{"x"}, Hashes: []model.Hash{model.HashTxnID("x")},
		Data: [][]byte{[]byte(data)}}
	if _, err := b.store.Push(context.Background(), []model.Frame{fr}); err != nil {
		t.Fatal(err)
	}
	r := b.pop(t, b.group, 1)
	if a := b.ack(t, r.LeaseID, failed("x", "no")); a.DeadLettered != 1 {
		t.Fatalf("ack: %+v", a)
	}
	if dl := b.deadLetters(t); len(dl) != 1 || !strings.HasSuffix(string(dl[0].Data), `,"data":`+data+`}`) {
		t.Fatalf("dead letter %s, want the data %s as pushed", dl[0].Data, data)
	}
}

// A late ack of a message dead-lettered meanwhile says so.
func TestALateAckOfADeadLetteredMessageSaysSo(t *testing.T) {
	t.Parallel()
	b := setupConsumer(t, 2)
	b.setMaxAttempts(t, 1)
	r := b.pop(t, b.group, 2)
	b.ack(t, r.LeaseID, failed("t0", "no")) // out of attempts: dead-lettered
	a := b.ack(t, r.LeaseID, done("t0"), done("t1"), done("t1"))
	want := []string{model.AckDeadLettered, model.AckAcked, model.AckAlready}
	if !slices.Equal(results(a), want) {
		t.Fatalf("results %v, want %v", results(a), want)
	}
}
