package pgstore_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/queengate/queengate/model"
)

// Delayed redelivery (docs/protocol.md, "Delayed redelivery"). Time moves
// by backdating the group's cursor rows, never by sleeping.

// elapse moves group g's clock on its cursors d forward: its delays and
// leases end d sooner.
func (b *consumerBundle) elapse(t *testing.T, g model.Group, d time.Duration) {
	t.Helper()
	if _, err := b.store.Pool().Exec(context.Background(),
		`UPDATE queen.consumer_cursors SET delayed_until = delayed_until - $2::interval, lease_until = lease_until - $2::interval
		  WHERE group_id = $1`, g.ID, d); err != nil {
		t.Fatal(err)
	}
}

func (b *consumerBundle) configure(t *testing.T, patch model.OptionsPatch) {
	t.Helper()
	if _, _, err := b.store.Configure(context.Background(), b.queue, patch, false); err != nil {
		t.Fatal(err)
	}
}

func failedFor(txnID string, delay time.Duration) model.Settlement {
	return model.Settlement{Offset: -1, TxnID: txnID, Error: "later", DelayMs: delay.Milliseconds()}
}

func (b *consumerBundle) popPartition(t *testing.T, g model.Group, partitionID int64) model.PopResult {
	t.Helper()
	r, err := b.store.Pop(context.Background(), model.PopQuery{Group: g, PartitionID: partitionID, Max: 10, Lease: time.Minute,
		Consumer: "c", MaxBytes: 1 << 20, Room: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// A failed message with a delay is not delivered to its group before its
// time, by a pop of any partition or of its own, nor are the
// partition's later messages (pushed before or after the failure); the
// other groups get them at once; after its time it comes back first.
func TestAFailedMessageWaitsItsDelayAndHoldsOnlyItsGroup(t *testing.T) {
	t.Parallel()
	b := setupConsumer(t, 3)
	r := b.pop(t, b.group, 3)
	if a := b.ack(t, r.LeaseID, failedFor("t0", time.Minute), done("t1"), done("t2")); !a.LeaseEnded || a.NextOffset != 0 {
		t.Fatalf("ack: %+v", a)
	}
	b.push(t, -1, "t3")
	b.elapse(t, b.group, 30*time.Second)
	if got := b.pop(t, b.group, 10); len(got.Messages) != 0 || got.LeaseID != "" {
		t.Fatalf("a pop of any partition before the delay ran out got %v", offsetsOf(got))
	}
	if got := b.popPartition(t, b.group, b.part.ID); len(got.Messages) != 0 {
		t.Fatalf("a pop of the partition before the delay ran out got %v", offsetsOf(got))
	}
	other := b.testBundle.group(t, "other")
	if got := b.pop(t, other, 10); !slices.Equal(offsetsOf(got), []int64{0, 1, 2, 3}) {
		t.Fatalf("another group got %v, want every message at once", offsetsOf(got))
	}
	b.elapse(t, b.group, 31*time.Second)
	got := b.pop(t, b.group, 10)
	if !slices.Equal(offsetsOf(got), []int64{0, 3}) || got.Messages[0].Attempts != 2 || got.Messages[0].LastError != "later" {
		t.Fatalf("after the delay: %+v", got)
	}
}

// While one partition's message waits, the group's other partitions are
// served; the waiting cursor is not parked with the drained ones, so its
// message comes back once the delay runs out.
func TestADelayedPartitionLeavesTheGroupsOtherPartitionsServed(t *testing.T) {
	t.Parallel()
	b := setupConsumer(t, 1)
	second, err := b.store.EnsurePartition(context.Background(), b.queue, "second")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.store.Push(context.Background(), []model.Frame{newFrame(second.ID, -1, "s0", "s1")}); err != nil {
		t.Fatal(err)
	}
	first := b.popPartition(t, b.group, b.part.ID)
	b.ack(t, first.LeaseID, failedFor("t0", time.Minute))
	got := b.pop(t, b.group, 10)
	if got.PartitionID != second.ID || len(got.Messages) != 2 {
		t.Fatalf("the pop while the first partition waits: %+v", got)
	}
	if _, err := b.store.Ack(context.Background(), b.group, second.ID, got.LeaseID, []model.Settlement{done("s0"), done("s1")}); err != nil {
		t.Fatal(err)
	}
	if got := b.pop(t, b.group, 10); len(got.Messages) != 0 {
		t.Fatalf("with one partition drained and the other waiting: %+v", got)
	}
	var parked []int64
	if err := b.store.Pool().QueryRow(context.Background(),
		"SELECT array_agg(partition_id) FILTER (WHERE parked) FROM queen.consumer_cursors WHERE group_id = $1", b.group.ID).Scan(&parked); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(parked, []int64{second.ID}) {
		t.Fatalf("parked: %v; want the drained partition %d alone, not the waiting one %d", parked, second.ID, b.part.ID)
	}
	b.elapse(t, b.group, 61*time.Second)
	if got := b.pop(t, b.group, 10); got.PartitionID != b.part.ID || !slices.Equal(offsetsOf(got), []int64{0}) {
		t.Fatalf("after the delay: %+v", got)
	}
}

// The queue's retryDelayMs is the delay of a failure that asks for none;
// one that asks for its own has it.
func TestTheQueueDelayIsTheDefault(t *testing.T) {
	t.Parallel()
	b := setupConsumer(t, 2)
	b.configure(t, model.OptionsPatch{RetryDelayMs: ptr(60000)})
	r := b.pop(t, b.group, 1)
	b.ack(t, r.LeaseID, failed("t0", "default"))
	b.elapse(t, b.group, 30*time.Second)
	if got := b.pop(t, b.group, 10); len(got.Messages) != 0 {
		t.Fatalf("before the queue's delay ran out: %v", offsetsOf(got))
	}
	b.elapse(t, b.group, 31*time.Second)
	r = b.pop(t, b.group, 1)
	if !slices.Equal(offsetsOf(r), []int64{0}) {
		t.Fatalf("after the queue's delay: %v", offsetsOf(r))
	}
	b.ack(t, r.LeaseID, failedFor("t0", 2*time.Second))
	b.elapse(t, b.group, 3*time.Second)
	if got := b.pop(t, b.group, 1); !slices.Equal(offsetsOf(got), []int64{0}) || got.Messages[0].Attempts != 3 {
		t.Fatalf("after the item's own shorter delay: %+v", got)
	}
}

// retryBackoffMs delays each failure by its attempt, the last entry for
// every attempt past the list.
func TestTheBackoffListDelaysByAttempt(t *testing.T) {
	t.Parallel()
	b := setupConsumer(t, 1)
	b.setMaxAttempts(t, 0)
	b.configure(t, model.OptionsPatch{RetryDelayMs: ptr(5), RetryBackoffMs: &[]int{1000, 60000, 600000}})
	for attempt, wait := range []time.Duration{time.Second, time.Minute, 10 * time.Minute, 10 * time.Minute} {
		r := b.pop(t, b.group, 1)
		if len(r.Messages) != 1 || r.Messages[0].Attempts != attempt+1 {
			t.Fatalf("attempt %d: %+v", attempt+1, r)
		}
		b.ack(t, r.LeaseID, failed("t0", "again"))
		if attempt > 0 {
			b.elapse(t, b.group, wait/2)
			if got := b.pop(t, b.group, 1); len(got.Messages) != 0 {
				t.Fatalf("after attempt %d, half of its %v: delivered again", attempt+1, wait)
			}
		}
		b.elapse(t, b.group, wait)
	}
}

// A lease that runs out after its consumer was heard from is a failure
// with the queue's delay (by the attempt it delivered); one never heard
// from is taken back at once, as before: nothing says it failed.
func TestARunOutLeaseWaitsTheQueueDelayOnceHeardFrom(t *testing.T) {
	t.Parallel()
	b := setupConsumer(t, 1)
	b.configure(t, model.OptionsPatch{RetryBackoffMs: &[]int{60000}})
	runOut := func() int {
		t.Helper()
		got, err := b.store.RunOutLeases(context.Background(), []int64{b.group.ID})
		if err != nil {
			t.Fatal(err)
		}
		return len(got)
	}

	unheard := b.pop(t, b.group, 1)
	b.elapse(t, b.group, time.Minute+time.Second)
	if runOut() != 1 {
		t.Fatal("an unheard lease that ran out is not listed at once")
	}
	heard := b.pop(t, b.group, 1)
	if heard.LeaseID == unheard.LeaseID || len(heard.Messages) != 1 || heard.Messages[0].Attempts != 1 {
		t.Fatalf("after an unheard lease ran out: %+v", heard)
	}
	b.renew(t, heard.LeaseID)
	b.elapse(t, b.group, time.Minute+time.Second)
	if runOut() != 0 {
		t.Fatal("a heard lease that ran out is listed before its delay ran out")
	}
	if got := b.pop(t, b.group, 1); len(got.Messages) != 0 {
		t.Fatalf("delivered before the run-out lease's delay ran out: %+v", got)
	}
	b.elapse(t, b.group, time.Minute)
	if runOut() != 1 {
		t.Fatal("once its delay ran out, the run-out lease is not listed")
	}
	got := b.pop(t, b.group, 1)
	if len(got.Messages) != 1 || got.Messages[0].Attempts != 2 {
		t.Fatalf("after the run-out lease's delay: %+v", got)
	}
}

// A failed message's delay, once run out, is listed for the waiting pops
// (RunOutLeases) until a pop takes the partition.
func TestARunOutDelayIsListedUntilAPopTakesIt(t *testing.T) {
	t.Parallel()
	b := setupConsumer(t, 1)
	r := b.pop(t, b.group, 1)
	b.ack(t, r.LeaseID, failedFor("t0", time.Minute))
	list := func() []model.GroupPartitionID {
		t.Helper()
		got, err := b.store.RunOutLeases(context.Background(), []int64{b.group.ID})
		if err != nil {
			t.Fatal(err)
		}
		return got
	}
	if got := list(); len(got) != 0 {
		t.Fatalf("while the delay runs: %v", got)
	}
	b.elapse(t, b.group, 61*time.Second)
	if got := list(); !slices.Equal(got, []model.GroupPartitionID{{GroupID: b.group.ID, PartitionID: b.part.ID}}) {
		t.Fatalf("once the delay ran out: %v", got)
	}
	b.pop(t, b.group, 1)
	if got := list(); len(got) != 0 {
		t.Fatalf("once a pop took the partition: %v", got)
	}
}

// A failure that dead-letters its message does not hold the cursor: the
// next message is delivered at once.
func TestADeadLetteringFailureDoesNotWait(t *testing.T) {
	t.Parallel()
	b := setupConsumer(t, 2)
	b.setMaxAttempts(t, 1)
	b.configure(t, model.OptionsPatch{RetryDelayMs: ptr(60000)})
	r := b.pop(t, b.group, 1)
	if a := b.ack(t, r.LeaseID, failedFor("t0", time.Hour)); a.DeadLettered != 1 {
		t.Fatalf("ack: %+v", a)
	}
	if got := b.pop(t, b.group, 1); !slices.Equal(offsetsOf(got), []int64{1}) {
		t.Fatalf("after a dead-lettering failure: %v", offsetsOf(got))
	}
}

// A seek delivers from its position at attempt 1: a failure's delay
// waiting there no longer holds the group.
func TestASeekEndsTheDelayItMovesPast(t *testing.T) {
	t.Parallel()
	b := setupConsumer(t, 2)
	r := b.pop(t, b.group, 2)
	b.ack(t, r.LeaseID, failedFor("t0", time.Hour), done("t1"))
	if got := b.pop(t, b.group, 10); len(got.Messages) != 0 {
		t.Fatalf("a pop within the delay got %v", offsetsOf(got))
	}
	b.seek(t, b.group.Name, model.Seek{Offset: 0})
	got := b.pop(t, b.group, 10)
	if !slices.Equal(offsetsOf(got), []int64{0, 1}) || got.Messages[0].Attempts != 1 {
		t.Fatalf("after a seek to 0: %+v, want offsets 0 and 1 at attempt 1", got)
	}
}

// A purge deletes the failure a delay waits for: a message pushed after
// it is delivered at once.
func TestAPurgeEndsTheDelaysOfWhatItDeletes(t *testing.T) {
	t.Parallel()
	b := setupConsumer(t, 1)
	r := b.pop(t, b.group, 1)
	b.ack(t, r.LeaseID, failedFor("t0", time.Hour))
	if _, err := b.store.PurgeQueue(context.Background(), b.queue, ""); err != nil {
		t.Fatal(err)
	}
	b.push(t, -1, "t1")
	if got := b.pop(t, b.group, 10); !slices.Equal(offsetsOf(got), []int64{1}) {
		t.Fatalf("after the purge the group popped %v, want the message pushed since", offsetsOf(got))
	}
}
