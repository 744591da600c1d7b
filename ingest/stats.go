package ingest

import (
	"sync"
	"sync/atomic"

	"github.com/queengate/queengate/dedup"
	"github.com/queengate/queengate/model"
)

// tally counts one partition's answers since the process started, for
// operators (GET /queues/<queue>). One small struct per partition ever
// answered: partitions are rows in PostgreSQL already, so this grows no
// faster than the database. Each adds to its queue's tally too, so that
// the overview's samples read one tally per queue, not every partition.
type tally struct {
	queued, duplicate, failed atomic.Int64
	probes                    [model.ProbeFull + 1]atomic.Int64 // flushes by probe kind
	queue                     *tally                            // the partition's queue's; nil for a queue's own
}

func (t *tally) addN(s model.Status, n int64) {
	switch s {
	case model.StatusQueued:
		t.queued.Add(n)
	case model.StatusDuplicate:
		t.duplicate.Add(n)
	default:
		t.failed.Add(n)
	}
	if t.queue != nil {
		t.queue.addN(s, n)
	}
}

// probed counts a flush by what its probe did; t may be nil (an
// unresolved partition).
func (t *tally) probed(p model.Probe) {
	if t != nil && p <= model.ProbeFull {
		t.probes[p].Add(1)
		t.queue.probed(p)
	}
}

func (t *tally) counts() PartitionCounts {
	return PartitionCounts{Queued: t.queued.Load(), Duplicate: t.duplicate.Load(), Failed: t.failed.Load(),
		ProbeSkipped: t.probes[model.ProbeSkipped].Load(), ProbeNarrowed: t.probes[model.ProbeNarrowed].Load(),
		ProbeFull: t.probes[model.ProbeFull].Load()}
}

// tallies is partition id -> *tally: a plain map under a read-write lock,
// about a third of a sync.Map's bytes per partition (its nodes and boxed
// keys), read once per flush of a partition.
type tallies struct {
	mu     sync.RWMutex
	m      map[int64]*tally
	queues map[int64]*tally // queue id -> the sum of its partitions'
}

func (ts *tallies) load(pid int64) *tally {
	ts.mu.RLock()
	defer ts.mu.RUnlock()
	return ts.m[pid]
}

// tallyOf returns the tally of partition pid of queue queueID, nil for
// an unresolved partition (id 0).
func (in *Ingester) tallyOf(pid, queueID int64) *tally {
	if pid == 0 {
		return nil
	}
	ts := &in.tallies
	if t := ts.load(pid); t != nil {
		return t
	}
	ts.mu.Lock()
	defer ts.mu.Unlock()
	t := ts.m[pid]
	if t == nil {
		if ts.m == nil {
			ts.m, ts.queues = map[int64]*tally{}, map[int64]*tally{}
		}
		q := ts.queues[queueID]
		if q == nil {
			q = new(tally)
			ts.queues[queueID] = q
		}
		t = &tally{queue: q}
		ts.m[pid] = t
	}
	return t
}

// PartitionCounts are a partition's answers since this process started,
// and its flushes by what the probe did.
type PartitionCounts struct {
	Queued, Duplicate, Failed              int64
	ProbeSkipped, ProbeNarrowed, ProbeFull int64
}

// Counts reports partition pid's answers since start.
func (in *Ingester) Counts(pid int64) PartitionCounts {
	x := in.tallies.load(pid)
	if x == nil {
		return PartitionCounts{}
	}
	return x.counts()
}

// PartitionCache is a partition's dedup cache entry, as operators see it.
type PartitionCache struct {
	// State is "vouching", "gap" (another writer interleaved; filled on
	// next use), "rebuild" (overlap or window change), "suppressed" (the
	// admission gate refused its rebuild for now) or "absent" (no entry,
	// or the cache off).
	State          string
	ResidentHashes int
	Bytes          int64
	// HydratedFrom and VerifiedUpto bound what the entry knows: every
	// hash stored in (HydratedFrom, VerifiedUpto]; -1 when absent.
	HydratedFrom, VerifiedUpto int64
}

// CacheState reports the dedup cache's entry for partition pid.
func (in *Ingester) CacheState(pid int64) PartitionCache {
	if in.cache == nil {
		return PartitionCache{State: "absent", HydratedFrom: -1, VerifiedUpto: -1}
	}
	p := in.cache.Partition(pid)
	return PartitionCache{State: p.State, ResidentHashes: p.ResidentHashes, Bytes: p.Bytes,
		HydratedFrom: p.HydratedFrom, VerifiedUpto: p.VerifiedUpto}
}

// CacheSummary is the dedup cache as operators see it: its budget, what
// is resident, and what it has done since the process started.
type CacheSummary struct {
	BudgetBytes, ResidentBytes, ResidentHashes int64
	Entries, Suppressed                        int
	// Hydrations read a partition's whole window; births install the
	// entry of a partition a flush created, reading nothing; fills read
	// only the rows above an entry's watermark, after a gap.
	Hydrations, Births, Fills, Gaps, Rebuilds, Evictions int64
}

// CacheSummary reports the dedup cache; ok is false with the cache off.
func (in *Ingester) CacheSummary() (sum CacheSummary, ok bool) {
	if in.cache == nil {
		return CacheSummary{}, false
	}
	st := in.cache.Stats()
	return CacheSummary{BudgetBytes: in.cache.Budget(), ResidentBytes: st.ResidentBytes, ResidentHashes: st.ResidentHashes,
		Entries: st.Entries, Suppressed: st.Suppressed, Hydrations: st.Hydrations, Births: st.Births, Fills: st.Fills, Gaps: st.Gaps,
		Rebuilds: st.Rebuilds, Evictions: st.Evictions}, true
}

// LearnFired tells the cache what timer fires of this process committed
// (in partition, then offset order, as the store returns them): each
// entry keeps vouching instead of meeting them as an interleave. The
// entry's rules keep this safe in any order relative to this ingester's
// own pushes: an out-of-order report is a gap or an overlap, which only
// costs a fill or a rehydration. A fire is learned only under the store
// epoch it was fired in, as a push is.
func (in *Ingester) LearnFired(fired []model.FiredTimer) {
	if in.cache == nil {
		return
	}
	for i := 0; i < len(fired); {
		j := i + 1 // fired[i:j] are consecutive offsets of one partition
		for j < len(fired) && fired[j].PartitionID == fired[i].PartitionID && fired[j].Offset == fired[j-1].Offset+1 {
			j++
		}
		hashes := make([]dedup.Hash, 0, j-i)
		for _, f := range fired[i:j] {
			hashes = append(hashes, model.HashTxnID(f.TxnID))
		}
		in.underEpoch(fired[i].Epoch, func() { in.cache.Learn(fired[i].PartitionID, fired[i].Offset, fired[j-1].Offset, hashes) })
		i = j
	}
}

// HashLookup is what this gateway's dedup cache knows of one hash in a
// partition: the entry's state ("absent" with the cache off), the hash's
// resident offsets, Wide when it is resident where offsets are not kept,
// and the watermark a push would vouch for.
type HashLookup struct {
	State        string
	Offsets      []int64
	Wide         bool
	VerifiedUpto int64
}

// CacheLookup reports what the dedup cache knows of hash h in partition
// pid, without changing anything.
func (in *Ingester) CacheLookup(pid int64, h model.Hash) HashLookup {
	if in.cache == nil {
		return HashLookup{State: "absent", VerifiedUpto: -1}
	}
	l := in.cache.Look(pid, h)
	return HashLookup{State: l.State, Offsets: l.Offsets, Wide: l.Wide, VerifiedUpto: l.VerifiedUpto}
}

// EachQueueCounts calls f with the answers since start of every queue
// (by id) this process answered: the sums of its partitions' counts.
func (in *Ingester) EachQueueCounts(f func(queueID int64, c PartitionCounts)) {
	in.tallies.mu.RLock()
	queues := make(map[int64]*tally, len(in.tallies.queues))
	for id, t := range in.tallies.queues {
		queues[id] = t
	}
	in.tallies.mu.RUnlock()
	for id, t := range queues {
		f(id, t.counts())
	}
}
