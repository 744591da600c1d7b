package consume_test

import (
	"context"
	"fmt"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	queengate "github.com/queengate/queengate"
	"github.com/queengate/queengate/consume"
	"github.com/queengate/queengate/gateway"
	"github.com/queengate/queengate/internal/checkfor"
	"github.com/queengate/queengate/internal/pgtest"
	"github.com/queengate/queengate/model"
	"github.com/queengate/queengate/pgstore"
)

// checkLeases fails t unless each lease of a holds its partition's
// messages from the first, in offset order, and no partition comes twice;
// it returns the partitions.
func checkLeases(t *testing.T, a queengate.PopAnswer, perPartition int) []string {
	t.Helper()
	var parts []string
	leases := map[string]bool{}
	for _, l := range a.Leases() {
		if slices.Contains(parts, l.Partition) || leases[l.LeaseID] || l.LeaseID == "" || l.LeaseUntil == nil {
			t.Fatalf("lease %+v: a partition or lease given twice, or no lease (answer %+v)", l, a)
		}
		parts, leases[l.LeaseID] = append(parts, l.Partition), true
		var got, want []string
		for i, m := range l.Messages {
			got = append(got, m.TransactionID)
			want = append(want, fmt.Sprintf("%s-%d", l.Partition, i))
		}
		if len(got) != perPartition || !slices.Equal(got, want) {
			t.Fatalf("partition %s delivered %v, want %v in offset order", l.Partition, got, want)
		}
	}
	return parts
}

func leaseAck(l queengate.PopLease) queengate.PopAck {
	ack := queengate.PopAck{Partition: l.Partition, LeaseID: l.LeaseID}
	for _, m := range l.Messages {
		ack.Items = append(ack.Items, queengate.AckItem{TransactionID: m.TransactionID, Status: queengate.AckCompleted})
	}
	return ack
}

// A pop of any partition with "partitions" fills its batch from several
// partitions, each under its own lease, each partition's messages in
// order; a second consumer's pop never gets a partition leased to the
// first; the next pop's "acks" settle each lease.
func TestAMultiPartitionPopFillsItsBatchFromSeveralPartitions(t *testing.T) {
	t.Parallel()
	parts := []string{"p0", "p1", "p2", "p3", "p4", "p5", "p6", "p7"}
	e, c := consuming(t, 5, parts...)
	ctx := t.Context()
	a, err := c.Pop(ctx, e.Queue, "", queengate.PopRequest{Group: "g", Consumer: "one", Max: 20, Partitions: 10})
	if err != nil || len(a.More) != 3 {
		t.Fatalf("first pop: %+v, %v; want 4 partitions of 5", a, err)
	}
	first := checkLeases(t, a, 5)
	b, err := c.Pop(ctx, e.Queue, "", queengate.PopRequest{Group: "g", Consumer: "two", Max: 100, Partitions: 10})
	if err != nil {
		t.Fatal(err)
	}
	second := checkLeases(t, b, 5)
	if len(second) != 4 || slices.ContainsFunc(second, func(p string) bool { return slices.Contains(first, p) }) {
		t.Fatalf("the second consumer got %v beside the first's %v: want the 4 others", second, first)
	}
	if n, err := c.Pop(ctx, e.Queue, "", queengate.PopRequest{Group: "g", Max: 100, Partitions: 10}); err != nil || len(n.Leases()) != 0 {
		t.Fatalf("a third pop while every partition is leased: %+v, %v", n, err)
	}
	var acks []queengate.PopAck
	for _, l := range a.Leases() {
		acks = append(acks, leaseAck(l))
	}
	acks[3].Items = acks[3].Items[:2] // the last lease settled in part: it runs on
	again, err := c.Pop(ctx, e.Queue, "", queengate.PopRequest{Group: "g", Consumer: "one", Max: 100, Partitions: 10, Acks: acks})
	if err != nil || len(again.Acks) != 4 || again.Ack != nil {
		t.Fatalf("a pop carrying 4 acks: %+v, %v", again, err)
	}
	for i, ack := range again.Acks {
		if want := i < 3; ack.LeaseEnded != want || ack.NextOffset != int64(len(acks[i].Items)) || ack.Items[len(ack.Items)-1].Result != "acked" {
			t.Errorf("ack %d of partition %s: %+v, want its lease ended %v", i, acks[i].Partition, ack, want)
		}
	}
	if len(again.Leases()) != 0 {
		t.Errorf("the pop after the acks delivered %+v: every partition has a running lease or nothing left", again.Leases())
	}
}

// Each lease of a multi-partition pop is its own: one renewed holds its
// partition while the other runs out and goes to another consumer, and
// an ack of each answers for its lease alone.
func TestTheLeasesOfAMultiPartitionPopRunOutEachOnItsOwn(t *testing.T) {
	t.Parallel()
	e, c := consuming(t, 3, "p0", "p1")
	ctx := t.Context()
	a, err := c.Pop(ctx, e.Queue, "", queengate.PopRequest{Group: "g", Consumer: "one", Max: 10, LeaseMs: 1000, Partitions: 2})
	if err != nil || len(a.Leases()) != 2 {
		t.Fatalf("pop: %+v, %v", a, err)
	}
	leases := a.Leases()
	kept, lapsed := leases[0], leases[1]
	if _, err := c.Renew(ctx, e.Queue, kept.Partition, queengate.LeaseRequest{Group: "g", LeaseID: kept.LeaseID, LeaseMs: 60000}); err != nil {
		t.Fatal(err)
	}
	var b queengate.PopAnswer
	checkfor.Check(t, 20*time.Second, func() error {
		if b, err = c.Pop(ctx, e.Queue, "", queengate.PopRequest{Group: "g", Consumer: "two", Max: 10, Partitions: 2}); err != nil {
			return err
		}
		if len(b.Leases()) == 0 {
			return fmt.Errorf("nothing popped yet: the lease of %s runs", lapsed.Partition)
		}
		return nil
	})
	if got := b.Leases(); len(got) != 1 || got[0].Partition != lapsed.Partition {
		t.Fatalf("after one lease ran out, another consumer got %+v; want partition %s alone", got, lapsed.Partition)
	}
	ans, err := c.Pop(ctx, e.Queue, "", queengate.PopRequest{Group: "g", Consumer: "one", Max: 10, Partitions: 2,
		Acks: []queengate.PopAck{leaseAck(kept), leaseAck(lapsed)}})
	if err != nil || len(ans.Acks) != 2 {
		t.Fatalf("acks: %+v, %v", ans, err)
	}
	if r := ans.Acks[0]; !r.LeaseEnded || r.Items[0].Result != "acked" {
		t.Errorf("the renewed lease's ack: %+v, want acked", r)
	}
	if r := ans.Acks[1].Items[0].Result; r != "leaseNotHeld" && r != "leaseExpired" {
		t.Errorf("the lapsed lease's ack: %s, want leaseNotHeld or leaseExpired", r)
	}
}

// A multi-partition pop takes no more than max messages, and no further
// partition once max is met; without "partitions" a pop answers as
// before: one lease, no "more".
func TestAMultiPartitionPopStopsAtMax(t *testing.T) {
	t.Parallel()
	e, c := consuming(t, 4, "p0", "p1", "p2")
	ctx := t.Context()
	a, err := c.Pop(ctx, e.Queue, "", queengate.PopRequest{Group: "g", Max: 6, Partitions: 3})
	if err != nil || len(a.Leases()) != 2 || len(a.Messages) != 4 || len(a.More[0].Messages) != 2 {
		t.Fatalf("pop of 6 over partitions of 4: %+v, %v; want 4 and 2", a, err)
	}
	one, err := c.Pop(ctx, e.Queue, "", queengate.PopRequest{Group: "h", Max: 100})
	if err != nil || len(one.Messages) != 4 || one.More != nil || one.Acks != nil {
		t.Fatalf("a pop without partitions: %+v, %v; want one partition's 4", one, err)
	}
}

// "partitions" is for a pop of any partition: with one named, a 400 says
// so and nothing is settled.
func TestAPopNamingItsPartitionRefusesPartitions(t *testing.T) {
	t.Parallel()
	e, c := consuming(t, 2, "p")
	ctx := t.Context()
	a, err := c.Pop(ctx, e.Queue, "p", queengate.PopRequest{Group: "g", Max: 1})
	if err != nil || len(a.Messages) != 1 {
		t.Fatalf("pop: %+v, %v", a, err)
	}
	ack := queengate.PopAck{Partition: "p", LeaseID: a.LeaseID, Items: completeAll(a)}
	_, err = c.Pop(ctx, e.Queue, "p", queengate.PopRequest{Group: "g", Partitions: 2, Acks: []queengate.PopAck{ack}})
	if !isCode(err, 400) {
		t.Fatalf("a pop of partition p with partitions 2: %v, want a 400", err)
	}
	got, err := c.Ack(ctx, e.Queue, "p", queengate.AckRequest{Group: "g", LeaseID: a.LeaseID, Items: ack.Items})
	if err != nil || got.Items[0].Result != "acked" {
		t.Fatalf("the ack after the refused pop: %+v, %v; want it unsettled until now", got, err)
	}
}

// countingStore is the PostgreSQL store, counting its statements that pop.
type countingStore struct {
	*pgstore.Store
	pops atomic.Int64
}

func (s *countingStore) Pop(ctx context.Context, r model.PopQuery) (model.PopResult, error) {
	s.pops.Add(1)
	return s.Store.Pop(ctx, r)
}

func (s *countingStore) PopMore(ctx context.Context, r model.PopQuery, partitions int, leaseEnvelope int64) ([]model.PopResult, error) {
	s.pops.Add(1)
	return s.Store.PopMore(ctx, r, partitions, leaseEnvelope)
}

// A multi-partition pop costs two statements of the store however many
// partitions it takes: its first partition's pop, and one for all the
// further ones when the first left messages to take; one when it finds
// nothing.
func TestAMultiPartitionPopCostsTwoStatements(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	st := &countingStore{Store: pgtest.Store(t, e.PGURL)}
	e.StartGateway(gatewayOpts{Gateway: gateway.Config{Endpoints: []gateway.EndpointSet{consume.New(st)}}})
	e.fill(t, 2, "p0", "p1", "p2", "p3", "p4", "p5", "p6")
	c := e.queenClient(t)
	pop := func(max, partitions int) (leases int, pops int64) {
		t.Helper()
		before := st.pops.Load()
		a, err := c.Pop(t.Context(), e.Queue, "", queengate.PopRequest{Group: "g", Max: max, Partitions: partitions})
		if err != nil {
			t.Fatal(err)
		}
		return len(a.Leases()), st.pops.Load() - before
	}
	for _, tc := range []struct {
		max, partitions, leases int
		pops                    int64
	}{
		{100, 4, 4, 2},  // four partitions
		{2, 10, 1, 1},   // max met by the first: no further look-up
		{3, 10, 2, 2},   // max met by the second
		{100, 10, 0, 1}, // every partition leased: the first finds nothing
	} {
		if leases, pops := pop(tc.max, tc.partitions); leases != tc.leases || pops != tc.pops {
			t.Errorf("a pop of %d over %d partitions: %d leases, %d store statements; want %d and %d", tc.max, tc.partitions, leases, pops, tc.leases, tc.pops)
		}
	}
}

// maxAckPending counts across the partitions of one pop: its further
// partitions deliver no more than the limit leaves after the first ones.
func TestAMultiPartitionPopStaysWithinMaxAckPending(t *testing.T) {
	t.Parallel()
	e, c := consuming(t, 5, "p0", "p1", "p2", "p3")
	a, err := c.Pop(t.Context(), e.Queue, "", queengate.PopRequest{Group: "g", Consumer: "c", Max: 100, Partitions: 4, MaxAckPending: 12})
	if err != nil {
		t.Fatal(err)
	}
	total := 0
	for _, l := range a.Leases() {
		total += len(l.Messages)
	}
	if total != 12 || len(a.Leases()) != 3 {
		t.Fatalf("a pop of 4 partitions of 5 under maxAckPending 12 delivered %d over %d leases; want 12 over 3", total, len(a.Leases()))
	}
}
