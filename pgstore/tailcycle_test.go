package pgstore_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/queengate/queengate/model"
	"github.com/queengate/queengate/tail"
)

// setupConsumerInFrames is setupConsumer with the n messages pushed in
// frames of 1 to 12 (message i's data frameData(i, "t<i>") whatever its
// frame), each fed to a tail as a gateway's ingester feeds it, and the
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
		}
		res, at, err := b.store.PushUnder(ctx, epoch, []model.Frame{fr})
		if err != nil || res[0].BaseOffset != int64(i) {
			t.Fatalf("push of %d from %d: %+v %v", k, i, res, err)
		}
		tl.Add(at, b.part.ID, tail.NewFrame(res[0].BaseOffset, fr.TxnIDs, fr.Data, res[0].CreatedAt))
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
func (b *consumerBundle) tailCycle(t *testing.T, r model.PopRequest, lease string, items []model.AckItem) (
	model.AckResult, *model.PopResult, bool) {
	t.Helper()
	if b.tail == nil {
		return model.AckResult{}, nil, false
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
	served, _, _ := b.tail.Tail.Counts()
	return served
}
