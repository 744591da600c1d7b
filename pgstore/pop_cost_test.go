package pgstore_test

import (
	"context"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/queengate/queengate/internal/pgtest"
	"github.com/queengate/queengate/model"
)

// popCost is what one pop read and took, from its logged plan.
type popCost struct {
	buffers int     // shared buffers hit and read, the routine's statements included
	ms      float64 // as the server timed it (reported, never asserted)
}

var (
	planBuffers  = regexp.MustCompile(`Buffers: shared((?: [a-z]+=\d+)+)`)
	planDuration = regexp.MustCompile(`duration: ([0-9.]+) ms`)
)

// popCosts pops n times from the logging session, releasing each lease
// (so the partitions keep their work), and returns each pop's cost.
func popCosts(t *testing.T, log *planLog, g model.Group, n int) []popCost {
	t.Helper()
	ctx := context.Background()
	var out []popCost
	for range n {
		log.take()
		r, err := log.store.Pop(ctx, model.PopQuery{Group: g, Max: 10, Lease: time.Minute, Consumer: "c", MaxBytes: 1 << 20, Room: 1 << 20})
		if err != nil || len(r.Messages) == 0 {
			t.Fatalf("pop: %d messages, %v", len(r.Messages), err)
		}
		var c popCost
		for _, plan := range log.take() {
			if !strings.Contains(plan, "consumer_pop") {
				continue
			}
			if m := planBuffers.FindStringSubmatch(plan); m != nil { // the top node's: everything the call read
				for _, kv := range strings.Fields(m[1]) {
					if k, v, _ := strings.Cut(kv, "="); k == "hit" || k == "read" {
						n, _ := strconv.Atoi(v)
						c.buffers += n
					}
				}
			}
			if m := planDuration.FindStringSubmatch(plan); m != nil {
				c.ms, _ = strconv.ParseFloat(m[1], 64)
			}
		}
		if c.buffers == 0 {
			t.Fatal("no buffers logged for the pop")
		}
		if _, _, err := log.store.Lease(ctx, g, r.PartitionID, r.LeaseID, 0); err != nil {
			t.Fatal(err)
		}
		out = append(out, c)
	}
	return out
}

func medianCost(cs []popCost) popCost {
	b := make([]int, len(cs))
	ms := make([]float64, len(cs))
	for i, c := range cs {
		b[i], ms[i] = c.buffers, c.ms
	}
	slices.Sort(b)
	slices.Sort(ms)
	return popCost{buffers: b[len(b)/2], ms: ms[len(ms)/2]}
}

// A pop of any partition reads about as many buffers with 100,000
// partitions as with 8, both while every partition has work and when all
// but 8 are drained: it takes its partition from an index and does not
// walk the others. (Before, it checked every partition for a missing
// cursor and sorted all of the group's cursors: 30-58k buffers a pop at
// 10k partitions.) The pops right after the partitions drain park their
// cursors, once; that is reported, not compared.
//
// On a cluster of its own: a pop looks again at the frames written since
// the oldest transaction running when its group last looked, and other
// tests' transactions in the shared cluster would hold that back. So it
// runs beside the other tests rather than alone before them.
func TestAPopReadsAsMuchAt100kPartitionsAsAt8(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	url := pgtest.NewCluster(t).URL
	st := pgtest.Store(t, url)
	log := openPlanLogWith(t, url, "SET auto_explain.log_analyze = on; SET auto_explain.log_buffers = on; SET auto_explain.log_timing = off;")
	type result struct{ working, drained, unvacuumed, parking popCost }
	results := map[int]result{}
	sizes := []int{8, 1000, 10_000, 100_000}
	for _, n := range sizes {
		q := newManyPartitions(t, st, fmt.Sprint("cost", n))
		q.grow(t, n)
		q.push(t, 1, q.parts...)
		g := q.group(t, "g")
		if _, err := st.Pool().Exec(ctx, "UPDATE queen.queues SET max_attempts = 0 WHERE id = $1", g.QueueID); err != nil {
			t.Fatal(err)
		}
		var res result
		res.working = medianCost(popCosts(t, log, g, 7)[2:])
		// Every partition consumed, then 8 of them get a message.
		if _, err := st.Pool().Exec(ctx, `UPDATE queen.consumer_cursors cc SET next_offset = p.last_offset + 1
			  FROM queen.log_partitions p WHERE p.id = cc.partition_id AND cc.group_id = $1`, g.ID); err != nil {
			t.Fatal(err)
		}
		var some []model.Partition
		for i := range 8 {
			some = append(some, q.parts[i*n/8])
		}
		q.push(t, 1, some...)
		// The first pops walk the drained cursors before each partition
		// with work, parking them; after 8 (one per partition with work)
		// none is left to walk.
		costs := popCosts(t, log, g, 14)
		for _, c := range costs[:8] {
			res.parking.buffers += c.buffers
			res.parking.ms += c.ms
		}
		res.unvacuumed = medianCost(costs[9:])
		// The versions the draining and the parking left behind are
		// walked over in the index until vacuum removes them (autovacuum
		// would, soon after so many updates).
		if _, err := st.Pool().Exec(ctx, "VACUUM queen.consumer_cursors"); err != nil {
			t.Fatal(err)
		}
		res.drained = medianCost(popCosts(t, log, g, 5))
		results[n] = res
		t.Logf("%6d partitions: all with work %5d buffers %7.2f ms; 8 with work %5d buffers %7.2f ms (before vacuum %d buffers %.2f ms; the 8 pops that parked the drained: %d buffers, %.2f ms in all)",
			n, res.working.buffers, res.working.ms, res.drained.buffers, res.drained.ms, res.unvacuumed.buffers, res.unvacuumed.ms,
			res.parking.buffers, res.parking.ms)
	}
	base := results[sizes[0]]
	for _, n := range sizes[1:] {
		r := results[n]
		// Flat: within what a deeper index (one level more at most) adds.
		if r.working.buffers > 2*base.working.buffers+20 || r.drained.buffers > 2*base.drained.buffers+20 {
			t.Errorf("%d partitions: a pop reads %d buffers (all with work) and %d (8 with work); %d and %d at %d partitions",
				n, r.working.buffers, r.drained.buffers, base.working.buffers, base.drained.buffers, sizes[0])
		}
	}
}

// maxChoosePopBuffers bounds the shared buffers a pop of any partition
// of 100 touches while every partition has work: 37 when the walk reads
// the first ready cursor and takes it, with room for the ran-out probe
// and a deeper index; walking the cursors ten at a time (a FOR loop's
// prefetch, each cursor with its partition) took 55.
const maxChoosePopBuffers = 45

// TestAPopOfAnyPartitionReadsOneCursorAhead: with every partition
// holding work, a pop of any partition reads the first ready cursor and
// takes it, not the next nine with their partitions.
func TestAPopOfAnyPartitionReadsOneCursorAhead(t *testing.T) {
	url := pgtest.NewDB(t)
	st := pgtest.Store(t, url)
	log := openPlanLogWith(t, url, "SET auto_explain.log_analyze = on; SET auto_explain.log_buffers = on; SET auto_explain.log_timing = off;")
	q := newManyPartitions(t, st, "ahead")
	q.grow(t, 100)
	q.push(t, 3, q.parts...)
	g := q.group(t, "g")
	costs := popCosts(t, log, g, 12)[4:] // the session's plans are made
	for i, c := range costs {
		if c.buffers > maxChoosePopBuffers {
			t.Errorf("pop %d: %d buffers, over %d", i, c.buffers, maxChoosePopBuffers)
		}
	}
	t.Logf("a pop of any partition: %d buffers (median)", medianCost(costs).buffers)
}

// A cursor found by its key, planned as a session plans it when the
// cursors table is still small (a gateway that just started), is still
// found through the primary key once a group has thousands of partitions
// with work. A condition on parked beside the key let the plan take a
// partial index (ready or parked cursors) with the key's columns as
// conditions it cannot seek by, so every lookup walked all of the
// group's cursors: 65 buffers and ~1 ms each at 10,000 partitions, three
// lookups a pop under eight consumers.
var byKeyOnPartialIndex = regexp.MustCompile(`using consumer_cursors_(ready|parked) on consumer_cursors \w+[^\n]*\n\s+Index Cond: \([^\n]*partition_id = `)

func TestCursorsAreLockedByKeyWhateverTheSessionPlannedAt(t *testing.T) {
	ctx := context.Background()
	url := pgtest.NewDB(t)
	st := pgtest.Store(t, url)
	log := openPlanLogWith(t, url, "SET auto_explain.log_analyze = on; SET auto_explain.log_buffers = on; SET auto_explain.log_timing = off; SET auto_explain.log_nested_statements = on;")
	small := newManyPartitions(t, st, "small")
	small.grow(t, 8)
	small.push(t, 3, small.parts...)
	popCosts(t, log, small.group(t, "g"), 4) // the session plans here

	q := newManyPartitions(t, st, "large")
	q.grow(t, 3000)
	g := q.group(t, "g")
	q.push(t, 3, q.parts...)
	// Drained cursors parked, then woken by a push: both by-key paths.
	if _, err := st.Pool().Exec(ctx, `UPDATE queen.consumer_cursors cc SET next_offset = p.last_offset + 1
		  FROM queen.log_partitions p WHERE p.id = cc.partition_id AND cc.group_id = $1 AND p.id <> ALL($2)`,
		g.ID, []int64{q.parts[0].ID, q.parts[1].ID}); err != nil {
		t.Fatal(err)
	}
	log.take()
	for range 4 {
		r := q.pop(t, g, 10)
		if _, _, err := log.store.Lease(ctx, g, r.PartitionID, r.LeaseID, 0); err != nil {
			t.Fatal(err)
		}
	}
	q.push(t, 1, q.parts[2:40]...)
	for range 4 {
		r, err := log.store.Pop(ctx, model.PopQuery{Group: g, Max: 10, Lease: time.Minute, Consumer: "c", MaxBytes: 1 << 20, Room: 1 << 20})
		if err != nil {
			t.Fatal(err)
		}
		if r.LeaseID != "" {
			if _, _, err := log.store.Lease(ctx, g, r.PartitionID, r.LeaseID, 0); err != nil {
				t.Fatal(err)
			}
		}
	}
	plans := log.take()
	for _, plan := range plans {
		if byKeyOnPartialIndex.MatchString(plan) {
			t.Errorf("a cursor looked up by key through a partial index:\n%s", plan)
		}
	}
	if len(plans) == 0 {
		t.Fatal("no plans logged")
	}
}
