package pgstore_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/queengate/queengate/internal/checkfor"
	"github.com/queengate/queengate/internal/pgtest"
	"github.com/queengate/queengate/model"
	"github.com/queengate/queengate/pgstore"
)

// rowsOf counts what is left of partition pid and group gid in every
// table a queue has rows in.
func rowsOf(t *testing.T, b *testBundle, pid, gid int64) map[string]int {
	t.Helper()
	out := map[string]int{}
	for table, where := range map[string]string{
		"log_partitions": "id = $1", "log_segments": "partition_id = $1", "log_txns": "partition_id = $1",
		"timers": "partition_id = $1", "dropped_partitions": "partition_id = $1",
		"consumer_groups": "id = $2", "consumer_cursors": "group_id = $2", "consumer_marks": "group_id = $2",
	} {
		var n int
		if err := b.store.Pool().QueryRow(context.Background(),
			"SELECT count(*) FROM queen."+table+" WHERE "+where+" AND $1::bigint IS NOT NULL AND $2::bigint IS NOT NULL", pid, gid).Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n > 0 {
			out[table] = n
		}
	}
	return out
}

func (b *testBundle) schedule(t *testing.T, txnID string) {
	t.Helper()
	if _, err := b.store.ScheduleTimer(context.Background(), b.part.ID, txnID, []byte(`{}`), nil, time.Now().Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
}

// A purge deletes the stored messages and the consumers' state about
// them (leases, marks; cursors past them) and cancels pending timers,
// but keeps the transactionIds: a retry within the window answers
// duplicate, and a new message takes the next offset.
func TestPurgeDeletesMessagesKeepsTransactionIds(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c := setupConsumer(t, 3)
	c.push(t, -1, "t3", "t4")
	c.schedule(t, "later")
	r := c.pop(t, c.group, 3)
	c.ack(t, r.LeaseID, doneAt(1))
	txns := c.hashFrames(t)

	p, err := c.store.PurgeQueue(ctx, c.queue, "")
	if err != nil {
		t.Fatal(err)
	}
	want := model.QueuePurged{Partitions: 1, Messages: 5, Bytes: p.Bytes, Groups: 1, LeasesEnded: 1, Unconsumed: 4, Timers: 1}
	if p != want || p.Bytes == 0 {
		t.Fatalf("purge answered %+v; want %+v with bytes", p, want)
	}
	if s, x, tm := c.count(t, "log_segments"), c.hashFrames(t), c.count(t, "timers"); s != 0 || x != txns || tm != 0 {
		t.Fatalf("after the purge: %d segments, %d frames with hashes (want %d), %d timers", s, x, txns, tm)
	}
	if gps, err := c.store.GroupPartitions(ctx, c.part.QueueID); err != nil || len(gps) != 1 || gps[0].DeletedUnconsumed != 4 {
		t.Fatalf("the group after the purge: %+v, %v; want 4 deleted unconsumed", gps, err)
	}
	// The group's position is past the purged messages: nothing to settle.
	if got := c.ack(t, r.LeaseID, doneAt(0)); results(got)[0] != model.AckAlready {
		t.Fatalf("an ack of a purged message answered %v; want %s", results(got), model.AckAlready)
	}
	wantOutcomes(t, c.push(t, -1, "t1", "t5"), model.Outcome{Offset: 1, Duplicate: true}, model.Outcome{Offset: 5})
	if got := offsetsOf(c.pop(t, c.group, 10)); len(got) != 1 || got[0] != 5 {
		t.Fatalf("the group popped offsets %v after the purge; want [5], the message pushed since", got)
	}
	parts, err := c.store.Partitions(ctx, c.part.QueueID)
	if err != nil || len(parts) != 1 || parts[0].StoredBytes == 0 || parts[0].FirstOffset != 5 {
		t.Fatalf("partitions after the purge: %+v, %v; want t5's bytes alone, from offset 5", parts, err)
	}
}

// Purging one partition leaves the others as they were.
func TestPurgeOnePartition(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setup(t)
	b.push(t, -1, "a0", "a1")
	other, err := b.store.EnsurePartition(ctx, b.queue, "other")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.store.Push(ctx, []model.Frame{newFrame(other.ID, -1, "b0")}); err != nil {
		t.Fatal(err)
	}
	p, err := b.store.PurgeQueue(ctx, b.queue, "other")
	if err != nil || p.Partitions != 1 || p.Messages != 1 {
		t.Fatalf("purge of partition other answered %+v, %v; want 1 partition, 1 message", p, err)
	}
	if n := b.count(t, "log_segments"); n != 1 {
		t.Fatalf("partition Default has %d segments after purging other; want its 1", n)
	}
}

// Deleting a queue removes every row of it and answers what it removed;
// the name then makes a new queue with nothing of the old one: the same
// transactionIds are queued again, from offset 0.
func TestDeleteQueueRemovesEverythingAndTheNameStartsAfresh(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c := setupConsumer(t, 3)
	c.schedule(t, "later")
	r := c.pop(t, c.group, 3)
	c.ack(t, r.LeaseID, doneAt(1))

	d, err := c.store.DeleteQueue(ctx, c.queue)
	if err != nil {
		t.Fatal(err)
	}
	if d.QueueID != c.part.QueueID || len(d.PartitionIDs) != 1 || d.PartitionIDs[0] != c.part.ID || d.Messages != 3 ||
		d.Bytes == 0 || d.Groups != 1 || d.LeasesEnded != 1 || d.Timers != 1 {
		t.Fatalf("delete answered %+v; want queue %d, partition %d, 3 messages with bytes, 1 group, 1 lease, 1 timer",
			d, c.part.QueueID, c.part.ID)
	}
	if left := rowsOf(t, c.testBundle, c.part.ID, c.group.ID); len(left) > 0 {
		t.Fatalf("left of the deleted queue: %v", left)
	}
	if _, err := c.store.QueueConfig(ctx, c.queue); !errors.Is(err, model.ErrQueueNotFound) {
		t.Fatalf("the deleted queue's configuration: %v; want ErrQueueNotFound", err)
	}
	if _, err := c.store.Push(ctx, []model.Frame{newFrame(c.part.ID, -1, "t0")}); !errors.Is(err, model.ErrPartitionNotFound) {
		t.Fatalf("a push to the deleted partition's id: %v; want ErrPartitionNotFound", err)
	}
	if _, err := c.store.FindGroup(ctx, c.queue, "g"); !errors.Is(err, model.ErrGroupNotFound) && !errors.Is(err, model.ErrQueueNotFound) {
		t.Fatalf("the deleted queue's group: %v; want not found", err)
	}

	fresh := &testBundle{store: c.store, queue: c.queue}
	if fresh.part, err = c.store.EnsurePartition(ctx, c.queue, "Default"); err != nil {
		t.Fatal(err)
	}
	if fresh.part.ID == c.part.ID || fresh.part.QueueID == c.part.QueueID {
		t.Fatalf("the queue made afresh has ids %+v; want new ones", fresh.part)
	}
	wantOutcomes(t, fresh.push(t, -1, "t0", "t1"), model.Outcome{Offset: 0}, model.Outcome{Offset: 1})
}

func TestDeleteAndPurgeOfWhatDoesNotExist(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setup(t)
	b.push(t, -1, "a0")
	if _, err := b.store.DeleteQueue(ctx, b.queue+"-missing"); !errors.Is(err, model.ErrQueueNotFound) {
		t.Fatalf("delete of a missing queue: %v; want ErrQueueNotFound", err)
	}
	if _, err := b.store.PurgeQueue(ctx, b.queue+"-missing", ""); !errors.Is(err, model.ErrQueueNotFound) {
		t.Fatalf("purge of a missing queue: %v; want ErrQueueNotFound", err)
	}
	if _, err := b.store.PurgeQueue(ctx, b.queue, "missing"); !errors.Is(err, model.ErrNotFound) {
		t.Fatalf("purge of a missing partition: %v; want ErrNotFound", err)
	}
	if n := b.count(t, "log_segments"); n != 1 {
		t.Fatalf("%d segments after refused requests; want 1", n)
	}
}

// A delete whose gateway stopped before deleting the queue's frames
// leaves them listed; a retention pass deletes them once the delete is
// old enough to be abandoned.
func TestRetentionFinishesAnAbandonedDelete(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setupIn(t, pgtest.NewDB(t))
	b.push(t, -1, "a0", "a1")
	if _, err := b.store.Pool().Exec(ctx, "SELECT * FROM queen.queue_delete($1)", b.queue); err != nil {
		t.Fatal(err)
	}
	if s := b.count(t, "log_segments"); s != 1 {
		t.Fatalf("%d segments before the drop; want 1", s)
	}
	if _, err := b.store.Retain(ctx, retainOpts(0)); err != nil {
		t.Fatal(err)
	}
	if s := b.count(t, "log_segments"); s != 1 {
		t.Fatalf("a pass deleted the frames of a delete still running: %d segments left; want 1", s)
	}
	if _, err := b.store.Pool().Exec(ctx, "UPDATE queen.dropped_partitions SET dropped_at = now() - interval '1 hour'"); err != nil {
		t.Fatal(err)
	}
	if _, err := b.store.Retain(ctx, retainOpts(0)); err != nil {
		t.Fatal(err)
	}
	if left := rowsOf(t, b, b.part.ID, 0); len(left) > 0 {
		t.Fatalf("left after the pass: %v", left)
	}
}

// waitingOnLock waits until a statement of the database is waiting for a
// row lock held by another transaction.
func waitingOnLock(t *testing.T, b *testBundle, like string) {
	t.Helper()
	checkfor.Check(t, 30*time.Second, checkfor.Cond("a statement waiting for a lock", func() bool {
		var n int
		err := b.store.Pool().QueryRow(context.Background(), `SELECT count(*) FROM pg_stat_activity
			WHERE wait_event_type = 'Lock' AND query LIKE $1`, like).Scan(&n)
		return err == nil && n > 0
	}))
}

// A partition created while its queue is being deleted waits for the
// delete, then makes the queue afresh: the push that needed it goes to
// the new queue instead of failing.
func TestAPartitionMadeDuringItsQueuesDeleteMakesTheQueueAfresh(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setup(t)
	tx, err := b.store.Pool().Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	if _, err := tx.Exec(ctx, "SELECT * FROM queen.queue_delete($1)", b.queue); err != nil {
		t.Fatal(err)
	}
	type ensured struct {
		parts []model.Partition
		err   error
	}
	got := make(chan ensured, 1)
	go func() {
		parts, _, err := b.store.EnsurePartitions(ctx, []string{b.queue}, []string{"made-meanwhile"})
		got <- ensured{parts, err}
	}()
	waitingOnLock(t, b, "%ensure_partitions%")
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	e := <-got
	if e.err != nil || len(e.parts) != 1 || e.parts[0].ID == 0 || e.parts[0].QueueID == b.part.QueueID {
		t.Fatalf("ensure during the delete: %+v, %v; want a partition of a new queue (the old was %d)", e.parts, e.err, b.part.QueueID)
	}
}

// Timers of a deleted queue never fire, even when they are due: a fire
// after the delete finds none, and the queue made afresh by its name gets
// nothing from them.
func TestTimersOfADeletedQueueNeverFire(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setupIn(t, pgtest.NewDB(t)) // a fire takes every due timer of the database
	b.schedule(t, "due-1")
	b.schedule(t, "due-2")
	if _, err := b.store.Pool().Exec(ctx, "UPDATE queen.timers SET fire_at = now() - interval '1 minute'"); err != nil {
		t.Fatal(err)
	}
	if d, err := b.store.DeleteQueue(ctx, b.queue); err != nil || d.Timers != 2 {
		t.Fatalf("delete: %+v, %v; want 2 timers", d, err)
	}
	fired, err := b.store.FireDue(ctx, 100, nil)
	if err != nil || len(fired) != 0 {
		t.Fatalf("a fire after the delete: %+v, %v; want none", fired, err)
	}
	fresh, err := b.store.EnsurePartition(ctx, b.queue, "Default")
	if err != nil {
		t.Fatal(err)
	}
	if p, err := b.store.Partitions(ctx, fresh.QueueID); err != nil || len(p) != 1 || p[0].LastOffset != -1 {
		t.Fatalf("the queue made afresh: %+v, %v; want one empty partition", p, err)
	}
}

// frames writes n one-message frames to b's partition straight in SQL
// (faster than n pushes), as pushes would have: offsets 0..n-1.
func (b *testBundle) frames(t *testing.T, n int) {
	t.Helper()
	ctx := context.Background()
	for _, q := range []string{
		`INSERT INTO queen.log_segments (partition_id, base_offset, end_offset, created_at, txn_ids, data, data_bytes)
		 SELECT $1, g, g, now(), ARRAY['f' || g], ARRAY['{}'::json], 2 FROM generate_series(0, $2 - 1) AS g`,
		`INSERT INTO queen.log_txns (partition_id, base_offset, end_offset, created_at, hashes)
		 SELECT $1, g, g, now(), ARRAY[gen_random_uuid()] FROM generate_series(0, $2 - 1) AS g`,
		`UPDATE queen.log_partitions SET last_offset = $2 - 1, stored_bytes = 2 * $2 WHERE id = $1`,
	} {
		if _, err := b.store.Pool().Exec(ctx, q, b.part.ID, n); err != nil {
			t.Fatal(err)
		}
	}
}

// A purge and a delete of more frames than one step deletes take several
// steps, and answer for all of them.
func TestPurgeAndDeleteOfMoreFramesThanOneStep(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setup(t)
	b.frames(t, pgstore.DropStep+5)
	p, err := b.store.PurgeQueue(ctx, b.queue, "")
	if err != nil || p.Messages != int64(pgstore.DropStep+5) || p.Bytes != int64(2*(pgstore.DropStep+5)) {
		t.Fatalf("purge: %+v, %v; want %d messages", p, err, pgstore.DropStep+5)
	}
	if s := b.count(t, "log_segments"); s != 0 {
		t.Fatalf("%d segments left by the purge", s)
	}
	d, err := b.store.DeleteQueue(ctx, b.queue)
	if err != nil || d.Messages != 0 {
		t.Fatalf("delete: %+v, %v; want nothing stored", d, err)
	}
	if left := rowsOf(t, b, b.part.ID, 0); len(left) > 0 {
		t.Fatalf("left of the deleted queue: %v (its frames with hashes are more than one step)", left)
	}

	b = setup(t)
	b.frames(t, pgstore.DropStep+5)
	if d, err := b.store.DeleteQueue(ctx, b.queue); err != nil || d.Messages != int64(pgstore.DropStep+5) {
		t.Fatalf("delete: %+v, %v; want %d messages", d, err, pgstore.DropStep+5)
	}
	if left := rowsOf(t, b, b.part.ID, 0); len(left) > 0 {
		t.Fatalf("left of the deleted queue: %v", left)
	}
}
