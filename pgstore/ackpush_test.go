package pgstore_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/queengate/queengate/model"
)

// derivedOf is one derived message per delivery of r, to queue out:
// transactionId "d-" + the input's.
func derivedOf(r model.PopResult, out string) []model.Derived {
	var ds []model.Derived
	for _, m := range r.Messages {
		ds = append(ds, model.Derived{Queue: out, Partition: "o", TxnID: "d-" + m.TxnID, Data: []byte(`{"from":"` + m.TxnID + `"}`)})
	}
	return ds
}

func completedAll(r model.PopResult) []model.Settlement {
	var items []model.Settlement
	for _, m := range r.Messages {
		items = append(items, doneAt(m.Offset))
	}
	return items
}

// An ack-and-push that fails inside PostgreSQL after its ack ran (the
// derived messages' insert raises) commits nothing: the items stay
// unsettled under the lease and no derived message is stored. Once the
// fault is gone the same request does both.
func TestAckAndPushFailingInsidePostgreSQLSettlesNothing(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setupConsumer(t, 3)
	out := b.queue + "-out"
	target, err := b.store.EnsurePartition(ctx, out, "o")
	if err != nil {
		t.Fatal(err)
	}
	fn, trig := fmt.Sprintf("queen.fail_ackpush_%d", target.ID), fmt.Sprintf("fail_ackpush_%d", target.ID)
	pool := b.store.Pool()
	for _, q := range []string{
		`CREATE FUNCTION ` + fn + `() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN RAISE EXCEPTION 'injected fault'; END $$`,
		fmt.Sprintf(`CREATE TRIGGER %s BEFORE INSERT ON queen.log_segments FOR EACH ROW WHEN (NEW.partition_id = %d) EXECUTE FUNCTION %s()`,
			trig, target.ID, fn),
	} {
		if _, err := pool.Exec(ctx, q); err != nil {
			t.Fatal(err)
		}
	}
	r := b.pop(t, b.group, 10)
	if _, err := b.store.AckAndPush(ctx, b.group, b.part.ID, r.LeaseID, completedAll(r), derivedOf(r, out)); err == nil {
		t.Fatal("the ack-and-push succeeded through the fault")
	}
	if n := b.lastOffsetOf(t, out); n != -1 {
		t.Errorf("the target's allocator is at %d after the failed ack-and-push, want -1 (nothing stored)", n)
	}
	if _, err := pool.Exec(ctx, fmt.Sprintf("DROP TRIGGER %s ON queen.log_segments; DROP FUNCTION %s()", trig, fn)); err != nil {
		t.Fatal(err)
	}
	res, err := b.store.AckAndPush(ctx, b.group, b.part.ID, r.LeaseID, completedAll(r), derivedOf(r, out))
	if err != nil || !res.Ack.LeaseEnded || res.Ack.NextOffset != 3 {
		t.Fatalf("the ack-and-push after the fault: %+v, %v; want the lease's items acked, still held", res, err)
	}
	for i, p := range res.Pushed {
		if res.Ack.Items[i].Result != model.AckAcked || p.Duplicate || p.Offset != int64(i) || p.PartitionID != target.ID {
			t.Errorf("item %d: %+v, pushed %+v", i, res.Ack.Items[i], p)
		}
	}
}

// Concurrent copies of one ack-and-push (a retry racing the original)
// settle each item once and store each derived message once: one copy
// answers acked and queued, every other alreadyAcked and duplicate of
// the same offsets.
func TestConcurrentCopiesOfAnAckAndPushStoreOnce(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setupConsumer(t, 5)
	out := b.queue + "-out"
	r := b.pop(t, b.group, 10)
	const copies = 6
	results := make([]model.AckPushResult, copies)
	errs := make([]error, copies)
	var wg sync.WaitGroup
	for i := range copies {
		wg.Go(func() {
			results[i], errs[i] = b.store.AckAndPush(ctx, b.group, b.part.ID, r.LeaseID, completedAll(r), derivedOf(r, out))
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	first := -1
	for i, res := range results {
		if res.Ack.Items[0].Result == model.AckAcked {
			if first >= 0 {
				t.Fatalf("copies %d and %d both acked", first, i)
			}
			first = i
		}
	}
	if first < 0 {
		t.Fatal("no copy acked the items")
	}
	for i, res := range results {
		for k, p := range res.Pushed {
			want, dup := model.AckAlready, true
			if i == first {
				want, dup = model.AckAcked, false
			}
			if res.Ack.Items[k].Result != want || p.Duplicate != dup || p.Offset != results[first].Pushed[k].Offset {
				t.Errorf("copy %d, item %d: %s, pushed %+v; want %s, duplicate %v, at %d", i, k, res.Ack.Items[k].Result, p, want, dup,
					results[first].Pushed[k].Offset)
			}
		}
	}
	if n := b.lastOffsetOf(t, out); n != 4 {
		t.Errorf("the target's allocator is at %d, want 4: each derived message stored once", n)
	}
}

// In a queue whose onConflict is flag, a derived message that repeats a
// stored transactionId with other data is a duplicate flagged as a
// conflict, as a push's would be; with the same data, or a repeat of an
// earlier message of the same request with the same data, it is not.
func TestAckAndPushFlagsPayloadConflictsAsAPush(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setupConsumer(t, 3) // t0..t2, data {"i":<i>,"id":"t<i>"}
	flag := model.ConflictFlag
	if _, _, err := b.store.Configure(ctx, b.queue, model.OptionsPatch{OnConflict: &flag}, false); err != nil {
		t.Fatal(err)
	}
	r := b.pop(t, b.group, 1)
	to := func(id, data string) model.Derived {
		return model.Derived{Queue: b.queue, Partition: "Default", TxnID: id, Data: []byte(data)}
	}
	res, err := b.store.AckAndPush(ctx, b.group, b.part.ID, r.LeaseID, completedAll(r), []model.Derived{
		to("t1", `{"i":1,"id":"t1"}`), to("t2", `{"other":true}`), to("new", `1`), to("new", `1`), to("new", `2`)})
	if err != nil {
		t.Fatal(err)
	}
	want := []model.DerivedOutcome{{Offset: 1, Duplicate: true}, {Offset: 2, Duplicate: true, Conflict: true}, {Offset: 3},
		{Offset: 3, Duplicate: true}, {Offset: 3, Duplicate: true, Conflict: true}}
	for i, w := range want {
		w.PartitionID = b.part.ID
		if res.Pushed[i] != w {
			t.Errorf("derived %d: %+v, want %+v", i, res.Pushed[i], w)
		}
	}
}

// A late ack-and-push of a message its group dead-lettered meanwhile is
// refused (item deadLettered, as an ack answers it): nothing is pushed.
func TestAckAndPushOfADeadLetteredMessageIsRefused(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setupConsumer(t, 1)
	b.setMaxAttempts(t, 1)
	r := b.pop(t, b.group, 1)
	if a := b.ack(t, r.LeaseID, model.Settlement{Offset: 0, Error: "boom"}); a.DeadLettered != 1 {
		t.Fatalf("dead-lettered %d, want 1", a.DeadLettered)
	}
	out := b.queue + "-out"
	_, err := b.store.AckAndPush(ctx, b.group, b.part.ID, r.LeaseID, completedAll(r), derivedOf(r, out))
	if !errors.Is(err, model.ErrNotCommitted) || !strings.Contains(err.Error(), "item 0 answered deadLettered") {
		t.Fatalf("the late ack-and-push: %v, want it refused as deadLettered", err)
	}
	if n := b.lastOffsetOf(t, out); n != -1 {
		t.Errorf("the target's allocator is at %d, want -1 (nothing pushed)", n)
	}
}
