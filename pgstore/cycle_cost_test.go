package pgstore_test

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/queengate/queengate/internal/pgtest"
	"github.com/queengate/queengate/model"
	"github.com/queengate/queengate/pgstore"
)

// cycleCost is what one pop-and-ack cycle cost PostgreSQL: its
// statements, the shared buffers they touched (hit or read), and their
// duration as the server timed them (reported, never asserted).
type cycleCost struct {
	statements int
	buffers    int
	ms         float64
}

// statementCost reads the cost of the statements plans logged: each
// top-level statement logs one plan, its top node's buffers counting
// everything the statement read, routines included.
func statementCost(plans []string) cycleCost {
	var c cycleCost
	for _, plan := range plans {
		c.statements++
		if m := planBuffers.FindStringSubmatch(plan); m != nil {
			for _, kv := range strings.Fields(m[1]) {
				if k, v, _ := strings.Cut(kv, "="); k == "hit" || k == "read" {
					n, _ := strconv.Atoi(v)
					c.buffers += n
				}
			}
		}
		if m := planDuration.FindStringSubmatch(plan); m != nil {
			ms, _ := strconv.ParseFloat(m[1], 64)
			c.ms += ms
		}
	}
	return c
}

// cycleStore runs pop-and-ack cycles as the gateway serves a pop
// carrying the previous batch's ack, on one partition stored in
// 1000-message frames, its session logging every statement's plan.
type cycleStore struct {
	log  *planLog
	p    model.Partition
	g    model.Group
	rows benchRows
	last int64
}

func newCycleStore(t *testing.T) *cycleStore {
	t.Helper()
	url := pgtest.NewDB(t)
	st := pgtest.Store(t, url)
	p, err := st.EnsurePartition(context.Background(), "cycle", "Default")
	if err != nil {
		t.Fatal(err)
	}
	c := &cycleStore{p: p, rows: benchRows{prefix: "cycle-"}, last: -1,
		log: openPlanLogWith(t, url, "SET auto_explain.log_analyze = on; SET auto_explain.log_buffers = on; SET auto_explain.log_timing = off;")}
	if c.g, err = c.log.store.EnsureGroup(context.Background(), "cycle", "g"); err != nil {
		t.Fatal(err)
	}
	return c
}

// fill pushes frames until n messages are there from offset from on.
func (c *cycleStore) fill(t *testing.T, from int64, n int) {
	t.Helper()
	for c.last < from+int64(n)-1 {
		res, err := c.log.store.Push(context.Background(), []model.Frame{c.rows.frame(c.p.ID, c.last, 1000)})
		if err != nil {
			t.Fatal(err)
		}
		c.last = res[0].LastOffset
	}
}

// wholeAck completes every message of r in order, by transactionId.
func wholeAck(r model.PopResult) []model.Settlement {
	items := make([]model.Settlement, len(r.Messages))
	for i, m := range r.Messages {
		items[i] = model.Settlement{Offset: -1, TxnID: m.TxnID, Completed: true}
	}
	return items
}

// cycle pops up to n messages carrying the whole ack of prev (none when
// prev has no lease), as the gateway does, and returns the pop's result
// and what the cycle cost.
func (c *cycleStore) cycle(t *testing.T, prev model.PopResult, n int) (model.PopResult, cycleCost) {
	t.Helper()
	ctx := context.Background()
	st := c.log.store
	pr := model.PopQuery{Group: c.g, Max: n, Lease: time.Minute, Consumer: "c", MaxBytes: 1 << 20, Room: 1 << 20}
	c.log.take()
	r, err := cyclePop(ctx, st, pr, prev)
	if err != nil {
		t.Fatal(err)
	}
	return r, statementCost(c.log.take())
}

// cyclePop pops by pr carrying the whole ack of prev (none when prev
// has no lease) as the gateway serves it: one cycle when the store
// takes it, else an ack, then a pop.
func cyclePop(ctx context.Context, st *pgstore.Store, pr model.PopQuery, prev model.PopResult) (model.PopResult, error) {
	if prev.LeaseID == "" {
		return st.Pop(ctx, pr)
	}
	items := wholeAck(prev)
	a, pop, ok, err := st.Cycle(ctx, pr, prev.PartitionID, prev.LeaseID, items)
	if err != nil {
		return model.PopResult{}, err
	}
	if !ok {
		if a, err = st.Ack(ctx, pr.Group, prev.PartitionID, prev.LeaseID, items); err != nil {
			return model.PopResult{}, err
		}
	}
	if !a.LeaseEnded {
		return model.PopResult{}, fmt.Errorf("ack: the lease did not end: %+v", a)
	}
	if pop != nil {
		return *pop, nil
	}
	return st.Pop(ctx, pr)
}

// maxCycleBuffers bounds the shared buffers a plain cycle touches on
// one partition with nothing else pending: the cursor row by key with
// its partition, queue and a probe for marks (9), the frame's
// transactionIds checking the ack by hash (6), the wake's probe of
// parked cursors (1), the walk of the group's ready cursors before this
// one (5), the next messages' frame and its neighbour (11), and the
// update of the cursor row and its indexes' entries (10): 42, with room
// for a deeper index. An ack, then a pop, touched 68.
const maxCycleBuffers = 50

// TestAPlainCycleIsOneStatement runs plain pop-and-ack cycles, each pop
// carrying the whole, in-order ack of the batch before: each is one
// statement (an ack, then a pop, were two), touching at most
// maxCycleBuffers buffers. What they cost is logged, by the server's
// clock, under auto_explain's instrumentation (never asserted).
func TestAPlainCycleIsOneStatement(t *testing.T) {
	for _, n := range []int{1, 100} {
		c := newCycleStore(t)
		var prev model.PopResult
		var sum cycleCost
		cycles, most := 0, 0
		for i := range 40 {
			c.fill(t, int64(i*n), 2*n)
			r, cost := c.cycle(t, prev, n)
			if len(r.Messages) != n || r.Messages[0].Offset != int64(i*n) {
				t.Fatalf("cycle %d: %d messages from %v, want %d from %d", i, len(r.Messages), offsetsOf(r), n, i*n)
			}
			prev = r
			if i < 10 { // the session's plans are made
				continue
			}
			if cost.statements != 1 {
				t.Fatalf("batch %d, cycle %d: %d statements, want 1", n, i, cost.statements)
			}
			cycles, most = cycles+1, max(most, cost.buffers)
			sum.buffers, sum.ms = sum.buffers+cost.buffers, sum.ms+cost.ms
		}
		k := float64(cycles)
		t.Logf("batch %d: 1 statement, %.1f buffers (at most %d), %.0f µs a cycle", n, float64(sum.buffers)/k, most, 1000*sum.ms/k)
		if most > maxCycleBuffers {
			t.Errorf("batch %d: a cycle touched %d buffers, over %d", n, most, maxCycleBuffers)
		}
	}
}
