package ingest

import (
	"context"
	"sync"
	"time"

	"github.com/queengate/queengate/model"
)

// storeEpoch is the store epoch (Store.Epoch) the ingester's dedup cache
// and partition memos speak of. Everything the cache holds was read or
// written on connections of this epoch: each write into it (an install,
// a birth, a fill, a learn) is made under mu held shared, and only if the
// epoch it came from is this one; moving to a newer epoch clears the
// cache under mu held alone. A push is built under the epoch read at its
// start and sent only on a connection of that epoch (Store.PushUnder),
// so no vouch and no partition id crosses from one server's log to
// another's.
type storeEpoch struct {
	mu       sync.RWMutex
	n        uint64
	identity string
}

// epoch is the store's latest epoch, which the ingester moves to first
// if it is newer than the one its cache holds.
func (in *Ingester) epoch(ctx context.Context) uint64 {
	n, identity := in.store.Epoch(ctx)
	in.ep.mu.RLock()
	held := in.ep.n
	in.ep.mu.RUnlock()
	if n > held {
		in.moveTo(n, identity)
	}
	return n
}

// underEpoch runs f, a write into the cache of what was read or written
// under epoch n, if n is the cache's epoch; else it drops it.
func (in *Ingester) underEpoch(n uint64, f func()) {
	in.ep.mu.RLock()
	defer in.ep.mu.RUnlock()
	if in.cache != nil && n != 0 && n == in.ep.n {
		f()
	}
}

// moveTo makes n the ingester's epoch: the dedup cache is dropped (each
// partition hydrates again from the store as it is now), and the
// acknowledged messages journaled under older epochs are checked against
// the store, in the background, for what it lacks.
func (in *Ingester) moveTo(n uint64, identity string) {
	in.ep.mu.Lock()
	if n <= in.ep.n {
		in.ep.mu.Unlock()
		return
	}
	first := in.ep.n == 0
	was := in.ep.identity
	in.ep.n, in.ep.identity = n, identity
	dropped := 0
	if in.cache != nil {
		dropped = in.cache.Clear()
	}
	acked := in.journal.takeBefore(n)
	in.ep.mu.Unlock()
	if first {
		return // the first epoch: nothing was learned before it
	}
	in.metrics.storeChanges.Inc()
	in.log.Error().Str("was", was).Str("now", identity).Uint64("epoch", n).Int("cache_entries_dropped", dropped).
		Int("acknowledged_to_check", len(acked)).
		Msg("PostgreSQL changed (failover, restart, restored backup, or a log shorter than written): dedup cache dropped, partitions rehydrate")
	go in.reportLost(n, acked)
}

// maxLostLogged bounds the messageIds one report logs; the counter and
// Config.OnLost get them all.
const maxLostLogged = 1000

// reportLost checks acknowledged messages against the store, now of
// epoch n or later, and reports those it lacks: counted, logged with
// their messageIds, and handed to Config.OnLost. It tries for a minute;
// a connection of an older server (epoch 0) does not count.
func (in *Ingester) reportLost(n uint64, acked []acked) {
	var pids, offsets []int64
	var hashes []model.Hash
	seen := map[[2]int64]bool{}
	for _, a := range acked {
		key := [2]int64{a.pid, a.offset}
		if !seen[key] {
			seen[key] = true
			pids, offsets, hashes = append(pids, a.pid), append(offsets, a.offset), append(hashes, a.hash)
		}
	}
	var lacking []bool
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for wait := 100 * time.Millisecond; len(pids) > 0; wait = min(2*wait, 5*time.Second) {
		var at uint64
		var err error
		if lacking, at, err = in.store.Lacks(ctx, pids, offsets, hashes); err == nil && at >= n {
			break
		}
		lacking = nil
		select {
		case <-ctx.Done():
			in.log.Error().Int("acknowledged", len(pids)).Msg("could not check which acknowledged messages PostgreSQL lacks after it changed")
			return
		case <-time.After(wait):
		}
	}
	var lost []string
	for k, l := range lacking {
		if l {
			lost = append(lost, model.MessageID(pids[k], offsets[k]))
		}
	}
	in.metrics.lost.Add(float64(len(lost)))
	if len(lost) > 0 {
		in.log.Error().Int("lost", len(lost)).Strs("message_ids", lost[:min(len(lost), maxLostLogged)]).
			Msg("acknowledged messages PostgreSQL lacks after it changed: lost to asynchronous replication (or to the restore)")
	}
	if in.cfg.OnLost != nil {
		in.cfg.OnLost(lost)
	}
}

// acked is a message this ingester answered stored, at offset of
// partition pid (queued there, or a duplicate of it), under epoch.
type acked struct {
	epoch       uint64
	pid, offset int64
	hash        model.Hash
}

// journal is the last acknowledged messages, up to a bound (a ring), so
// that a store that changes can be asked which of them it lacks.
type journal struct {
	mu    sync.Mutex
	max   int
	items []acked // a ring once full: next is the oldest
	next  int
}

// record journals what a committed push answered, under epoch n.
func (j *journal) record(n uint64, frames []model.Frame, results []model.FrameResult) {
	if j.max <= 0 {
		return
	}
	j.mu.Lock()
	defer j.mu.Unlock()
	for i := range frames {
		for k, o := range results[i].Outcomes {
			a := acked{epoch: n, pid: frames[i].PartitionID, offset: o.Offset, hash: frames[i].Hashes[k]}
			if len(j.items) < j.max {
				j.items = append(j.items, a)
				continue
			}
			j.items[j.next] = a
			j.next = (j.next + 1) % j.max
		}
	}
}

// takeBefore removes and returns what was acknowledged under epochs
// before n.
func (j *journal) takeBefore(n uint64) []acked {
	j.mu.Lock()
	defer j.mu.Unlock()
	var out, kept []acked
	for _, a := range j.items {
		if a.epoch < n {
			out = append(out, a)
		} else {
			kept = append(kept, a)
		}
	}
	j.items, j.next = kept, 0
	return out
}
