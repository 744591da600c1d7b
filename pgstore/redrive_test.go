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
)

// deadLetterAll pops the test partition's n messages as group g and
// fails them all at maxAttempts 1: n dead letters.
func (b *consumerBundle) deadLetterAll(t *testing.T, n int) {
	t.Helper()
	b.setMaxAttempts(t, 1)
	r := b.pop(t, b.group, n)
	var items []model.Settlement
	for _, d := range r.Messages {
		items = append(items, model.Settlement{Offset: d.Offset, Error: "boom"})
	}
	if a := b.ack(t, r.LeaseID, items...); a.DeadLettered != n {
		t.Fatalf("dead-lettered %d of %d", a.DeadLettered, n)
	}
}

func (b *consumerBundle) redrive(t *testing.T, f model.DeadLetterFilter, limit int) model.Redriven {
	t.Helper()
	r, err := b.store.Redrive(context.Background(), b.queue, "Default", f, limit)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// readTxnIDs reads the test partition from offset from: transactionIds
// and data.
func (b *consumerBundle) readFrom(t *testing.T, from int64) []model.LogMessage {
	t.Helper()
	r, err := b.store.Read(context.Background(), model.ReadQuery{Queue: b.queue, Partition: "Default", From: from, Max: 100, MaxBytes: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	return r.Messages
}

// A redrive interrupted by a failure inside PostgreSQL, after it pushed
// the messages back and before it consumed the dead letters, leaves
// nothing; retried, it puts each dead letter back once, under its
// original transactionId and data; retried again, it moves nothing; and
// the group that dead-lettered them consumes them again.
func TestARedriveMovesEachDeadLetterOnceThroughFailuresAndRetries(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setupConsumer(t, 3)
	orig := b.readFrom(t, 0)
	b.deadLetterAll(t, 3)
	if p, _, _, err := b.store.DeadLetters(ctx, b.queue, "Default", model.DeadLetterFilter{}, 10); err != nil || len(p) != 3 {
		t.Fatalf("%d pending dead letters (%v), want 3", len(p), err)
	}
	// The group the redrive would make, made first to aim the fault at it.
	g, err := b.store.EnsureGroup(ctx, model.DeadLetterQueue(b.queue), model.RedriveGroup)
	if err != nil {
		t.Fatal(err)
	}
	// The fault: recording the redriven dead letters fails, after the push.
	fn, trig := fmt.Sprintf("queen.fail_redrive_%d", g.ID), fmt.Sprintf("fail_redrive_%d", g.ID)
	pool := b.store.Pool()
	for _, q := range []string{
		`CREATE FUNCTION ` + fn + `() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN RAISE EXCEPTION 'injected fault'; END $$`,
		fmt.Sprintf(`CREATE TRIGGER %s BEFORE INSERT ON queen.consumer_marks FOR EACH ROW WHEN (NEW.group_id = %d) EXECUTE FUNCTION %s()`, trig, g.ID, fn),
	} {
		if _, err := pool.Exec(ctx, q); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := b.store.Redrive(ctx, b.queue, "Default", model.DeadLetterFilter{}, 10); err == nil {
		t.Fatal("the redrive succeeded through the fault")
	}
	if last := b.lastOffsetOf(t, b.queue); last != 2 {
		t.Fatalf("the failed redrive left the partition at offset %d, want 2", last)
	}
	if _, err := pool.Exec(ctx, "DROP TRIGGER "+trig+" ON queen.consumer_marks; DROP FUNCTION "+fn+"()"); err != nil {
		t.Fatal(err)
	}

	if r := b.redrive(t, model.DeadLetterFilter{}, 10); r.Moved != 3 || r.FirstOffset != 3 || r.LastOffset != 5 || r.More || r.Skipped != 0 {
		t.Fatalf("retried redrive: %+v, want 3 moved to offsets 3..5", r)
	}
	back := b.readFrom(t, 3)
	if len(back) != 3 {
		t.Fatalf("%d messages after the redrive, want 3", len(back))
	}
	for i, m := range back {
		if m.TxnID != orig[i].TxnID || string(m.Data) != string(orig[i].Data) {
			t.Errorf("redriven %d: %q %s, want %q %s", i, m.TxnID, m.Data, orig[i].TxnID, orig[i].Data)
		}
	}
	if r := b.redrive(t, model.DeadLetterFilter{}, 10); r.Moved != 0 || b.lastOffsetOf(t, b.queue) != 5 {
		t.Fatalf("a second redrive moved %d (partition at %d)", r.Moved, b.lastOffsetOf(t, b.queue))
	}
	if p, _, _, _ := b.store.DeadLetters(ctx, b.queue, "Default", model.DeadLetterFilter{}, 10); len(p) != 0 {
		t.Fatalf("%d dead letters still listed after the redrive", len(p))
	}
	b.setMaxAttempts(t, 5)
	r := b.pop(t, b.group, 10)
	if len(r.Messages) != 3 || r.Messages[0].Offset != 3 || r.Messages[0].TxnID != "t0" {
		t.Fatalf("the group got %d messages back (%+v), want offsets 3..5", len(r.Messages), r.Messages)
	}
}

// Filters select by group, original offset range and count; what they
// leave stays for a later redrive.
func TestARedriveMovesWhatItsFilterSelects(t *testing.T) {
	t.Parallel()
	b := setupConsumer(t, 4)
	b.deadLetterAll(t, 4)
	one, two := int64(1), int64(2)
	if r := b.redrive(t, model.DeadLetterFilter{Group: "other"}, 10); r.Moved != 0 {
		t.Fatalf("another group's filter moved %d", r.Moved)
	}
	if r := b.redrive(t, model.DeadLetterFilter{FromOffset: &one, ToOffset: &two}, 10); r.Moved != 2 {
		t.Fatalf("offsets 1..2 moved %d", r.Moved)
	}
	if back := b.readFrom(t, 4); len(back) != 2 || back[0].TxnID != "t1" || back[1].TxnID != "t2" {
		t.Fatalf("offsets 1..2 redriven as %+v", back)
	}
	if r := b.redrive(t, model.DeadLetterFilter{Group: b.group.Name}, 1); r.Moved != 1 || !r.More {
		t.Fatalf("limit 1: %+v, want 1 moved and more", r)
	}
	if r := b.redrive(t, model.DeadLetterFilter{}, 10); r.Moved != 1 || r.More {
		t.Fatalf("the rest: %+v, want 1 moved", r)
	}
	back := b.readFrom(t, 4)
	var ids []string
	for _, m := range back {
		ids = append(ids, m.TxnID)
	}
	if fmt.Sprint(ids) != "[t1 t2 t0 t3]" {
		t.Fatalf("redriven in order %v, want [t1 t2 t0 t3]", ids)
	}
}

// Redrives racing on one partition move each dead letter once between
// them: each takes the redrive cursor's row and moves what no committed
// redrive consumed.
func TestRacingRedrivesMoveEachDeadLetterOnce(t *testing.T) {
	t.Parallel()
	const n = 20
	b := setupConsumer(t, n)
	b.deadLetterAll(t, n)
	var wg sync.WaitGroup
	moved := make([]int, 4)
	errs := make([]error, 4)
	for i := range moved {
		wg.Go(func() {
			r, err := b.store.Redrive(context.Background(), b.queue, "Default", model.DeadLetterFilter{}, 7)
			moved[i], errs[i] = r.Moved, err
		})
	}
	wg.Wait()
	total := 0
	for i := range moved {
		if errs[i] != nil {
			t.Fatal(errs[i])
		}
		total += moved[i]
	}
	for total < n {
		r := b.redrive(t, model.DeadLetterFilter{}, 7)
		if r.Moved == 0 {
			t.Fatalf("%d moved, then nothing more", total)
		}
		total += r.Moved
	}
	if last := b.lastOffsetOf(t, b.queue); total != n || last != 2*n-1 {
		t.Fatalf("%d moved, partition at offset %d: want %d moved, at %d", total, last, n, 2*n-1)
	}
	seen := map[string]int{}
	for _, m := range b.readFrom(t, n) {
		seen[m.TxnID]++
	}
	for i := range n {
		if id := fmt.Sprintf("t%d", i); seen[id] != 1 {
			t.Errorf("%s redriven %d times", id, seen[id])
		}
	}
}

// A list before any redrive shows every dead letter and makes no group
// on the dead-letter queue (which would hold its retention).
func TestAListMakesNoRedriveGroup(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setupConsumer(t, 2)
	b.deadLetterAll(t, 2)
	if p, _, _, err := b.store.DeadLetters(ctx, b.queue, "Default", model.DeadLetterFilter{}, 10); err != nil || len(p) != 2 || p[1].Letter.TxnID != "t1" {
		t.Fatalf("list: %+v, %v", p, err)
	}
	if _, err := b.store.FindGroup(ctx, model.DeadLetterQueue(b.queue), model.RedriveGroup); !errors.Is(err, model.ErrGroupNotFound) {
		t.Fatalf("after a list, the redrive group: %v, want none", err)
	}
}

// A message two groups dead-lettered, redriven in one request: both dead
// letters are consumed, and the message is back once (the queue has a
// window: a repeat within one push is written once).
func TestTwoGroupsDeadLettersOfOneMessageRedriveItOnce(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setupConsumer(t, 1)
	h, err := b.store.EnsureGroup(ctx, b.queue, "h")
	if err != nil {
		t.Fatal(err)
	}
	b.deadLetterAll(t, 1)
	r := b.pop(t, h, 1)
	if a, err := b.store.Ack(ctx, h, b.part.ID, r.LeaseID, []model.Settlement{{Offset: 0, Error: "boom"}}); err != nil || a.DeadLettered != 1 {
		t.Fatalf("h's ack: %+v, %v", a, err)
	}
	if got := b.redrive(t, model.DeadLetterFilter{}, 10); got.Moved != 2 || got.FirstOffset != 1 || got.LastOffset != 1 {
		t.Fatalf("redrive: %+v, want 2 dead letters moved as one message at offset 1", got)
	}
	if back := b.readFrom(t, 1); len(back) != 1 || back[0].TxnID != "t0" {
		t.Fatalf("back: %+v", back)
	}
}

// With retainUntil consumed on the dead-letter queue, the redrive group
// holds what it has not moved: a pass after a redrive of one keeps the
// others for the next redrive, and once that moved them all, the pass
// deletes them.
func TestTheRedriveGroupHoldsTheDeadLetterQueuesRetention(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := &consumerBundle{testBundle: setupIn(t, pgtest.NewDB(t))}
	b.push(t, -1, "t0", "t1", "t2")
	b.group = b.testBundle.group(t, "g")
	b.deadLetterAll(t, 3)
	dlq := setupRetainUntilConsumedOf(t, b.store, model.DeadLetterQueue(b.queue))
	if r := b.redrive(t, model.DeadLetterFilter{}, 1); r.Moved != 1 || !r.More {
		t.Fatalf("redrive of one: %+v", r)
	}
	pass := func() {
		t.Helper()
		dlq.age(t, 0, time.Hour)
		if _, err := b.store.Retain(ctx, retainOpts(0)); err != nil {
			t.Fatal(err)
		}
	}
	pass()
	if p, _, _, err := b.store.DeadLetters(ctx, b.queue, "Default", model.DeadLetterFilter{}, 10); err != nil || len(p) != 2 {
		t.Fatalf("after a pass, %d dead letters pending (%v), want the 2 not redriven", len(p), err)
	}
	if r := b.redrive(t, model.DeadLetterFilter{}, 10); r.Moved != 2 {
		t.Fatalf("the rest after the pass: %+v, want 2 moved", r)
	}
	pass()
	if s := dlq.count(t, "log_segments"); s != 0 {
		t.Fatalf("%d dead-letter segments after every dead letter was redriven, want none", s)
	}
}
