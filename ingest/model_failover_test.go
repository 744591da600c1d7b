package ingest_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/queengate/queengate/ingest"
	"github.com/queengate/queengate/internal/checkfor"
	"github.com/queengate/queengate/model"
)

// TestModelFailoverToAnAsyncStandby is the model with two gateways over a
// primary and an asynchronous standby, the store following the primary
// through a multi-host URL. At spread points the standby stops receiving
// WAL (asynchronous replication behind), a few requests later the primary
// is killed (kill -9) and the standby promoted, and the old primary comes
// back as the new one's standby (pg_rewind). soundStore reads, before
// every push, what the server the store then reaches holds, so every
// verdict after a promotion is judged against the new primary: it must
// equal the full probe there, whatever the caches learned of the old
// log. After each failover the gateways' lost reports together must name
// exactly the messages they acknowledged that the new primary lacks.
// QUEEN_MODEL_FAILOVERS (default 2) and QUEEN_MODEL_OPS (default 12,000)
// make it longer (`go tool task test:model`: 10 and 400,000).
func TestModelFailoverToAnAsyncStandby(t *testing.T) {
	t.Parallel()
	failovers := 2
	if v, err := strconv.Atoi(os.Getenv("QUEEN_MODEL_FAILOVERS")); err == nil {
		failovers = v
	}
	runModelWith(t, 2, failovers, 12_000)
}

// failoverModel drives the failovers of a model run and checks the lost
// reports.
type failoverModel struct {
	h      *haPair
	store  *soundStore
	r      *rand.Rand
	every  int // messages between failovers
	next   int // cut the standby off once this many messages were sent
	cutFor int // requests left before the failover, once cut; -1 while streaming
	done   int

	mu      sync.Mutex
	acked   map[[2]int64]ackedID // answered stored since the last failover
	reports [][]string
}

// ackedID is a message a gateway answered stored: its partition's name
// and its transactionId.
type ackedID struct {
	partition, id string
}

func newFailoverModel(h *haPair, store *soundStore, ops, failovers int) *failoverModel {
	f := &failoverModel{h: h, store: store, r: rand.New(rand.NewPCG(3, 5)), every: ops / (failovers + 1),
		cutFor: -1, acked: map[[2]int64]ackedID{}}
	f.next = f.every
	return f
}

// onLost collects the gateways' lost reports (Config.OnLost).
func (f *failoverModel) onLost(ids []string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.reports = append(f.reports, ids)
}

// ack records what a gateway answered stored (queued or duplicate).
func (f *failoverModel) ack(pid int64, req *ingest.Request, got []model.PushOutcome) {
	if f == nil {
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	for i, r := range got {
		if r.Status == model.StatusQueued || r.Status == model.StatusDuplicate {
			f.acked[[2]int64{pid, r.Offset}] = ackedID{partition: req.Partition, id: req.Messages[i].TxnID}
		}
	}
}

// step runs between two operations of the model: it cuts the standby off
// when due, and fails over a few requests later.
func (f *failoverModel) step(t *testing.T, sent int, ings []*ingest.Ingester, queue string) {
	if f == nil {
		return
	}
	switch {
	case f.cutFor < 0 && sent >= f.next:
		f.h.cut(t)
		f.cutFor = f.r.IntN(15)
	case f.cutFor == 0:
		f.failover(t, ings, queue)
		f.cutFor, f.next = -1, sent+f.every
	case f.cutFor > 0:
		f.cutFor--
	}
}

// failover kills the primary, promotes the standby, checks the lost
// reports, and brings the old primary back as a standby.
func (f *failoverModel) failover(t *testing.T, ings []*ingest.Ingester, queue string) {
	f.store.mu.Lock() // no push between the kill and the reads below
	allocators := f.allocators(t)
	f.h.failover(t)
	// Every connection of the pool reached the dead primary: each would
	// fail one request (answered failed, which the model does not
	// expect). The next reach the new primary.
	f.store.Store.Pool().Reset()
	f.store.mu.Unlock()
	f.done++
	want, lost := f.lacking(t)
	// Each gateway moves to the new server at its next push.
	for k, ing := range ings {
		ch := make(chan []model.PushOutcome, 1)
		req := &ingest.Request{Queue: queue, Partition: "after-failover",
			Messages: []model.Incoming{{TxnID: fmt.Sprintf("failover-%d-gateway-%d", f.done, k)}},
			Done:     func(r []model.PushOutcome) { ch <- r }}
		if err := ing.Submit(req); err != nil {
			t.Fatal(err)
		}
		if got := <-ch; got[0].Status != model.StatusQueued {
			t.Fatalf("failover %d: the first push through gateway %d answered %+v", f.done, k, got[0])
		}
	}
	checkfor.Check(t, time.Minute, func() error {
		f.mu.Lock()
		defer f.mu.Unlock()
		var got []string
		for _, r := range f.reports {
			got = append(got, r...)
		}
		if !sameSet(got, want) {
			return fmt.Errorf("failover %d: the gateways reported lost %v, want exactly the acknowledged messages the new primary lacks, %v", f.done, got, want)
		}
		return nil
	})
	t.Logf("failover %d: %d acknowledged messages lost", f.done, len(want))
	f.mu.Lock()
	f.acked, f.reports = map[[2]int64]ackedID{}, nil
	f.mu.Unlock()
	f.retryLost(t, ings, queue, lost, allocators)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if _, err := f.h.primary.Rewind(ctx, f.h.standby); err != nil {
		t.Fatal(err)
	}
	f.h.primary, f.h.standby = f.h.standby, f.h.primary
}

// lacking are the messageIds of the acknowledged messages the new primary
// does not hold (their hash at their offset), read with SQL of its own;
// an offset retention purged (below txns_start) cannot be told.
func (f *failoverModel) lacking(t *testing.T) (ids []string, lost map[string][]string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	ctx := context.Background()
	lost = map[string][]string{}
	for key, a := range f.acked {
		var held, purged bool
		err := f.store.Pool().QueryRow(ctx, `
			SELECT EXISTS (SELECT 1 FROM (SELECT x.partition_id, x.base_offset, x.end_offset, x.hashes FROM queen.log_txns x
			                              UNION ALL
			                              SELECT s.partition_id, s.base_offset, s.end_offset, s.hashes FROM queen.log_segments s) AS t
			                WHERE t.partition_id = $1 AND $2 BETWEEN t.base_offset AND t.end_offset
			                  AND t.hashes[$2 - t.base_offset + 1] = $3),
			       coalesce((SELECT $2 < p.txns_start AND $2 <= p.last_offset FROM queen.log_partitions p WHERE p.id = $1), false)`,
			key[0], key[1], model.HashTxnID(a.id)).Scan(&held, &purged)
		if err != nil {
			t.Fatal(err)
		}
		if !held && !purged {
			ids = append(ids, model.MessageID(key[0], key[1]))
			lost[a.partition] = append(lost[a.partition], a.id)
		}
	}
	slices.Sort(ids)
	return ids, lost
}

// allocators are the partitions' allocators, by name.
func (f *failoverModel) allocators(t *testing.T) map[string]int64 {
	rows, err := f.store.Pool().Query(context.Background(), "SELECT name, last_offset FROM queen.log_partitions")
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]int64{}
	for rows.Next() {
		var (
			name string
			last int64
		)
		if err := rows.Scan(&name, &last); err != nil {
			t.Fatal(err)
		}
		out[name] = last
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// retryLost is producers retrying the lost messages after the failover,
// the way that catches a cache still vouching for the old log: the last
// gateway stores them again, backwards (each at another's old offset),
// then fresh ids until the allocator is back where the old primary's
// was (so that a vouch for the old log would be honoured); then every
// gateway gets them again. soundStore judges every verdict: with the
// window on, a duplicate of where the new primary holds each.
func (f *failoverModel) retryLost(t *testing.T, ings []*ingest.Ingester, queue string, lost map[string][]string, allocators map[string]int64) {
	send := func(ing *ingest.Ingester, partition string, ids []string) []model.PushOutcome {
		ch := make(chan []model.PushOutcome, 1)
		req := &ingest.Request{Queue: queue, Partition: partition, Done: func(r []model.PushOutcome) { ch <- r }}
		for _, id := range ids {
			req.Messages = append(req.Messages, model.Incoming{TxnID: id})
		}
		if err := ing.Submit(req); err != nil {
			t.Fatal(err)
		}
		return <-ch
	}
	for partition, ids := range lost {
		backwards := slices.Clone(ids)
		slices.Reverse(backwards)
		got := send(ings[len(ings)-1], partition, backwards)
		last := got[len(got)-1].Offset
		if n := allocators[partition] - last; n > 0 {
			fill := make([]string, n)
			for i := range fill {
				fill[i] = fmt.Sprintf("fill-%d-%s-%d", f.done, partition, i)
			}
			send(ings[len(ings)-1], partition, fill)
		}
		for _, ing := range ings {
			send(ing, partition, ids)
		}
	}
}
