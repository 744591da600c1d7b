package ingest_test

import (
	"context"
	"testing"
	"time"

	"github.com/queengate/queengate/ingest"
	"github.com/queengate/queengate/internal/checkfor"
	"github.com/queengate/queengate/internal/pgtest"
	"github.com/queengate/queengate/model"
)

// TestTheTailHoldsWhatWasCommittedUntilTheStoreChanges: the ingester's
// tail holds each committed frame's new messages as log_segments holds
// them (a duplicate left out, the stored created_at), contiguous; a new
// store epoch drops it whole (here a distrust, which a failover's new
// identity does the same way), and a queue's delete drops its
// partitions'.
func TestTheTailHoldsWhatWasCommittedUntilTheStoreChanges(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	store := pgtest.Store(t, pgtest.SharedURL(t))
	queue := pgtest.UniqueName(t)
	g := newGateway(t, store, queue, 0)
	pid := g.push(t, "p", "a", "b", "c")[0].PartitionID
	g.push(t, "p", "b", "d") // b a duplicate: d at 3
	tl := g.ing.Tail()
	for off, want := range []string{"a", "b", "c", "d"} {
		f, _, n, held := tl.Window(pid, int64(off))
		if !held {
			t.Fatalf("offset %d not in the tail", off)
		}
		k := int64(off) - f.Base
		var data string
		var created time.Time
		if err := store.Pool().QueryRow(ctx, `SELECT s.data[$2 - s.base_offset + 1]::text, s.created_at FROM queen.log_segments s
			WHERE s.partition_id = $1 AND s.base_offset <= $2 AND s.end_offset >= $2`, pid, off).Scan(&data, &created); err != nil {
			t.Fatal(err)
		}
		if f.TxnIDs[k] != want || string(f.Data[k]) != data || !f.CreatedAt.Equal(created) {
			t.Fatalf("offset %d: tail %q %s %s; stored %q %s %s", off, f.TxnIDs[k], f.Data[k], f.CreatedAt, want, data, created)
		}
		if epoch, _ := store.Epoch(ctx); n != epoch {
			t.Fatalf("the tail speaks of epoch %d, the store's is %d", n, epoch)
		}
	}

	epoch, _ := store.Epoch(ctx)
	store.Distrust(epoch)
	g.push(t, "other", "x") // the ingester meets the new epoch
	if _, _, n, held := tl.Window(pid, 0); held || n != epoch+1 {
		t.Fatalf("after the epoch changed: held %v, epoch %d; want nothing, epoch %d", held, n, epoch+1)
	}
	g.push(t, "p", "e")
	if _, _, _, held := tl.Window(pid, 4); !held {
		t.Fatal("a frame committed under the new epoch is not in the tail")
	}

	g.ing.ForgetQueue(queue)
	checkfor.Check(t, time.Minute, checkfor.Cond("the deleted queue's tail to go", func() bool {
		_, _, _, held := tl.Window(pid, 4)
		return !held
	}))
}

// TestTheTailHoldsDataAsStored: a message sent without data is stored as
// JSON null, and the tail holds it so (the gateway's check mode found the
// tail holding nothing where SQL held null).
func TestTheTailHoldsDataAsStored(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	store := pgtest.Store(t, pgtest.SharedURL(t))
	g := newGateway(t, store, pgtest.UniqueName(t), 0)
	done := make(chan []model.PushOutcome, 1)
	req := &ingest.Request{Queue: g.queue, Partition: "p", Done: func(r []model.PushOutcome) { done <- r },
		Messages: []model.Incoming{{TxnID: "none"}, {TxnID: "some", Data: []byte(`{"a": 1}`)}}}
	if err := g.ing.Submit(req); err != nil {
		t.Fatal(err)
	}
	res := <-done
	pid := res[0].PartitionID
	f, _, _, held := g.ing.Tail().Window(pid, 0)
	if !held {
		t.Fatal("the frame is not in the tail")
	}
	var stored []string
	if err := store.Pool().QueryRow(ctx, "SELECT data::text[] FROM queen.log_segments WHERE partition_id = $1 AND base_offset = 0",
		pid).Scan(&stored); err != nil {
		t.Fatal(err)
	}
	if len(stored) != 2 || string(f.Data[0]) != stored[0] || string(f.Data[1]) != stored[1] {
		t.Fatalf("tail %q, stored %q", f.Data, stored)
	}
}
