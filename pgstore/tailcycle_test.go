package pgstore_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/queengate/queengate/model"
	"github.com/queengate/queengate/pgstore"
	"github.com/queengate/queengate/tail"
)

// setupConsumerInFrames is setupConsumer with the n messages pushed in
// frames of 1 to 12 (message i's data frameData(i, "t<i>") whatever its
// frame; a third of the frames with headers on every other message, and
// binary data), each fed to a tail as a gateway's ingester feeds it, and the
// tail's server on b in check mode: every cycle it serves is read back
// from SQL, and any difference fails it.
func setupConsumerInFrames(t *testing.T, n int, seed uint64) *consumerBundle {
	t.Helper()
	b := setupConsumer(t, 0)
	ctx := context.Background()
	epoch, _ := b.store.Epoch(ctx)
	tl := tail.New(tail.DefaultBudgetBytes)
	tl.Reset(epoch)
	rng := rand.New(rand.NewPCG(seed, 5))
	for i := 0; i < n; {
		k := min(n-i, 1+rng.IntN(12))
		fr := model.Frame{PartitionID: b.part.ID, Verified: -1}
		for j := i; j < i+k; j++ {
			id := fmt.Sprintf("t%d", j)
			fr.TxnIDs, fr.Hashes = append(fr.TxnIDs, id), append(fr.Hashes, model.HashTxnID(id))
			fr.Data = append(fr.Data, []byte(frameData(j, id)))
			if i%3 == 0 {
				var meta []byte
				if j%2 == 0 {
					meta = model.AppendMeta(nil, []model.Header{{Name: "traceparent", Values: []string{id}}}, j%4 == 0)
				}
				fr.Meta = append(fr.Meta, meta)
			}
		}
		res, at, err := b.store.PushUnder(ctx, epoch, []model.Frame{fr})
		if err != nil || res[0].BaseOffset != int64(i) {
			t.Fatalf("push of %d from %d: %+v %v", k, i, res, err)
		}
		tl.Add(at, b.part.ID, tail.NewFrame(res[0].BaseOffset, fr.TxnIDs, fr.Data, fr.Meta, res[0].CreatedAt))
		i += k
	}
	b.tail = &tail.Server{Tail: tl, Leases: tail.NewLeases(tail.DefaultMaxLeases), Store: b.store, Check: b.store}
	t.Cleanup(func() {
		if n := b.tail.Mismatches(); n > 0 {
			t.Errorf("%d cycles served from the tail differed from SQL", n)
		}
	})
	return b
}

// tailCycle serves the cycle from b's tail when it can (ok), as a
// gateway tries it before the store's Cycle.
func (b *consumerBundle) tailCycle(t *testing.T, r model.PopQuery, lease string, items []model.Settlement) (
	model.SettledBatch, *model.PopResult, bool) {
	t.Helper()
	if b.tail == nil {
		return model.SettledBatch{}, nil, false
	}
	a, popped, ok, err := b.tail.Cycle(context.Background(), r, b.part.ID, lease, items)
	if err != nil {
		t.Fatal(err)
	}
	return a, popped, ok
}

// remember keeps what a pop delivered, as a gateway does with what it
// answers.
func (b *consumerBundle) remember(r model.PopResult) {
	if b.tail != nil {
		b.tail.Remember(b.group.ID, &r)
	}
}

func (b *consumerBundle) tailServed() int64 {
	if b.tail == nil {
		return 0
	}
	served := b.tail.Tail.Counts().Served
	return served
}

// tailBundle is a consumer bundle whose pushes feed a tail, as a
// gateway's ingester feeds it, with the tail's server in check mode.
type tailBundle struct {
	*consumerBundle
	epoch uint64
}

func setupTail(t *testing.T) *tailBundle {
	t.Helper()
	b := setupConsumerInFrames(t, 0, 0)
	n, _ := b.store.Epoch(context.Background())
	return &tailBundle{consumerBundle: b, epoch: n}
}

// pushFed pushes ids as one frame and feeds it to the tail.
func (b *tailBundle) pushFed(t *testing.T, ids ...string) model.FrameResult {
	t.Helper()
	fr := newFrame(b.part.ID, -1, ids...)
	res, at, err := b.store.PushUnder(context.Background(), b.epoch, []model.Frame{fr})
	if err != nil {
		t.Fatal(err)
	}
	b.tail.Tail.Add(at, b.part.ID, tail.NewFrame(res[0].BaseOffset, fr.TxnIDs, fr.Data, nil, res[0].CreatedAt))
	return res[0]
}

// popRemembered pops up to max and remembers the lease.
func (b *tailBundle) popRemembered(t *testing.T, max int) model.PopResult {
	t.Helper()
	r := b.pop(t, b.group, max)
	b.remember(r)
	return r
}

// carried pops up to max carrying the whole ack of prev by
// transactionId, the tail first; served says whether the tail served it.
func (b *tailBundle) carried(t *testing.T, prev model.PopResult, max int) (r model.PopResult, served bool) {
	t.Helper()
	before := b.tail.Tail.Counts().Served
	pr := model.PopQuery{Group: b.group, Max: max, Lease: time.Minute, Consumer: "c", MaxBytes: 1 << 20, Room: 1 << 20}
	r, err := cyclePopWith(context.Background(), b.store, b.tail, pr, prev)
	if err != nil {
		t.Fatal(err)
	}
	b.remember(r)
	after := b.tail.Tail.Counts().Served
	return r, after > before
}

// cyclePopWith is cyclePop trying the tail's server first, as the
// gateway does.
func cyclePopWith(ctx context.Context, st *pgstore.Store, s *tail.Server, pr model.PopQuery, prev model.PopResult) (model.PopResult, error) {
	if prev.LeaseID != "" {
		_, pop, ok, err := s.Cycle(ctx, pr, prev.PartitionID, prev.LeaseID, wholeAck(prev))
		switch {
		case err != nil:
			return model.PopResult{}, err
		case ok && pop != nil:
			return *pop, nil
		case ok: // the ack alone: the pop the usual way
			return st.Pop(ctx, pr)
		}
	}
	return cyclePop(ctx, st, pr, prev)
}

func txnIDsOf(r model.PopResult) []string {
	var out []string
	for _, m := range r.Messages {
		out = append(out, m.TxnID)
	}
	return out
}

// TestATailCycleServesTheNextFramesAsSQLWould: cycles over frames of 3
// are served from the tail, across two frames at most, each answer
// what SQL holds (the check mode reads every one back), and the
// messages carry their stored created_at.
func TestATailCycleServesTheNextFramesAsSQLWould(t *testing.T) {
	t.Parallel()
	b := setupTail(t)
	for i := range 4 {
		b.pushFed(t, fmt.Sprintf("a%d", 3*i), fmt.Sprintf("a%d", 3*i+1), fmt.Sprintf("a%d", 3*i+2))
	}
	prev := b.popRemembered(t, 2) // 0..1
	want := [][]int64{{2, 3, 4, 5}, {6, 7, 8, 9}, {10, 11}}
	maxes := []int{4, 4, 5}
	for i, w := range want {
		r, served := b.carried(t, prev, maxes[i])
		if !served || !slices.Equal(offsetsOf(r), w) {
			t.Fatalf("cycle %d: served %v, offsets %v; want served %v", i, served, offsetsOf(r), w)
		}
		prev = r
	}
	// Past the last frame, nothing to serve: the usual path acks.
	if r, served := b.carried(t, prev, 4); served || len(r.Messages) != 0 {
		t.Fatalf("past the end: served %v, %v", served, offsetsOf(r))
	}
}

// TestATailCycleFallsBackPastAnotherWritersFrames: frames another
// writer stored (another gateway, a timer's fire) are not in this
// gateway's tail. A cycle that needs them is not served from the tail
// (the statement settles the ack alone when the tail's last frame is not
// the partition's); the usual path delivers what SQL holds. A frame of this
// gateway after the gap restarts the tail, which serves from there.
func TestATailCycleFallsBackPastAnotherWritersFrames(t *testing.T) {
	t.Parallel()
	b := setupTail(t)
	b.pushFed(t, "m0", "m1", "m2", "m3", "m4", "m5")
	b.push(t, -1, "x6", "x7", "x8") // another writer's
	prev := b.popRemembered(t, 3)   // 0..2
	r, served := b.carried(t, prev, 6)
	if served || !slices.Equal(txnIDsOf(r), []string{"m3", "m4", "m5", "x6", "x7", "x8"}) {
		t.Fatalf("across the other writer's frame: served %v, %v", served, txnIDsOf(r))
	}
	if n := b.tail.Tail.Counts(); n.Refused != 0 || n.Acked != 1 {
		t.Fatalf("refused %d, ack alone %d; want 0 and 1: the statement saw the partition past the tail, and settled the ack alone",
			n.Refused, n.Acked)
	}
	b.pushFed(t, "m9", "m10") // restarts the tail at 9
	if _, _, _, held := b.tail.Tail.Window(b.part.ID, 5); held {
		t.Fatal("the tail still holds offset 5 after a frame that did not follow it")
	}
	r, served = b.carried(t, r, 2) // from 9: the restarted tail holds it
	if !served || !slices.Equal(txnIDsOf(r), []string{"m9", "m10"}) {
		t.Fatalf("after the gap: served %v, %v", served, txnIDsOf(r))
	}
	b.pushFed(t, "m11")
	if r, served = b.carried(t, r, 5); !served || !slices.Equal(txnIDsOf(r), []string{"m11"}) {
		t.Fatalf("on the restarted tail: served %v, %v", served, txnIDsOf(r))
	}
}

// TestATailCycleHonoursRetentionBelowIt: retention deleted the frames
// the tail would serve next; segments_start says so, the statement
// settles the ack alone, and the usual path delivers what is still
// stored.
func TestATailCycleHonoursRetentionBelowIt(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setupTail(t)
	if _, _, err := b.store.Configure(ctx, b.queue, model.OptionsPatch{RetentionSeconds: ptr(10)}, false); err != nil {
		t.Fatal(err)
	}
	b.pushFed(t, "m0", "m1")
	b.pushFed(t, "m2", "m3")
	b.pushFed(t, "m4", "m5")
	prev := b.popRemembered(t, 2) // 0..1, the cursor holds them
	if _, err := b.store.Pool().Exec(ctx,
		"UPDATE queen.log_segments SET created_at = created_at - interval '30 seconds' WHERE partition_id = $1 AND base_offset < 4",
		b.part.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := b.store.Retain(ctx, retainOpts(time.Minute)); err != nil {
		t.Fatal(err)
	}
	var start int64
	if err := b.store.Pool().QueryRow(ctx, "SELECT segments_start FROM queen.log_partitions WHERE id = $1", b.part.ID).
		Scan(&start); err != nil || start != 4 {
		t.Fatalf("segments_start %d, %v; want 4", start, err)
	}
	r, served := b.carried(t, prev, 2)
	if served || !slices.Equal(txnIDsOf(r), []string{"m4", "m5"}) {
		t.Fatalf("served %v, %v; want the usual path's m4, m5", served, txnIDsOf(r))
	}
	if n := b.tail.Tail.Counts(); n.Refused != 0 || n.Acked != 1 {
		t.Fatalf("refused %d, ack alone %d; want 0 and 1: the ack settled, the pop left to the usual path", n.Refused, n.Acked)
	}
}

// TestATailCycleOfAnotherEpochIsRefused: a cycle planned under a store
// epoch that is no longer the latest (PostgreSQL changed, or was
// distrusted) changes nothing, and the tail's own epoch check keeps a
// remembered lease of an older epoch from being served.
func TestATailCycleOfAnotherEpochIsRefused(t *testing.T) {
	t.Parallel()
	b := setupTail(t)
	b.pushFed(t, "m0", "m1", "m2", "m3")
	prev := b.popRemembered(t, 2)
	b.store.Distrust(b.epoch)
	r, served := b.carried(t, prev, 2)
	if served || !slices.Equal(txnIDsOf(r), []string{"m2", "m3"}) {
		t.Fatalf("after the epoch changed: served %v, %v", served, txnIDsOf(r))
	}
	if refused := b.tail.Tail.Counts().Refused; refused != 1 {
		t.Fatalf("refused %d, want 1: the statement runs only on a connection of the tail's epoch", refused)
	}
}

// TestATailServedCycleIsOnePlainStatement: a cycle the tail serves is one
// statement, as the store's Cycle is, but no routine: no statement
// nested under it (auto_explain logs those of routines too).
// TestATailServedCycleIsOnePlainStatement also finds no sequential scan
// of log_segments in its plan, whatever the table's size when the
// session planned it: the wake's check for frames above the group's
// woken_to once read the whole log on every cycle of a group with a
// parked cursor, from a plan made while the log was small.
func TestATailServedCycleIsOnePlainStatement(t *testing.T) {
	for _, n := range []int{1, 100} {
		c := newCycleStore(t)
		ctx := context.Background()
		epoch, _ := c.log.store.Epoch(ctx)
		tl := tail.New(tail.DefaultBudgetBytes)
		tl.Reset(epoch)
		s := &tail.Server{Tail: tl, Leases: tail.NewLeases(tail.DefaultMaxLeases), Store: c.log.store}
		fill := func(from int64, k int) {
			for c.last < from+int64(k)-1 {
				fr := c.rows.frame(c.p.ID, c.last, 1000)
				res, at, err := c.log.store.PushUnder(ctx, epoch, []model.Frame{fr})
				if err != nil {
					t.Fatal(err)
				}
				tl.Add(at, c.p.ID, tail.NewFrame(res[0].BaseOffset, fr.TxnIDs, fr.Data, nil, res[0].CreatedAt))
				c.last = res[0].LastOffset
			}
		}
		var prev model.PopResult
		for i := range 40 {
			fill(int64(i*n), 2*n)
			pr := model.PopQuery{Group: c.g, Max: n, Lease: time.Minute, Consumer: "c", MaxBytes: 1 << 20, Room: 1 << 20}
			c.log.take()
			served0 := tl.Counts().Served
			r, err := cyclePopWith(ctx, c.log.store, s, pr, prev)
			if err != nil || len(r.Messages) != n || r.Messages[0].Offset != int64(i*n) {
				t.Fatalf("cycle %d: %d messages from %v, %v; want %d from %d", i, len(r.Messages), offsetsOf(r), err, n, i*n)
			}
			s.Remember(c.g.ID, &r)
			plans := c.log.take()
			served1 := tl.Counts().Served
			prev = r
			if i == 0 || i < 10 {
				continue // the first pop has no ack to carry; the session's plans are made
			}
			if served1 != served0+1 {
				t.Fatalf("batch %d, cycle %d: not served from the tail", n, i)
			}
			if len(plans) != 1 || strings.Contains(plans[0], "queen.consumer_") && strings.Contains(plans[0], "Function Scan") {
				t.Fatalf("batch %d, cycle %d: %d statements, want 1 plain one: %q", n, i, len(plans), plans)
			}
			if strings.Contains(plans[0], "Seq Scan on log_segments") {
				t.Fatalf("batch %d, cycle %d: the log scanned whole:\n%s", n, i, plans[0])
			}
		}
	}
}

// TestATailCycleLeavesThreeFramesToTheGeneralPop: consumer_cycle's pop
// reads two frames at most; a pop wanting messages of a third frame the
// tail holds is not planned (no statement is sent for it), and the usual
// path delivers them all.
func TestATailCycleLeavesThreeFramesToTheGeneralPop(t *testing.T) {
	t.Parallel()
	b := setupTail(t)
	b.pushFed(t, "m0", "m1")
	b.pushFed(t, "m2", "m3")
	b.pushFed(t, "m4", "m5")
	b.pushFed(t, "m6", "m7")
	prev := b.popRemembered(t, 1) // 0
	r, served := b.carried(t, prev, 6)
	if served || !slices.Equal(txnIDsOf(r), []string{"m1", "m2", "m3", "m4", "m5", "m6"}) {
		t.Fatalf("across three frames: served %v, %v", served, txnIDsOf(r))
	}
	if n := b.tail.Tail.Counts(); n.Missed != 1 || n.Refused != 0 {
		t.Fatalf("missed %d, refused %d; want the cycle missed, no statement refused", n.Missed, n.Refused)
	}
	if r, served = b.carried(t, r, 4); !served || !slices.Equal(txnIDsOf(r), []string{"m7"}) {
		t.Fatalf("from the last frame: served %v, %v", served, txnIDsOf(r))
	}
}

// TestSegmentsStartFollowsRetentionAndPurges: segments_start is where the
// stored frames begin: raised past the frames retention deleted, and
// past everything a purge deleted.
func TestSegmentsStartFollowsRetentionAndPurges(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setupTail(t)
	start := func() int64 {
		var v int64
		if err := b.store.Pool().QueryRow(ctx, "SELECT segments_start FROM queen.log_partitions WHERE id = $1", b.part.ID).
			Scan(&v); err != nil {
			t.Fatal(err)
		}
		return v
	}
	b.push(t, -1, "m0", "m1")
	b.push(t, -1, "m2")
	b.push(t, -1, "m3", "m4")
	if s := start(); s != 0 {
		t.Fatalf("segments_start %d before any delete, want 0", s)
	}
	if _, _, err := b.store.Configure(ctx, b.queue, model.OptionsPatch{RetentionSeconds: ptr(10)}, false); err != nil {
		t.Fatal(err)
	}
	if _, err := b.store.Pool().Exec(ctx,
		"UPDATE queen.log_segments SET created_at = created_at - interval '30 seconds' WHERE partition_id = $1 AND base_offset < 2",
		b.part.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := b.store.Retain(ctx, retainOpts(time.Minute)); err != nil {
		t.Fatal(err)
	}
	if s := start(); s != 2 {
		t.Fatalf("segments_start %d after retention deleted 0..1, want 2", s)
	}
	if _, err := b.store.PurgeQueue(ctx, b.queue, "Default"); err != nil {
		t.Fatal(err)
	}
	if s := start(); s != 5 {
		t.Fatalf("segments_start %d after a purge of everything, want 5", s)
	}
}
