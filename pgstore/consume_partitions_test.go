package pgstore_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/queengate/queengate/internal/pgtest"
	"github.com/queengate/queengate/model"
	"github.com/queengate/queengate/pgstore"
)

// manyPartitions is a queue of many partitions in the shared database.
type manyPartitions struct {
	store *pgstore.Store
	queue string
	parts []model.Partition
	rows  benchRows
}

func newManyPartitions(t testing.TB, st *pgstore.Store, queue string) *manyPartitions {
	return &manyPartitions{store: st, queue: queue, rows: benchRows{prefix: queue + "-"}}
}

// sharedManyPartitions is a queue of the test's own with n partitions in
// the shared database.
func sharedManyPartitions(t *testing.T, n int) (*manyPartitions, *pgstore.Store) {
	t.Helper()
	st := pgtest.Store(t, pgtest.SharedURL(t))
	q := newManyPartitions(t, st, pgtest.UniqueName(t))
	q.grow(t, n)
	return q, st
}

// grow creates partitions p<len>.. up to n in all, through
// queen.ensure_partitions as pushes create them.
func (q *manyPartitions) grow(t testing.TB, n int) {
	t.Helper()
	for len(q.parts) < n {
		var queues, names []string
		for i := len(q.parts); i < n && len(names) < 10_000; i++ {
			queues, names = append(queues, q.queue), append(names, fmt.Sprint("p", i))
		}
		parts, _, err := q.store.EnsurePartitions(context.Background(), queues, names)
		if err != nil {
			t.Fatal(err)
		}
		q.parts = append(q.parts, parts...)
	}
}

// push stores k messages on each of the partitions.
func (q *manyPartitions) push(t testing.TB, k int, parts ...model.Partition) {
	t.Helper()
	for len(parts) > 0 {
		var frames []model.Frame
		for _, p := range parts[:min(len(parts), 1000)] {
			frames = append(frames, q.rows.frame(p.ID, -1, k))
		}
		parts = parts[len(frames):]
		res, err := q.store.Push(context.Background(), frames)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range res {
			if r.BaseOffset < 0 {
				t.Fatalf("push to partition %d wrote nothing", r.PartitionID)
			}
		}
	}
}

func (q *manyPartitions) group(t testing.TB, name string) model.Group {
	t.Helper()
	g, err := q.store.EnsureGroup(context.Background(), q.queue, name)
	if err != nil {
		t.Fatal(err)
	}
	return g
}

func (q *manyPartitions) pop(t testing.TB, g model.Group, max int) model.PopResult {
	t.Helper()
	r, err := q.store.Pop(context.Background(), model.PopQuery{Group: g, Max: max, Lease: time.Minute, Consumer: "c",
		MaxBytes: 1 << 20, Room: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// ackAll completes everything the pop delivered.
func (q *manyPartitions) ackAll(t testing.TB, g model.Group, r model.PopResult) {
	t.Helper()
	var items []model.Settlement
	for _, m := range r.Messages {
		items = append(items, doneAt(m.Offset))
	}
	a, err := q.store.Ack(context.Background(), g, r.PartitionID, r.LeaseID, items)
	if err != nil || !a.LeaseEnded {
		t.Fatalf("ack of %d messages on partition %d: %+v, %v", len(items), r.PartitionID, a, err)
	}
}

// drain pops and acknowledges until a pop finds nothing, and returns how
// many messages each partition delivered.
func (q *manyPartitions) drain(t testing.TB, g model.Group) map[int64]int {
	t.Helper()
	got := map[int64]int{}
	for {
		r := q.pop(t, g, 1000)
		if len(r.Messages) == 0 {
			return got
		}
		got[r.PartitionID] += len(r.Messages)
		q.ackAll(t, g, r)
	}
}

// cursors counts the group's cursors on the queue's partitions.
func (q *manyPartitions) cursors(t testing.TB, g model.Group) int {
	t.Helper()
	var n int
	if err := q.store.Pool().QueryRow(context.Background(), `SELECT count(*) FROM queen.consumer_cursors c
		  JOIN queen.log_partitions p ON p.id = c.partition_id WHERE c.group_id = $1 AND p.queue_id = $2`,
		g.ID, g.QueueID).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// A group has its cursor on every partition before any pop, whether the
// group was created before the partitions, after them, or while they
// were created; and its pops then deliver every partition's messages.
func TestAGroupHasACursorOnEveryPartitionWheneverEitherWasCreated(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	q, st := sharedManyPartitions(t, 5)
	before := q.group(t, "before")
	q.grow(t, 10)
	if _, err := st.EnsurePartition(ctx, q.queue, "one"); err != nil { // the single-partition path
		t.Fatal(err)
	}
	after := q.group(t, "after")
	// Concurrently: partitions created one by one and in bundles while
	// groups are created.
	var wg sync.WaitGroup
	errs := make(chan error, 64)
	var racing []string
	for i := range 8 {
		name := fmt.Sprint("racing", i)
		racing = append(racing, name)
		wg.Go(func() {
			if _, err := st.EnsureGroup(ctx, q.queue, name); err != nil {
				errs <- err
			}
		})
		wg.Go(func() {
			if _, err := st.EnsurePartition(ctx, q.queue, fmt.Sprint("single", i)); err != nil {
				errs <- err
			}
		})
		wg.Go(func() {
			queues, names := []string{q.queue, q.queue}, []string{fmt.Sprint("bundle", i, "a"), fmt.Sprint("bundle", i, "b")}
			if _, _, err := st.EnsurePartitions(ctx, queues, names); err != nil {
				errs <- err
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	var all []model.Partition
	rows, err := st.Pool().Query(ctx, "SELECT id FROM queen.log_partitions WHERE queue_id = $1", before.QueueID)
	if err != nil {
		t.Fatal(err)
	}
	ids, err := pgx.CollectRows(rows, pgx.RowTo[int64])
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range ids {
		all = append(all, model.Partition{ID: id})
	}
	groups := []model.Group{before, after}
	for _, name := range racing {
		groups = append(groups, q.group(t, name))
	}
	for _, g := range groups {
		if n := q.cursors(t, g); n != len(all) {
			t.Errorf("group %s has %d cursors before any pop, want one on each of %d partitions", g.Name, n, len(all))
		}
	}
	q.push(t, 2, all...)
	for _, g := range groups {
		got := q.drain(t, g)
		if len(got) != len(all) {
			t.Errorf("group %s was delivered messages of %d partitions, want all %d", g.Name, len(got), len(all))
		}
		for id, n := range got {
			if n != 2 {
				t.Errorf("group %s: partition %d delivered %d messages, want 2", g.Name, id, n)
			}
		}
	}
}

// fullScanChoice is the partition a pop of any partition must lease, as
// the rule says it and as consumer_pop found it before cursors were
// parked: the least recently leased of the group's partitions with work
// and no running lease (0: none).
func fullScanChoice(t *testing.T, st *pgstore.Store, g model.Group) int64 {
	t.Helper()
	var id int64
	err := st.Pool().QueryRow(context.Background(), `
		SELECT cc.partition_id FROM queen.consumer_cursors cc JOIN queen.log_partitions p ON p.id = cc.partition_id
		 WHERE cc.group_id = $1 AND (cc.lease_id IS NULL OR cc.lease_until <= clock_timestamp())
		   AND cc.next_offset <= p.last_offset
		 ORDER BY cc.leased_at NULLS FIRST, cc.partition_id LIMIT 1`, g.ID).Scan(&id)
	if err != nil && !errors.Is(err, pgx.ErrNoRows) {
		t.Fatal(err)
	}
	return id
}

// Pops of any partition, which walk only unparked cursors, lease exactly
// the partition a scan of all the group's cursors chooses, through random
// pushes to few or many partitions, partial and whole acks, releases,
// leases running out, and partitions created on the way.
func TestAnyPartitionPopsChooseAsAScanOfEveryCursor(t *testing.T) {
	t.Parallel()
	for seed := range uint64(3) {
		t.Run(fmt.Sprint("seed", seed), func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			q, st := sharedManyPartitions(t, 12)
			g := q.group(t, "g")
			if _, err := st.Pool().Exec(ctx, "UPDATE queen.queues SET max_attempts = 0 WHERE id = $1", g.QueueID); err != nil {
				t.Fatal(err)
			}
			rng := rand.New(rand.NewPCG(seed, 23))
			leases := map[int64]model.PopResult{}
			pops := map[string]int{}
			for step := range 400 {
				switch r := rng.IntN(10); {
				case r < 3:
					var to []model.Partition
					for range 1 + rng.IntN(3) {
						to = append(to, q.parts[rng.IntN(len(q.parts))])
					}
					q.push(t, 1+rng.IntN(3), to...)
				case r < 7:
					want := fullScanChoice(t, st, g)
					got := q.pop(t, g, 1+rng.IntN(3))
					if got.PartitionID != want {
						t.Fatalf("step %d: pop leased partition %d, a scan of every cursor chooses %d", step, got.PartitionID, want)
					}
					if want == 0 {
						pops["empty"]++
						continue
					}
					pops["leased"]++
					leases[got.PartitionID] = got
				case r < 9 && len(leases) > 0:
					for id, l := range leases {
						switch rng.IntN(3) {
						case 0:
							q.ackAll(t, g, l)
						case 1:
							if _, _, err := st.Lease(ctx, g, id, l.LeaseID, 0); err != nil {
								t.Fatal(err)
							}
						default:
							if _, err := st.Pool().Exec(ctx, `UPDATE queen.consumer_cursors SET lease_until = now() - interval '1 second'
								WHERE group_id = $1 AND partition_id = $2`, g.ID, id); err != nil {
								t.Fatal(err)
							}
						}
						delete(leases, id)
						break
					}
				case r == 9 && len(q.parts) < 20:
					q.grow(t, len(q.parts)+1)
				}
			}
			if pops["empty"] < 10 || pops["leased"] < 50 {
				t.Fatalf("pops %v: too few of a kind to compare", pops)
			}
		})
	}
}

// Consumers popping any partition while producers push to random
// partitions leave nothing behind: once the pushes stop, pops deliver
// every message pushed, each once, so no partition that got messages
// stayed parked.
func TestPopsRacingPushesLeaveNoPartitionBehind(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	q, st := sharedManyPartitions(t, 40)
	g := q.group(t, "g")
	const pushers, pushesEach = 3, 150
	var (
		mu       sync.Mutex
		consumed = map[int64]int{}
		wg       sync.WaitGroup
		stop     = make(chan struct{})
	)
	for i := range pushers {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(i), 5))
			rows := benchRows{prefix: fmt.Sprint(q.queue, "-", i, "-")}
			for range pushesEach {
				p := q.parts[rng.IntN(len(q.parts))]
				if _, err := st.Push(ctx, []model.Frame{rows.frame(p.ID, -1, 1)}); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	var consumers sync.WaitGroup
	for range 3 {
		consumers.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				r, err := st.Pop(ctx, model.PopQuery{Group: g, Max: 5, Lease: time.Minute, Consumer: "c", MaxBytes: 1 << 20, Room: 1 << 20})
				if err != nil {
					t.Error(err)
					return
				}
				if len(r.Messages) == 0 {
					continue
				}
				var items []model.Settlement
				for _, m := range r.Messages {
					items = append(items, doneAt(m.Offset))
				}
				if _, err := st.Ack(ctx, g, r.PartitionID, r.LeaseID, items); err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				consumed[r.PartitionID] += len(r.Messages)
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	close(stop)
	consumers.Wait()
	for id, n := range q.drain(t, g) {
		consumed[id] += n
	}
	total := 0
	for _, n := range consumed {
		total += n
	}
	if total != pushers*pushesEach {
		t.Fatalf("consumed %d messages, %d were pushed", total, pushers*pushesEach)
	}
	var left int
	if err := st.Pool().QueryRow(ctx, `SELECT count(*) FROM queen.consumer_cursors cc JOIN queen.log_partitions p ON p.id = cc.partition_id
		 WHERE cc.group_id = $1 AND cc.next_offset <= p.last_offset`, g.ID).Scan(&left); err != nil || left != 0 {
		t.Fatalf("%d partitions still have work for the group (%v)", left, err)
	}
}

// A group inserted as the release before cursors-ahead inserted groups
// (a plain INSERT, as a gateway still running that release does during an
// upgrade) gets its cursors too, and its pops deliver every partition.
func TestAGroupInsertedByAnOlderGatewayGetsItsCursors(t *testing.T) {
	t.Parallel()
	q, st := sharedManyPartitions(t, 50)
	q.push(t, 2, q.parts[:20]...)
	var g model.Group
	g.Name, g.QueueID = "older", q.parts[0].QueueID
	if err := st.Pool().QueryRow(context.Background(), `INSERT INTO queen.consumer_groups (queue_id, name) VALUES ($1, $2)
		ON CONFLICT (queue_id, name) DO NOTHING RETURNING id`, g.QueueID, g.Name).Scan(&g.ID); err != nil {
		t.Fatal(err)
	}
	if n := q.cursors(t, g); n != 50 {
		t.Fatalf("a group inserted by plain SQL has %d cursors on 50 partitions", n)
	}
	q.push(t, 1, q.parts[40:45]...) // to partitions whose cursors were born parked
	got := q.drain(t, g)
	if len(got) != 25 {
		t.Fatalf("the group's pops delivered %d partitions, want 25: %v", len(got), got)
	}
}
