package ingest

import (
	"sync"
	"sync/atomic"

	"github.com/queengate/queengate/dedup"
	"github.com/queengate/queengate/model"
)

// tally counts one partition's answers since the process started, for
// operators (GET /queues/<queue>), or one queue's: the sum of its
// partitions', which the overview's samples read instead of every
// partition's. One small struct per partition ever answered: partitions
// are rows in PostgreSQL already, so this grows no faster than the
// database. It holds no pointer (see tallies).
type tally struct {
	queued, duplicate, failed atomic.Int64
	probes                    [model.ProbeFull + 1]atomic.Int64 // flushes by probe kind
	queueID                   int64                             // a partition's queue
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
}

// counted is where a flush's answers count: its partition's tally and
// its queue's; both nil for an unresolved partition.
type counted struct{ partition, queue *tally }

func (c counted) addN(s model.Status, n int64) {
	if c.partition != nil {
		c.partition.addN(s, n)
		c.queue.addN(s, n)
	}
}

// probed counts a flush by what its probe did.
func (c counted) probed(p model.Probe) {
	if c.partition != nil && p <= model.ProbeFull {
		c.partition.probes[p].Add(1)
		c.queue.probes[p].Add(1)
	}
}

func (t *tally) counts() PartitionCounts {
	return PartitionCounts{Queued: t.queued.Load(), Duplicate: t.duplicate.Load(), Failed: t.failed.Load(),
		ProbeSkipped: t.probes[model.ProbeSkipped].Load(), ProbeNarrowed: t.probes[model.ProbeNarrowed].Load(),
		ProbeFull: t.probes[model.ProbeFull].Load()}
}

// tallies is partition id -> its tally, read once per flush of a
// partition: a map of slots into slabs that never move, so a flush keeps
// its partition's pointer without the lock. Neither the map nor a slab
// holds a pointer, so the collector does not look inside them: a map of
// pointers to a tally each was, at 840,000 partitions, 115 MB the
// collector marked on every cycle (sessions1m).
type tallies struct {
	mu     sync.RWMutex
	slot   map[int64]int32 // partition id -> its tally's slot
	slabs  [][]tally       // slot k is slabs[k/tallySlab][k%tallySlab]
	queues map[int64]*tally
}

// tallySlab is the tallies per slab: 256 KiB each (64 bytes a tally).
const tallySlab = 4096

func (ts *tallies) load(pid int64) (counted, bool) {
	ts.mu.RLock()
	defer ts.mu.RUnlock()
	return ts.loadLocked(pid)
}

func (ts *tallies) loadLocked(pid int64) (counted, bool) {
	k, ok := ts.slot[pid]
	if !ok {
		return counted{}, false
	}
	t := &ts.slabs[k/tallySlab][k%tallySlab]
	return counted{partition: t, queue: ts.queues[t.queueID]}, true
}

// tallyOf returns where partition pid of queue queueID counts; nothing
// for an unresolved partition (id 0).
func (in *Ingester) tallyOf(pid, queueID int64) counted {
	if pid == 0 {
		return counted{}
	}
	ts := &in.tallies
	if c, ok := ts.load(pid); ok {
		return c
	}
	ts.mu.Lock()
	defer ts.mu.Unlock()
	if c, ok := ts.loadLocked(pid); ok {
		return c
	}
	if ts.slot == nil {
		ts.slot, ts.queues = map[int64]int32{}, map[int64]*tally{}
	}
	k := int32(len(ts.slot))
	if int(k)%tallySlab == 0 {
		ts.slabs = append(ts.slabs, make([]tally, tallySlab))
	}
	ts.slot[pid] = k
	ts.slabs[k/tallySlab][k%tallySlab].queueID = queueID
	if ts.queues[queueID] == nil {
		ts.queues[queueID] = new(tally)
	}
	c, _ := ts.loadLocked(pid)
	return c
}

// PartitionCounts are a partition's answers since this process started,
// and its flushes by what the probe did.
type PartitionCounts struct {
	Queued, Duplicate, Failed              int64
	ProbeSkipped, ProbeNarrowed, ProbeFull int64
}

// Counts reports partition pid's answers since start.
func (in *Ingester) Counts(pid int64) PartitionCounts {
	c, ok := in.tallies.load(pid)
	if !ok {
		return PartitionCounts{}
	}
	return c.partition.counts()
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
	// BudgetInForceBytes is what the cache may hold now: BudgetBytes
	// less what it yields to the rest of the process (dedup.Cache.Yield).
	BudgetInForceBytes  int64
	Entries, Suppressed int
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
	return CacheSummary{BudgetBytes: in.cache.Budget(), BudgetInForceBytes: st.BudgetBytes, ResidentBytes: st.ResidentBytes, ResidentHashes: st.ResidentHashes,
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

// QueueCounts reports queue queueID's answers since start: the sums of
// its partitions' counts (a queue made again has another id).
func (in *Ingester) QueueCounts(queueID int64) PartitionCounts {
	in.tallies.mu.RLock()
	t := in.tallies.queues[queueID]
	in.tallies.mu.RUnlock()
	if t == nil {
		return PartitionCounts{}
	}
	return t.counts()
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
