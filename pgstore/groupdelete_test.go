package pgstore_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/queengate/queengate/internal/pgtest"
	"github.com/queengate/queengate/model"
	"github.com/queengate/queengate/pgstore"
)

// groupRows counts what is left of group id: its row, cursors and marks.
func (b *testBundle) groupRows(t *testing.T, id int64) (groups, cursors, marks int) {
	t.Helper()
	if err := b.store.Pool().QueryRow(context.Background(), `SELECT
		(SELECT count(*) FROM queen.consumer_groups WHERE id = $1),
		(SELECT count(*) FROM queen.consumer_cursors WHERE group_id = $1),
		(SELECT count(*) FROM queen.consumer_marks WHERE group_id = $1)`, id).Scan(&groups, &cursors, &marks); err != nil {
		t.Fatal(err)
	}
	return
}

// setupRetainUntilConsumed is a queue in a database of its own (a
// retention pass sweeps every partition) that keeps messages 10 s and
// until every group consumed them, with a window of 60 s.
func setupRetainUntilConsumed(t *testing.T) *testBundle {
	t.Helper()
	b := setupIn(t, pgtest.NewDB(t))
	return setupRetainUntilConsumedOf(t, b.store, b.queue)
}

// setupRetainUntilConsumedOf configures queue as setupRetainUntilConsumed
// does, with its partition Default.
func setupRetainUntilConsumedOf(t *testing.T, st *pgstore.Store, queue string) *testBundle {
	t.Helper()
	until := model.RetainUntilConsumed
	if _, _, err := st.Configure(context.Background(), queue, model.OptionsPatch{RetentionSeconds: ptr(10),
		RetainUntil: &until, DedupWindowSeconds: ptr(60)}, false); err != nil {
		t.Fatal(err)
	}
	p, err := st.EnsurePartition(context.Background(), queue, "Default")
	if err != nil {
		t.Fatal(err)
	}
	return &testBundle{store: st, queue: queue, part: p}
}

// Deleting a group releases what it held from retention: with
// retainUntil consumed, the segments and frames with hashes only it had not
// consumed go at the next pass; its answer says what it released.
func TestDeletingAGroupReleasesItsRetentionHold(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setupRetainUntilConsumed(t)
	for i := range 5 {
		b.push(t, -1, fmt.Sprintf("t%d", i))
	}
	keep := &consumerBundle{testBundle: b, group: b.group(t, "keep")}
	r := keep.pop(t, keep.group, 5)
	keep.ack(t, r.LeaseID, doneAt(0), doneAt(1), doneAt(2), doneAt(3), doneAt(4))
	gone := &consumerBundle{testBundle: b, group: b.group(t, "gone")}
	r = gone.pop(t, gone.group, 3) // its lease still runs after these acks
	gone.ack(t, r.LeaseID, doneAt(0), doneAt(2))
	b.age(t, 0, time.Hour)
	if _, err := b.store.Retain(ctx, retainOpts(0)); err != nil {
		t.Fatal(err)
	}
	if s, x := b.count(t, "log_segments"), b.hashFrames(t); s != 4 || x != 4 {
		t.Fatalf("before the delete: %d segments, %d frames with hashes; want 4 and 4 (held from the cursor of gone at 1)", s, x)
	}

	d, err := b.store.DeleteGroup(ctx, b.queue, "gone")
	if err != nil {
		t.Fatal(err)
	}
	// Offsets 1, 3 and 4 unconsumed (2 completed out of order), one lease.
	if d.ID != gone.group.ID || d.Partitions != 1 || d.Unconsumed != 3 || d.LeasesEnded != 1 {
		t.Fatalf("delete answered %+v; want id %d, 1 partition, 3 unconsumed, 1 lease ended", d, gone.group.ID)
	}
	if g, c, m := b.groupRows(t, gone.group.ID); g+c+m != 0 {
		t.Fatalf("left of the deleted group: %d group rows, %d cursors, %d marks", g, c, m)
	}
	if _, err := b.store.Retain(ctx, retainOpts(0)); err != nil {
		t.Fatal(err)
	}
	if s, x := b.count(t, "log_segments"), b.hashFrames(t); s != 0 || x != 0 {
		t.Fatalf("after the delete: %d segments, %d frames with hashes; want none (only the deleted group held them)", s, x)
	}
}

// After its delete, a group's pops, acks and leases fail with
// ErrGroupNotFound (never an empty answer, never a row made again);
// made again by name it is a new group, from the earliest offset.
func TestADeletedGroupIsGoneAndMadeAfreshByName(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setupConsumer(t, 3)
	old := b.group
	r := b.pop(t, old, 1)
	b.ack(t, r.LeaseID, done("t0"))
	r = b.pop(t, old, 1)
	if _, err := b.store.DeleteGroup(ctx, b.queue, "g"); err != nil {
		t.Fatal(err)
	}
	_, err := b.store.Pop(ctx, model.PopQuery{Group: old, Max: 1, Lease: time.Minute, MaxBytes: 1 << 20, Room: 1 << 20})
	if !errors.Is(err, model.ErrGroupNotFound) {
		t.Fatalf("a pop of the deleted group: %v; want ErrGroupNotFound", err)
	}
	if _, err := b.store.Ack(ctx, old, b.part.ID, r.LeaseID, []model.Settlement{done("t1")}); !errors.Is(err, model.ErrGroupNotFound) {
		t.Fatalf("an ack under the deleted group's lease: %v; want ErrGroupNotFound", err)
	}
	if _, _, err := b.store.Lease(ctx, old, b.part.ID, r.LeaseID, time.Minute); !errors.Is(err, model.ErrGroupNotFound) {
		t.Fatalf("a renewal of the deleted group's lease: %v; want ErrGroupNotFound", err)
	}
	if g, c, m := b.groupRows(t, old.ID); g+c+m != 0 {
		t.Fatalf("pops and acks after the delete left %d group rows, %d cursors, %d marks", g, c, m)
	}
	if _, err := b.store.DeleteGroup(ctx, b.queue, "g"); !errors.Is(err, model.ErrGroupNotFound) {
		t.Fatalf("deleting it again: %v; want ErrGroupNotFound", err)
	}
	if _, err := b.store.DeleteGroup(ctx, b.queue+"-none", "g"); !errors.Is(err, model.ErrQueueNotFound) {
		t.Fatalf("deleting a group of an unknown queue: %v; want ErrQueueNotFound", err)
	}

	fresh := b.testBundle.group(t, "g")
	if fresh.ID == old.ID {
		t.Fatalf("made again by name, the group kept its id %d", old.ID)
	}
	if got := offsetsOf(b.pop(t, fresh, 10)); len(got) != 3 || got[0] != 0 {
		t.Fatalf("the group made again pops %v; want 0, 1, 2 (from the earliest offset)", got)
	}
}

// Pops and acks of a group racing its delete, with partitions being
// created meanwhile: each finishes before the delete or fails with
// ErrGroupNotFound, nothing else (no deadlock, no foreign key error), and
// nothing of the group is left.
func TestAGroupDeleteRacingPopsAcksAndNewPartitions(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setupConsumer(t, 100)
	for i := range 3 {
		p, err := b.store.EnsurePartition(ctx, b.queue, fmt.Sprintf("busy%d", i))
		if err != nil {
			t.Fatal(err)
		}
		for j := range 50 {
			if _, err := b.store.Push(ctx, []model.Frame{newFrame(p.ID, -1, fmt.Sprintf("b%d", j))}); err != nil {
				t.Fatal(err)
			}
		}
	}
	// A lease the delete ends: on Default, which the racing pops skip.
	if _, err := b.store.Pop(ctx, model.PopQuery{Group: b.group, PartitionID: b.part.ID, Max: 1, Lease: time.Minute,
		MaxBytes: 1 << 20, Room: 1 << 20}); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	var deletedAt atomic.Bool
	errs := make(chan error, 16)
	consume := func() {
		defer wg.Done()
		for {
			after := deletedAt.Load()
			r, err := b.store.Pop(ctx, model.PopQuery{Group: b.group, Max: 2, Lease: time.Minute, MaxBytes: 1 << 20, Room: 1 << 20})
			if err != nil {
				errs <- err
				return
			}
			if after {
				errs <- fmt.Errorf("a pop begun after the delete answered %d messages and no error", len(r.Messages))
				return
			}
			var items []model.Settlement
			for _, m := range r.Messages {
				items = append(items, doneAt(m.Offset))
			}
			if len(items) == 0 {
				continue
			}
			if _, err := b.store.Ack(ctx, b.group, r.PartitionID, r.LeaseID, items); err != nil {
				errs <- err
				return
			}
		}
	}
	for range 4 {
		wg.Add(1)
		go consume()
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := range 20 {
			if _, err := b.store.EnsurePartition(ctx, b.queue, fmt.Sprintf("p%d", i)); err != nil {
				errs <- fmt.Errorf("creating a partition: %w", err)
				return
			}
		}
	}()
	d, err := b.store.DeleteGroup(ctx, b.queue, "g")
	deletedAt.Store(true)
	if err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if !errors.Is(err, model.ErrGroupNotFound) {
			t.Errorf("racing the delete: %v; want ErrGroupNotFound", err)
		}
	}
	if d.Partitions < 4 || d.LeasesEnded < 1 {
		t.Errorf("the delete answered %+v: it had 4 cursors and a lease at least", d)
	}
	if g, c, m := b.groupRows(t, b.group.ID); g+c+m != 0 {
		t.Fatalf("left of the deleted group: %d group rows, %d cursors, %d marks", g, c, m)
	}
}
