package pgstore_test

import (
	"context"
	"slices"
	"testing"

	"github.com/queengate/queengate/model"
)

// AckMany settles each carried ack as Ack would, in order: two groups
// over the same messages, one settled ack by ack and one by AckMany,
// answer the same outcomes and end with the same cursors. The acks mix a
// whole lease, part of one with a failure, and one under a lease not held.
func TestAckManySettlesEachAckAsAckDoes(t *testing.T) {
	ctx := context.Background()
	q, st := sharedManyPartitions(t, 3)
	q.push(t, 4, q.parts...)
	settle := func(g model.Group, many bool) (outcomes [][]string, next []int64) {
		var acks []model.CarriedAck
		for i := range q.parts {
			r := q.pop(t, g, 10)
			items := wholeAck(r)
			switch i {
			case 1:
				items = []model.Settlement{items[0], failed(r.Messages[1].TxnID, "bad")}
			case 2:
				r.LeaseID = "00000000-0000-0000-0000-000000000000"
			}
			acks = append(acks, model.CarriedAck{PartitionID: r.PartitionID, LeaseID: r.LeaseID, Items: items})
		}
		slices.SortFunc(acks, func(a, b model.CarriedAck) int { return int(a.PartitionID - b.PartitionID) })
		var res []model.SettledBatch
		if many {
			var err error
			if res, err = st.AckMany(ctx, g, acks); err != nil {
				t.Fatal(err)
			}
		} else {
			for _, a := range acks {
				r, err := st.Ack(ctx, g, a.PartitionID, a.LeaseID, a.Items)
				if err != nil {
					t.Fatal(err)
				}
				res = append(res, r)
			}
		}
		for _, r := range res {
			outcomes, next = append(outcomes, results(r)), append(next, r.NextOffset)
		}
		return outcomes, next
	}
	oneByOne, nextOne := settle(q.group(t, "one-by-one"), false)
	together, nextMany := settle(q.group(t, "together"), true)
	if !slices.EqualFunc(oneByOne, together, slices.Equal) || !slices.Equal(nextOne, nextMany) {
		t.Fatalf("AckMany answered %v (cursors %v); Ack one by one %v (cursors %v)", together, nextMany, oneByOne, nextOne)
	}
	if len(together) != 3 || together[0][0] != model.AckAcked {
		t.Fatalf("outcomes %v: want three acks, the first acked", together)
	}
}

// Two batches of acks naming the same partitions in opposite orders
// (acks of leases that ran out, say, retried by two consumers) never
// wait for each other in a cycle: each takes its cursor rows in
// ascending partition id. Otherwise PostgreSQL finds a deadlock and
// fails one of them.
func TestAckManyBatchesNeverDeadlock(t *testing.T) {
	ctx := context.Background()
	q, st := sharedManyPartitions(t, 2)
	q.push(t, 1, q.parts...)
	g := q.group(t, "g")
	stale := "00000000-0000-0000-0000-000000000000"
	ack := func(p model.Partition) model.CarriedAck {
		return model.CarriedAck{PartitionID: p.ID, LeaseID: stale, Items: []model.Settlement{doneAt(0)}}
	}
	forward := []model.CarriedAck{ack(q.parts[0]), ack(q.parts[1])}
	backward := []model.CarriedAck{ack(q.parts[1]), ack(q.parts[0])}
	errs := make(chan error, 2)
	for _, acks := range [][]model.CarriedAck{forward, backward} {
		go func() {
			for range 200 {
				if _, err := st.AckMany(ctx, g, acks); err != nil {
					errs <- err
					return
				}
			}
			errs <- nil
		}()
	}
	for range 2 {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
}
