package pgstore_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/queengate/queengate/internal/pgtest"
	"github.com/queengate/queengate/model"
)

// age moves the partition's frames from fromOffset on back by by.
func (b *testBundle) age(t *testing.T, fromOffset int64, by time.Duration) {
	t.Helper()
	pgtest.AgeFrames(t, b.store.Pool(), by, "partition_id = $1 AND base_offset >= $2", b.part.ID, fromOffset)
}

func (b *testBundle) txnsStart(t *testing.T) int64 {
	t.Helper()
	var v int64
	if err := b.store.Pool().QueryRow(context.Background(),
		"SELECT txns_start FROM queen.log_partitions WHERE id = $1", b.part.ID).Scan(&v); err != nil {
		t.Fatal(err)
	}
	return v
}

func retainOpts(slack time.Duration) model.RetainOptions {
	o := model.DefaultRetainOptions()
	o.Slack = slack
	return o
}

// TestRetentionPurgesOldTxnsAndKeepsTheWindow: rows wholly older than the
// window plus slack go and txns_start rises past them; a retry of a purged
// id is new, a retry inside the window after the purge is still a
// duplicate of its original.
func TestRetentionPurgesOldTxnsAndKeepsTheWindow(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setupIn(t, pgtest.NewDB(t))
	b.setWindow(t, 60)
	b.push(t, -1, "old-1", "old-2") // 0, 1
	b.push(t, -1, "old-3")          // 2
	b.push(t, -1, "recent")         // 3
	b.age(t, 0, 0)
	pgtest.AgeFrames(t, b.store.Pool(), 90*time.Second, "partition_id = $1 AND end_offset < 3", b.part.ID)

	st, err := b.store.Retain(ctx, retainOpts(20*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	if st.TxnsDeleted != 2 {
		t.Errorf("retention deleted %d frames with hashes, want 2 (%+v)", st.TxnsDeleted, st)
	}
	if n := b.hashFrames(t); n != 1 {
		t.Errorf("%d frames with hashes left, want 1 (the recent push)", n)
	}
	if got := b.txnsStart(t); got != 3 {
		t.Errorf("txns_start = %d, want 3: the first offset still covered", got)
	}
	if n := b.count(t, "log_segments"); n != 3 {
		t.Errorf("%d segments left, want all 3: retentionSeconds is 0", n)
	}

	res := b.push(t, -1, "old-2", "recent")
	wantOutcomes(t, res, queued(4), dup(3))

	// Retired for good: after the window grows back over the frames
	// below txns_start (their hashes still beside their data), neither a
	// full probe nor a candidate named there finds them.
	b.setWindow(t, 3600)
	wantOutcomes(t, b.push(t, -1, "old-1"), queued(5))
	r, err := b.store.Push(ctx, []model.Frame{narrowed(b.part.ID, 5, []model.Candidate{{Index: 0, Offset: 2}}, "old-3")})
	if err != nil {
		t.Fatal(err)
	}
	wantOutcomes(t, r[0], queued(6))
}

// TestRetentionKeepsTxnsOfARowStillInTheWindow: the purge is a prefix,
// so an out-of-order created_at (a push whose clock read came late) never
// lets a still-needed row go.
func TestRetentionKeepsTxnsOfARowStillInTheWindow(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setupIn(t, pgtest.NewDB(t))
	b.setWindow(t, 60)
	b.push(t, -1, "a") // 0: in the window
	b.push(t, -1, "b") // 1: made old
	pgtest.AgeFrames(t, b.store.Pool(), 300*time.Second, "partition_id = $1 AND end_offset = 1", b.part.ID)
	if _, err := b.store.Retain(ctx, retainOpts(0)); err != nil {
		t.Fatal(err)
	}
	if n := b.hashFrames(t); n != 2 || b.txnsStart(t) != 0 {
		t.Errorf("%d frames with hashes, txns_start %d; want both kept, 0", n, b.txnsStart(t))
	}
	wantOutcomes(t, b.push(t, -1, "a"), dup(0))
}

// TestSegmentRetentionNeverTakesTheWindowsTxns: retentionSeconds shorter
// than the window deletes messages, not the hashes the window still needs.
func TestSegmentRetentionNeverTakesTheWindowsTxns(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setupIn(t, pgtest.NewDB(t))
	if _, _, err := b.store.Configure(ctx, b.queue, model.OptionsPatch{RetentionSeconds: ptr(10)}, false); err != nil {
		t.Fatal(err)
	}
	b.push(t, -1, "m0")
	b.push(t, -1, "m1")
	b.push(t, -1, "m2")
	if _, err := b.store.Pool().Exec(ctx,
		"UPDATE queen.log_segments SET created_at = created_at - interval '30 seconds' WHERE partition_id = $1 AND base_offset < 2",
		b.part.ID); err != nil {
		t.Fatal(err)
	}
	st, err := b.store.Retain(ctx, retainOpts(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	if st.SegmentsDeleted != 2 {
		t.Errorf("deleted %d segments, want 2 (%+v)", st.SegmentsDeleted, st)
	}
	if n := b.count(t, "log_segments"); n != 1 {
		t.Errorf("%d segments left, want 1", n)
	}
	if n := b.hashFrames(t); n != 3 {
		t.Errorf("%d frames with hashes left, want 3: the window needs them", n)
	}
	wantOutcomes(t, b.push(t, -1, "m0"), dup(0))
}

// TestRetentionSkipsAPartitionAnotherHolds: SKIP LOCKED, not a wait; the
// next pass does the work.
func TestRetentionSkipsAPartitionAnotherHolds(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setupIn(t, pgtest.NewDB(t))
	b.setWindow(t, 0)
	b.push(t, -1, "x")
	b.age(t, 0, 10*time.Second)

	tx, err := b.store.Pool().Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(ctx, "SELECT 1 FROM queen.log_partitions WHERE id = $1 FOR UPDATE", b.part.ID); err != nil {
		t.Fatal(err)
	}
	st, err := b.store.Retain(ctx, retainOpts(time.Second))
	if err != nil {
		t.Fatal(err)
	}
	if st.Skipped != 1 || b.hashFrames(t) != 1 {
		t.Errorf("while held: %+v, %d rows; want the partition skipped, its row kept", st, b.hashFrames(t))
	}
	if err := tx.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := b.store.Retain(ctx, retainOpts(time.Second)); err != nil {
		t.Fatal(err)
	}
	if n := b.hashFrames(t); n != 0 || b.txnsStart(t) != 1 {
		t.Errorf("after release: %d rows, txns_start %d; want 0 rows, 1", n, b.txnsStart(t))
	}
}

// TestRetentionBoundsEachStep: a partition with more old rows than a step
// may delete is finished by further steps of the same pass.
func TestRetentionBoundsEachStep(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setupIn(t, pgtest.NewDB(t))
	b.setWindow(t, 0)
	for i := range 25 {
		b.push(t, -1, fmt.Sprint("r", i))
	}
	b.age(t, 0, time.Minute)
	o := retainOpts(time.Second)
	o.MaxRowsPerPartition = 4
	if _, err := b.store.Retain(ctx, o); err != nil {
		t.Fatal(err)
	}
	if n := b.hashFrames(t); n != 0 || b.txnsStart(t) != 25 {
		t.Errorf("%d rows left, txns_start %d; want 0 and 25", n, b.txnsStart(t))
	}
}

// TestRetentionConcurrentWithPushesIsExact: two retention loops (two
// gateways) and four pushers on the same partitions, with a 1 s window so
// rows age out while they run. Nothing deadlocks or fails; no id is stored
// twice within the window; every duplicate names a stored message of the
// same id; no hashes of a message still in the window are gone.
func TestRetentionConcurrentWithPushesIsExact(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	st := pgtest.Store(t, pgtest.NewDB(t))
	queue := pgtest.UniqueName(t)
	if _, _, err := st.Configure(ctx, queue, model.OptionsPatch{DedupWindowSeconds: ptr(1)}, false); err != nil {
		t.Fatal(err)
	}
	var pids []int64
	for p := range 4 {
		part, err := st.EnsurePartition(ctx, queue, fmt.Sprint("p", p))
		if err != nil {
			t.Fatal(err)
		}
		pids = append(pids, part.ID)
	}
	type answer struct {
		pid  int64
		id   string
		out  model.Outcome
		when time.Time
	}
	var (
		mu      sync.Mutex
		answers []answer
		wg      sync.WaitGroup
	)
	stop := make(chan struct{})
	errs := make(chan error, 16)
	for g := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(g), 7))
			for range 150 {
				var bundle []model.Frame
				for _, i := range rng.Perm(len(pids))[:1+rng.IntN(len(pids))] {
					fr := model.Frame{PartitionID: pids[i], Verified: -1}
					for range 1 + rng.IntN(4) {
						id := fmt.Sprint("id-", rng.IntN(60))
						fr.TxnIDs = append(fr.TxnIDs, id)
						fr.Hashes = append(fr.Hashes, model.HashTxnID(id))
						fr.Data = append(fr.Data, []byte(`1`))
					}
					bundle = append(bundle, fr)
				}
				res, err := st.Push(ctx, bundle)
				if err != nil {
					errs <- err
					return
				}
				mu.Lock()
				for s := range bundle {
					for k, o := range res[s].Outcomes {
						answers = append(answers, answer{bundle[s].PartitionID, bundle[s].TxnIDs[k], o, time.Now()})
					}
				}
				mu.Unlock()
				time.Sleep(time.Duration(rng.IntN(15)) * time.Millisecond)
			}
		}()
	}
	var retained sync.WaitGroup
	var deleted [2]int64
	for r := range 2 {
		retained.Add(1)
		go func() {
			defer retained.Done()
			o := retainOpts(0)
			o.PartitionsPerStep, o.MaxRowsPerPartition = 2, 3
			for {
				select {
				case <-stop:
					return
				default:
				}
				s, err := st.Retain(ctx, o)
				if err != nil {
					errs <- err
					return
				}
				deleted[r] += s.TxnsDeleted
			}
		}()
	}
	wg.Wait()
	close(stop)
	retained.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if deleted[0]+deleted[1] == 0 {
		t.Fatal("retention deleted nothing: the test did not exercise it")
	}
	t.Logf("%d answers, %d frames with hashes purged concurrently", len(answers), deleted[0]+deleted[1])

	// Stored messages by (partition, offset), with their created_at.
	type stored struct {
		id string
		at time.Time
	}
	log := map[int64]map[int64]stored{}
	rows, err := st.Pool().Query(ctx, `
		SELECT s.partition_id, s.base_offset + i.n - 1, s.txn_ids[i.n], s.created_at
		  FROM queen.log_segments s, generate_subscripts(s.txn_ids, 1) AS i(n)
		 WHERE s.partition_id = ANY ($1)`, pids)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var (
			pid, off int64
			x        stored
		)
		if err := rows.Scan(&pid, &off, &x.id, &x.at); err != nil {
			t.Fatal(err)
		}
		if log[pid] == nil {
			log[pid] = map[int64]stored{}
		}
		log[pid][off] = x
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	for _, a := range answers {
		if got, ok := log[a.pid][a.out.Offset]; !ok || got.id != a.id {
			t.Fatalf("answer %+v names offset %d holding %+v", a, a.out.Offset, got)
		}
	}
	// Within a partition, two stored copies of one id are at least a
	// window apart.
	for pid, byOff := range log {
		last := map[string]time.Time{}
		for off := int64(0); off < int64(len(byOff)); off++ {
			x, ok := byOff[off]
			if !ok {
				t.Fatalf("partition %d: offset %d missing", pid, off)
			}
			if prev, seen := last[x.id]; seen && x.at.Sub(prev) < time.Second {
				t.Errorf("partition %d: %s stored again at offset %d only %v after its previous copy", pid, x.id, off, x.at.Sub(prev))
			}
			last[x.id] = x.at
		}
	}
	var lost int
	if err := st.Pool().QueryRow(ctx, `
		SELECT count(*) FROM queen.log_segments s
		 WHERE s.partition_id = ANY ($1) AND s.created_at >= now() - interval '1 second'
		   AND (s.hashes IS NULL OR s.base_offset < (SELECT p.txns_start FROM queen.log_partitions p WHERE p.id = s.partition_id))`,
		pids).Scan(&lost); err != nil {
		t.Fatal(err)
	}
	if lost != 0 {
		t.Errorf("%d in-window segments lost their frames with hashes", lost)
	}
}

// TestRetentionAndHydrationWithTheLargestWindow: window arithmetic does
// not overflow at the largest window, so one such queue neither stops
// retention for the others nor fails its hydrations.
func TestRetentionAndHydrationWithTheLargestWindow(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	url := pgtest.NewDB(t)
	huge := setupIn(t, url)
	if _, _, err := huge.store.Configure(ctx, huge.queue, model.OptionsPatch{DedupWindowSeconds: ptr(model.MaxOptionSeconds)}, false); err != nil {
		t.Fatal(err)
	}
	huge.push(t, -1, "h")
	if _, err := huge.store.Hydrate(ctx, huge.part.ID); err != nil {
		t.Fatalf("hydrate at the largest window: %v", err)
	}
	small := setupIn(t, url) // created after: a higher partition id
	small.setWindow(t, 60)
	small.push(t, -1, "s")
	small.age(t, 0, time.Hour)
	if _, err := small.store.Retain(ctx, retainOpts(time.Minute)); err != nil {
		t.Fatal(err)
	}
	if n := small.hashFrames(t); n != 0 {
		t.Errorf("the small queue kept %d old frames with hashes", n)
	}
}

// TestRetentionLeavesIdlePartitionsUnlocked: a queue with segment
// retention whose partition has nothing left is not locked again.
func TestRetentionLeavesIdlePartitionsUnlocked(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setupIn(t, pgtest.NewDB(t))
	if _, _, err := b.store.Configure(ctx, b.queue, model.OptionsPatch{RetentionSeconds: ptr(10)}, false); err != nil {
		t.Fatal(err)
	}
	st, err := b.store.Retain(ctx, retainOpts(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	if st.Locked != 0 || st.Visited != 1 {
		t.Errorf("%+v: want the empty partition visited, not locked", st)
	}
}

// TestPartitionFiguresFollowPushesFiresAndRetention: what a partition
// holds (first offset, count, bytes as sent, oldest and newest times)
// moves with pushes, duplicates (which add nothing), timer fires and
// segment retention.
func TestPartitionFiguresFollowPushesFiresAndRetention(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setupIn(t, pgtest.NewDB(t))
	figures := func() model.PartitionInfo {
		t.Helper()
		c, err := b.store.QueueConfig(ctx, b.queue)
		if err != nil {
			t.Fatal(err)
		}
		ps, err := b.store.Partitions(ctx, c.ID)
		if err != nil || len(ps) != 1 {
			t.Fatalf("partitions %+v, %v", ps, err)
		}
		return ps[0]
	}
	bytesOf := func(ids ...string) int64 {
		var n int64
		for _, d := range newFrame(0, 0, ids...).Data {
			n += int64(len(d))
		}
		return n
	}
	if p := figures(); p.StoredMessages() != 0 || p.StoredBytes != 0 || !p.OldestAt.IsZero() {
		t.Errorf("empty partition: %+v, %d stored", p, p.StoredMessages())
	}
	b.push(t, -1, "a", "b")      // 0, 1
	b.push(t, -1, "c", "a", "d") // c=2, a duplicate, d=3: the frame stores {"i":0,..c} and {"i":2,..d}
	want := bytesOf("a", "b") + int64(len(`{"i":0,"id":"c"}`)+len(`{"i":2,"id":"d"}`))
	p := figures()
	if p.FirstOffset != 0 || p.LastOffset != 3 || p.StoredMessages() != 4 || p.StoredBytes != want {
		t.Errorf("after pushes: first %d last %d stored %d bytes %d; want 0, 3, 4, %d", p.FirstOffset, p.LastOffset, p.StoredMessages(), p.StoredBytes, want)
	}
	if p.OldestAt.IsZero() || p.NewestAt.Before(p.OldestAt) {
		t.Errorf("oldest %v newest %v", p.OldestAt, p.NewestAt)
	}

	if _, err := b.store.ScheduleTimer(ctx, b.part.ID, "timer-1", []byte(`{"fired":true}`), nil, time.Now().Add(-time.Second)); err != nil {
		t.Fatal(err)
	}
	if fired, err := b.store.FireDue(ctx, 10, nil); err != nil || len(fired) != 1 {
		t.Fatalf("fired %v, %v", fired, err)
	}
	want += int64(len(`{"fired":true}`))
	if p = figures(); p.StoredMessages() != 5 || p.StoredBytes != want {
		t.Errorf("after a fire: stored %d bytes %d, want 5 and %d", p.StoredMessages(), p.StoredBytes, want)
	}

	if _, _, err := b.store.Configure(ctx, b.queue, model.OptionsPatch{RetentionSeconds: ptr(10)}, false); err != nil {
		t.Fatal(err)
	}
	b.age(t, 0, 0)
	if _, err := b.store.Pool().Exec(ctx, "UPDATE queen.log_segments SET created_at = created_at - interval '30 seconds' WHERE partition_id = $1 AND base_offset = 0",
		b.part.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := b.store.Retain(ctx, retainOpts(time.Minute)); err != nil {
		t.Fatal(err)
	}
	want -= bytesOf("a", "b")
	if p = figures(); p.FirstOffset != 2 || p.StoredMessages() != 3 || p.StoredBytes != want {
		t.Errorf("after retention: first %d stored %d bytes %d; want 2, 3, %d", p.FirstOffset, p.StoredMessages(), p.StoredBytes, want)
	}
}
