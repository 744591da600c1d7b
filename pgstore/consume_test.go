package pgstore_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/queengate/queengate/model"
	"github.com/queengate/queengate/tail"
)

// consumerBundle is a queue with pushed messages and a consumer group.
type consumerBundle struct {
	*testBundle
	group model.Group
	// tail, when set, serves the cycles it can before the store's Cycle
	// (setupConsumerInFrames).
	tail *tail.Server
}

// setupConsumer pushes n messages t0..t(n-1) to the test's partition and
// creates group "g".
func setupConsumer(t *testing.T, n int) *consumerBundle {
	t.Helper()
	b := setup(t)
	if n > 0 {
		var ids []string
		for i := range n {
			ids = append(ids, fmt.Sprintf("t%d", i))
		}
		b.push(t, -1, ids...)
	}
	return &consumerBundle{testBundle: b, group: b.group(t, "g")}
}

func (b *testBundle) group(t *testing.T, name string) model.Group {
	t.Helper()
	g, err := b.store.EnsureGroup(context.Background(), b.queue, name)
	if err != nil {
		t.Fatal(err)
	}
	return g
}

func (b *consumerBundle) pop(t *testing.T, g model.Group, max int) model.PopResult {
	t.Helper()
	r, err := b.store.Pop(context.Background(), model.PopQuery{Group: g, Max: max, Lease: time.Minute, Consumer: "c", MaxBytes: 1 << 20, Room: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func offsetsOf(r model.PopResult) []int64 {
	var out []int64
	for _, m := range r.Messages {
		out = append(out, m.Offset)
	}
	return out
}

func (b *consumerBundle) ack(t *testing.T, lease string, items ...model.Settlement) model.SettledBatch {
	t.Helper()
	r, err := b.store.Ack(context.Background(), b.group, b.part.ID, lease, items)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func done(txnID string) model.Settlement {
	return model.Settlement{Offset: -1, TxnID: txnID, Completed: true}
}
func doneAt(off int64) model.Settlement { return model.Settlement{Offset: off, Completed: true} }
func failed(txnID, why string) model.Settlement {
	return model.Settlement{Offset: -1, TxnID: txnID, Error: why}
}

func results(r model.SettledBatch) []string {
	var out []string
	for _, o := range r.Items {
		out = append(out, o.Result)
	}
	return out
}

func (b *testBundle) setMaxAttempts(t *testing.T, n int) {
	t.Helper()
	if _, err := b.store.Pool().Exec(context.Background(), "UPDATE queen.queues SET max_attempts = $1 WHERE name = $2", n, b.queue); err != nil {
		t.Fatal(err)
	}
}

func (b *consumerBundle) backdateLease(t *testing.T) {
	t.Helper()
	if _, err := b.store.Pool().Exec(context.Background(),
		"UPDATE queen.consumer_cursors SET lease_until = now() - interval '1 second' WHERE group_id = $1", b.group.ID); err != nil {
		t.Fatal(err)
	}
}

func TestPopDeliversInOffsetOrderAndAcksAdvanceTheCursor(t *testing.T) {
	t.Parallel()
	b := setupConsumer(t, 10)
	r := b.pop(t, b.group, 4)
	if !slices.Equal(offsetsOf(r), []int64{0, 1, 2, 3}) || r.LeaseID == "" || r.Messages[0].TxnID != "t0" ||
		r.Messages[0].Attempts != 1 || string(r.Messages[1].Data) != `{"i":1,"id":"t1"}` {
		t.Fatalf("pop: %+v", r)
	}
	// While the lease runs, the partition is the group's consumer's only.
	if again := b.pop(t, b.group, 4); len(again.Messages) != 0 {
		t.Fatalf("a second pop during the lease got %v", offsetsOf(again))
	}
	a := b.ack(t, r.LeaseID, done("t0"), done("t1"), doneAt(2), done("t3"))
	if !slices.Equal(results(a), []string{"acked", "acked", "acked", "acked"}) || a.NextOffset != 4 || !a.LeaseEnded {
		t.Fatalf("ack: %+v", a)
	}
	if next := b.pop(t, b.group, 100); !slices.Equal(offsetsOf(next), []int64{4, 5, 6, 7, 8, 9}) {
		t.Fatalf("next pop: %v", offsetsOf(next))
	}
}

func TestOutOfOrderAcksWaitForThePrefix(t *testing.T) {
	t.Parallel()
	b := setupConsumer(t, 4)
	r := b.pop(t, b.group, 4)
	if a := b.ack(t, r.LeaseID, done("t2"), done("t3")); a.NextOffset != 0 || a.LeaseEnded {
		t.Fatalf("acks above the cursor moved it: %+v", a)
	}
	if a := b.ack(t, r.LeaseID, done("t0")); a.NextOffset != 1 {
		t.Fatalf("ack of t0: %+v", a)
	}
	if a := b.ack(t, r.LeaseID, done("t1")); a.NextOffset != 4 || !a.LeaseEnded {
		t.Fatalf("closing the prefix: %+v", a)
	}
	var marks int
	if err := b.store.Pool().QueryRow(context.Background(),
		"SELECT count(*) FROM queen.consumer_marks WHERE group_id = $1", b.group.ID).Scan(&marks); err != nil || marks != 0 {
		t.Fatalf("%d marks left below the cursor (%v)", marks, err)
	}
}

func TestFailedAndExpiredMessagesAreRedeliveredWithTheirAttempts(t *testing.T) {
	t.Parallel()
	b := setupConsumer(t, 3)
	r := b.pop(t, b.group, 2)
	if a := b.ack(t, r.LeaseID, failed("t0", "boom")); a.LeaseEnded || a.NextOffset != 0 {
		t.Fatalf("failed ack: %+v", a)
	}
	if a := b.ack(t, r.LeaseID, done("t1")); !a.LeaseEnded {
		t.Fatalf("the lease did not end with everything settled: %+v", a)
	}
	r = b.pop(t, b.group, 2)
	if !slices.Equal(offsetsOf(r), []int64{0, 2}) || r.Messages[0].Attempts != 2 || r.Messages[0].LastError != "boom" ||
		r.Messages[1].Attempts != 1 {
		t.Fatalf("redelivery: %+v", r)
	}
	// A consumer that goes away: its lease runs out and another consumer
	// of the group gets the same messages, one attempt further.
	b.backdateLease(t)
	if a := b.ack(t, r.LeaseID, done("t0")); results(a)[0] != model.AckLeaseExpired {
		t.Fatalf("an ack under the run-out lease: %v", results(a))
	}
	r2 := b.pop(t, b.group, 2)
	if !slices.Equal(offsetsOf(r2), []int64{0, 2}) || r2.Messages[0].Attempts != 3 || r2.Messages[1].Attempts != 2 {
		t.Fatalf("after expiry: %+v", r2)
	}
	if a := b.ack(t, r.LeaseID, done("t0")); results(a)[0] != model.AckLeaseNotHeld {
		t.Fatalf("an ack under a replaced lease: %v", results(a))
	}
}

func TestDeadLetteredExactlyOnceAtMaxAttempts(t *testing.T) {
	t.Parallel()
	b := setupConsumer(t, 2)
	b.setMaxAttempts(t, 2)
	r := b.pop(t, b.group, 1)
	b.ack(t, r.LeaseID, failed("t0", "first"))
	r = b.pop(t, b.group, 1)
	if r.Messages[0].Attempts != 2 {
		t.Fatalf("second delivery: %+v", r)
	}
	a := b.ack(t, r.LeaseID, failed("t0", "second"))
	if a.DeadLettered != 1 || a.NextOffset != 1 || !a.LeaseEnded {
		t.Fatalf("the last failure: %+v", a)
	}
	// Retried, the batch changes nothing and dead-letters nothing again;
	// it says what became of the message.
	if a := b.ack(t, r.LeaseID, failed("t0", "second")); a.DeadLettered != 0 || results(a)[0] != model.AckDeadLettered {
		t.Fatalf("retried: %+v", a)
	}
	if next := b.pop(t, b.group, 10); !slices.Equal(offsetsOf(next), []int64{1}) {
		t.Fatalf("after dead-lettering: %v", offsetsOf(next))
	}
	dlq, err := b.store.Read(context.Background(), model.ReadQuery{Queue: model.DeadLetterQueue(b.queue), Partition: "Default", Max: 10, MaxBytes: 1 << 20})
	if err != nil || len(dlq.Messages) != 1 {
		t.Fatalf("dead-letter queue: %+v, %v", dlq, err)
	}
	m := dlq.Messages[0]
	if m.TxnID != "g:"+model.MessageID(b.part.ID, 0) || !contains(string(m.Data), `"transactionId":"t0"`, `"attempts":2`, `"error":"second"`, `"data":{"i":0,"id":"t0"}`) {
		t.Fatalf("dead letter %s: %s", m.TxnID, m.Data)
	}
}

// A message whose lease ran out maxAttempts times after its consumer was
// heard from is dead-lettered by the pop that would deliver it again, and
// the dead letter says why.
func TestExpiredPastMaxAttemptsIsDeadLetteredByThePop(t *testing.T) {
	t.Parallel()
	b := setupConsumer(t, 1)
	b.setMaxAttempts(t, 1)
	first := b.pop(t, b.group, 1)
	b.renew(t, first.LeaseID)
	b.backdateLease(t)
	r := b.pop(t, b.group, 1)
	if len(r.Messages) != 0 || r.DeadLettered != 1 {
		t.Fatalf("pop after the only attempt ran out: %+v", r)
	}
	if n := b.lastOffsetOf(t, model.DeadLetterQueue(b.queue)); n != 0 {
		t.Fatalf("dead-letter queue's last offset %d, want 0", n)
	}
	dlq := b.deadLetters(t)
	if !strings.Contains(string(dlq[0].Data), `"error":"lease ran out (consumer 'c', attempt 1)"`) {
		t.Fatalf("the dead letter does not say its lease ran out: %s", dlq[0].Data)
	}
}

func (b *consumerBundle) renew(t *testing.T, lease string) {
	t.Helper()
	if _, ok, err := b.store.Lease(context.Background(), b.group, b.part.ID, lease, time.Minute); !ok || err != nil {
		t.Fatalf("renew: %v %v", ok, err)
	}
}

func (b *consumerBundle) deadLetters(t *testing.T) []model.LogMessage {
	t.Helper()
	dlq, err := b.store.Read(context.Background(), model.ReadQuery{Queue: model.DeadLetterQueue(b.queue), Partition: "Default", Max: 10, MaxBytes: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	return dlq.Messages
}

func (b *consumerBundle) lastOffsetOf(t *testing.T, queue string) int64 {
	t.Helper()
	var last int64
	if err := b.store.Pool().QueryRow(context.Background(), `SELECT p.last_offset FROM queen.log_partitions p
		JOIN queen.queues q ON q.id = p.queue_id WHERE q.name = $1`, queue).Scan(&last); err != nil {
		t.Fatal(err)
	}
	return last
}

func TestGroupsEachSeeEveryMessage(t *testing.T) {
	t.Parallel()
	b := setupConsumer(t, 3)
	other := b.testBundle.group(t, "other")
	for _, g := range []model.Group{b.group, other} {
		if r := b.pop(t, g, 10); !slices.Equal(offsetsOf(r), []int64{0, 1, 2}) {
			t.Errorf("group %s: %v", g.Name, offsetsOf(r))
		}
	}
}

func TestAckResultsNameWhatIsWrong(t *testing.T) {
	t.Parallel()
	b := setupConsumer(t, 3)
	r := b.pop(t, b.group, 2)
	a := b.ack(t, r.LeaseID, done("nope"), doneAt(99), doneAt(2), done("t0"), done("t0"))
	want := []string{model.AckUnknownTxnID, model.AckUnknownOffset, model.AckNotInLease, model.AckAcked, model.AckAlready}
	if !slices.Equal(results(a), want) {
		t.Fatalf("results %v, want %v", results(a), want)
	}
	if a := b.ack(t, "not-a-lease", done("t1")); results(a)[0] != model.AckLeaseNotHeld {
		t.Fatalf("a malformed lease: %v", results(a))
	}
	if a := b.ack(t, r.LeaseID, done("t0")); results(a)[0] != model.AckAlready || a.NextOffset != 1 {
		t.Fatalf("a repeated ack: %+v", a)
	}
}

func contains(s string, subs ...string) bool {
	for _, sub := range subs {
		if !strings.Contains(s, sub) {
			return false
		}
	}
	return true
}

// Retention with consumer groups: frames with hashes stay from the lowest
// cursor up (acks resolve transactionIds through them), and with
// retainUntil consumed, segments too; once the group has consumed them
// they go as before.
func TestRetentionWaitsForConsumers(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setupRetainUntilConsumed(t)
	b.push(t, -1, "t0")
	b.push(t, -1, "t1")
	b.push(t, -1, "t2")
	g := b.group(t, "g")
	cb := &consumerBundle{testBundle: b, group: g}
	r := cb.pop(t, g, 1) // t0 delivered, the cursor still at 0
	b.age(t, 0, time.Hour)
	if _, err := b.store.Retain(ctx, retainOpts(0)); err != nil {
		t.Fatal(err)
	}
	if s, x := b.count(t, "log_segments"), b.hashFrames(t); s != 3 || x != 3 {
		t.Fatalf("retention took %d segments and %d frames with hashes the group has not consumed", 3-s, 3-x)
	}
	if a := cb.ack(t, r.LeaseID, done("t0")); results(a)[0] != model.AckAcked || a.NextOffset != 1 {
		t.Fatalf("an ack by transactionId after retention ran: %+v", a)
	}
	if _, err := b.store.Retain(ctx, retainOpts(0)); err != nil {
		t.Fatal(err)
	}
	if s, x := b.count(t, "log_segments"), b.hashFrames(t); s != 2 || x != 2 {
		t.Fatalf("after the group consumed offset 0: %d segments, %d frames with hashes; want 2 and 2", s, x)
	}
	// Without retainUntil consumed, segments go by age alone; the hashes
	// still wait for the cursor.
	byAge := model.RetainByAge
	if _, _, err := b.store.Configure(ctx, b.queue, model.OptionsPatch{RetainUntil: &byAge}, false); err != nil {
		t.Fatal(err)
	}
	if _, err := b.store.Retain(ctx, retainOpts(0)); err != nil {
		t.Fatal(err)
	}
	if s, x := b.count(t, "log_segments"), b.hashFrames(t); s != 0 || x != 2 {
		t.Fatalf("by age: %d segments, %d frames with hashes; want 0 and 2", s, x)
	}
	// The group's next pop skips what retention deleted, and counts it.
	if r := cb.pop(t, g, 10); len(r.Messages) != 0 {
		t.Fatalf("a pop after retention deleted everything: %v", offsetsOf(r))
	}
	if gp := cb.groupPartition(t); gp.DeletedUnconsumed != 2 {
		t.Fatalf("deletedUnconsumed %d, want 2 (t1 and t2)", gp.DeletedUnconsumed)
	}
}

// Only the partition's running lease acknowledges: not a malformed lease
// id, not after a release, not on a partition never delivered.
func TestOnlyTheRunningLeaseAcknowledges(t *testing.T) {
	t.Parallel()
	b := setupConsumer(t, 3)
	r := b.pop(t, b.group, 2)
	if _, ok, err := b.store.Lease(context.Background(), b.group, b.part.ID, r.LeaseID, 0); !ok || err != nil {
		t.Fatalf("release: %v %v", ok, err)
	}
	for _, lease := range []string{"garbage", r.LeaseID, "00000000-0000-0000-0000-000000000000"} {
		a := b.ack(t, lease, doneAt(0), doneAt(1))
		if !slices.Equal(results(a), []string{model.AckLeaseNotHeld, model.AckLeaseNotHeld}) || a.NextOffset != 0 {
			t.Errorf("lease %q after the release: %+v", lease, a)
		}
	}
	other, err := b.store.EnsurePartition(context.Background(), b.queue, "other")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.store.Push(context.Background(), []model.Frame{newFrame(other.ID, -1, "o0")}); err != nil {
		t.Fatal(err)
	}
	b.pop(t, b.group, 10) // gives every partition a cursor, whichever it leases
	a, err := b.store.Ack(context.Background(), b.group, other.ID, "garbage", []model.Settlement{doneAt(0)})
	if err != nil || results(a)[0] != model.AckLeaseNotHeld {
		t.Fatalf("a malformed lease on another partition: %+v, %v", a, err)
	}
}

// A retried batch that failed a message answers alreadyAcked for it too.
func TestARetriedBatchWithAFailureIsAlreadyAcked(t *testing.T) {
	t.Parallel()
	b := setupConsumer(t, 3)
	r := b.pop(t, b.group, 3)
	batch := []model.Settlement{done("t0"), failed("t1", "no"), done("t2")}
	if a := b.ack(t, r.LeaseID, batch...); !a.LeaseEnded || a.NextOffset != 1 {
		t.Fatalf("first: %+v", a)
	}
	if a := b.ack(t, r.LeaseID, batch...); !slices.Equal(results(a), []string{model.AckAlready, model.AckAlready, model.AckAlready}) {
		t.Fatalf("retried: %v", results(a))
	}
}

// A dead letter made by a pop says how many deliveries the message had.
func TestADeadLetterFromAPopCountsItsDeliveries(t *testing.T) {
	t.Parallel()
	b := setupConsumer(t, 1)
	b.setMaxAttempts(t, 1)
	r := b.pop(t, b.group, 1)
	b.ack(t, r.LeaseID, doneAt(5)) // word from the consumer, settling nothing
	b.backdateLease(t)
	b.pop(t, b.group, 1)
	dlq, err := b.store.Read(context.Background(), model.ReadQuery{Queue: model.DeadLetterQueue(b.queue), Partition: "Default", Max: 10, MaxBytes: 1 << 20})
	if err != nil || len(dlq.Messages) != 1 || !strings.Contains(string(dlq.Messages[0].Data), `"attempts":1`) {
		t.Fatalf("dead letter: %+v, %v", dlq, err)
	}
}

// Only a lease that ran out with messages behind it is listed, and only
// for the groups asked about: a running lease, a group without one and a
// lease taken over by the next pop are not.
func TestRunOutLeasesListsOnlyLeasesThatRanOut(t *testing.T) {
	t.Parallel()
	b := setupConsumer(t, 3)
	other := b.testBundle.group(t, "other")
	ctx := context.Background()
	runOut := func() []model.GroupPartitionID {
		t.Helper()
		got, err := b.store.RunOutLeases(ctx, []int64{b.group.ID, other.ID})
		if err != nil {
			t.Fatal(err)
		}
		return got
	}
	first := b.pop(t, b.group, 10)
	if got := runOut(); len(got) != 0 {
		t.Fatalf("while the lease runs: %v, want none", got)
	}
	b.backdateLease(t)
	want := []model.GroupPartitionID{{GroupID: b.group.ID, PartitionID: first.PartitionID}}
	if got := runOut(); !slices.Equal(got, want) {
		t.Fatalf("after the lease ran out: %v, want %v", got, want)
	}
	if got, err := b.store.RunOutLeases(ctx, []int64{other.ID}); err != nil || len(got) != 0 {
		t.Fatalf("asked about the other group only: %v, %v", got, err)
	}
	again := b.pop(t, b.group, 10)
	if len(again.Messages) != 3 {
		t.Fatalf("the next pop took %d messages, want the 3 of the run-out lease", len(again.Messages))
	}
	if got := runOut(); len(got) != 0 {
		t.Fatalf("once the next pop leased the partition again: %v, want none", got)
	}
}

// cycle pops up to max carrying the ack of items under lease, by the
// store's Cycle: ok false when it did nothing, popped nil when it only
// settled the ack.
func (b *consumerBundle) cycle(t *testing.T, max int, lease string, items []model.Settlement) (a model.SettledBatch, popped *model.PopResult, ok bool) {
	t.Helper()
	r := model.PopQuery{Group: b.group, Max: max, Lease: time.Minute, Consumer: "c", MaxBytes: 1 << 20, Room: 1 << 20}
	if a, popped, ok := b.tailCycle(t, r, lease, items); ok {
		return a, popped, ok
	}
	a, popped, ok, err := b.store.Cycle(context.Background(), r, b.part.ID, lease, items)
	if err != nil {
		t.Fatal(err)
	}
	return a, popped, ok
}
