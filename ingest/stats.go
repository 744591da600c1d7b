package ingest

import (
	"sync"
	"sync/atomic"

	"github.com/queengate/queengate/dedup"
	"github.com/queengate/queengate/pgstore"
)

// tally counts one partition's answers since the process started, for
// operators (GET /queues/<queue>). One small struct per partition ever
// answered: partitions are rows in PostgreSQL already, so this grows no
// faster than the database.
type tally struct {
	queued, duplicate, failed atomic.Int64
}

func (t *tally) addN(s Status, n int64) {
	switch s {
	case StatusQueued:
		t.queued.Add(n)
	case StatusDuplicate:
		t.duplicate.Add(n)
	default:
		t.failed.Add(n)
	}
}

type tallies struct{ m sync.Map } // partition id -> *tally

// tallyOf returns pid's tally, nil for an unresolved partition (id 0).
func (in *Ingester) tallyOf(pid int64) *tally {
	if pid == 0 {
		return nil
	}
	if t, ok := in.tallies.m.Load(pid); ok {
		return t.(*tally)
	}
	t, _ := in.tallies.m.LoadOrStore(pid, new(tally))
	return t.(*tally)
}

// PartitionCounts are a partition's answers since this process started.
type PartitionCounts struct {
	Queued, Duplicate, Failed int64
}

// Counts reports partition pid's answers since start.
func (in *Ingester) Counts(pid int64) PartitionCounts {
	t, ok := in.tallies.m.Load(pid)
	if !ok {
		return PartitionCounts{}
	}
	x := t.(*tally)
	return PartitionCounts{Queued: x.queued.Load(), Duplicate: x.duplicate.Load(), Failed: x.failed.Load()}
}

// CacheState reports the dedup cache's entry for partition pid ("absent"
// with the cache off).
func (in *Ingester) CacheState(pid int64) dedup.PartitionState {
	if in.cache == nil {
		return dedup.PartitionState{State: "absent", HydratedFrom: -1, VerifiedUpto: -1}
	}
	return in.cache.Partition(pid)
}

// CacheStats reports the dedup cache's figures and its budget; ok is
// false with the cache off.
func (in *Ingester) CacheStats() (st dedup.Stats, budget int64, ok bool) {
	if in.cache == nil {
		return dedup.Stats{}, 0, false
	}
	return in.cache.Stats(), in.cache.Budget(), true
}

// LearnCommitted tells the cache of messages another path committed to
// partition pid at offsets base.. (a timer's fire, in the same process):
// the entry keeps vouching instead of meeting them as an interleave. The
// entry's rules keep this safe in any order relative to this ingester's
// own pushes: an out-of-order report is a gap or an overlap, which only
// costs a rehydration.
func (in *Ingester) LearnCommitted(pid, base int64, txnIDs []string) {
	if in.cache == nil || len(txnIDs) == 0 {
		return
	}
	hashes := make([]dedup.Hash, len(txnIDs))
	for i, id := range txnIDs {
		hashes[i] = pgstore.HashTxnID(id)
	}
	in.cache.Learn(pid, base, base+int64(len(txnIDs))-1, hashes)
}
