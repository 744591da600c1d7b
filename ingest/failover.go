package ingest

import (
	"context"
	"slices"
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

// moveTo makes n the ingester's epoch: the dedup cache and the tail are
// dropped (each partition hydrates again from the store as it is now,
// and the tail fills with what is committed from now on), and the
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
	if in.tail != nil {
		in.tail.Reset(n) // what it holds was committed on another server, perhaps lost
	}
	acked, unchecked := in.journal.takeBefore(n)
	in.ep.mu.Unlock()
	if first {
		return // the first epoch: nothing was learned before it
	}
	in.metrics.storeChanges.Inc()
	in.log.Error().Str("was", was).Str("now", identity).Uint64("epoch", n).Int("cache_entries_dropped", dropped).
		Int("acknowledged_to_check", len(acked)).Int("acknowledged_unchecked", unchecked).
		Msg("PostgreSQL changed (failover, restart, restored backup, or a log shorter than written): dedup cache dropped, partitions rehydrate")
	go in.reportLost(n, acked, unchecked)
}

// maxLostLogged bounds the messageIds one report logs; the counter and
// Config.OnLost get them all.
const maxLostLogged = 1000

// reportLost checks acknowledged messages against the store, now of
// epoch n or later, and reports those it lacks: counted, logged with
// their messageIds, and handed to Config.OnLost. unchecked is how many
// older acknowledgements the journal no longer held (reportUnchecked).
// It tries for a minute; a connection of an older server (epoch 0) does
// not count.
func (in *Ingester) reportLost(n uint64, acked []acked, unchecked int) {
	pids, offsets, hashes := distinctAcked(acked)
	lacking, err := in.lacking(n, pids, offsets, hashes)
	if err != nil {
		in.log.Error().Int("acknowledged", len(pids)).Int("acknowledged_unchecked", unchecked).
			Msg("could not check which acknowledged messages PostgreSQL lacks after it changed")
		return
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
	in.reportUnchecked(unchecked, len(pids), lacking)
	if in.cfg.OnLost != nil {
		in.cfg.OnLost(lost)
	}
}

// distinctAcked lists each acknowledged message once, oldest first.
func distinctAcked(acked []acked) (pids, offsets []int64, hashes []model.Hash) {
	seen := map[[2]int64]bool{}
	for _, a := range acked {
		key := [2]int64{a.pid, a.offset}
		if !seen[key] {
			seen[key] = true
			pids, offsets, hashes = append(pids, a.pid), append(offsets, a.offset), append(hashes, a.hash)
		}
	}
	return pids, offsets, hashes
}

// lacking asks the store, once it is of epoch n or later, which of the
// messages it lacks, trying for a minute.
func (in *Ingester) lacking(n uint64, pids, offsets []int64, hashes []model.Hash) ([]bool, error) {
	if len(pids) == 0 {
		return nil, nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for wait := 100 * time.Millisecond; ; wait = min(2*wait, 5*time.Second) {
		lacking, at, err := in.store.Lacks(ctx, pids, offsets, hashes)
		if err == nil && at >= n {
			return lacking, nil
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(wait):
		}
	}
}

// oldestChecked is how many of the oldest acknowledgements checked stand
// for those the journal no longer held: present, the losses (the tail of
// the log a failover cut) began after them.
const oldestChecked = 1000

// reportUnchecked says what the lost report could not cover: unchecked
// acknowledgements older than the journal (Config.Journal) were not
// asked about. Counted always; logged as an error when any of the oldest
// checked were lost too, so losses may reach further back than the
// report, else as a warning.
func (in *Ingester) reportUnchecked(unchecked, checked int, lacking []bool) {
	if unchecked == 0 {
		return
	}
	in.metrics.unchecked.Add(float64(unchecked))
	ev := in.log.Warn()
	msg := "the lost report covered only the journal's acknowledgements; the oldest it checked were all present, so the older ones are very likely too"
	if slices.Contains(lacking[:min(len(lacking), oldestChecked)], true) {
		ev = in.log.Error()
		msg = "the lost report covered only the journal's acknowledgements, and the oldest it checked were lost: losses may reach further back than it says (raise the journal: --failover-journal)"
	}
	ev.Int("acknowledged_checked", checked).Int("acknowledged_unchecked", unchecked).Msg(msg)
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
	// overwritten counts acknowledgements the ring has dropped since the
	// last takeBefore.
	overwritten int
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
			j.overwritten++
		}
	}
}

// takeBefore removes and returns what was acknowledged under epochs
// before n, oldest first, and how many acknowledgements the ring dropped
// before them.
func (j *journal) takeBefore(n uint64) (out []acked, overwritten int) {
	j.mu.Lock()
	defer j.mu.Unlock()
	var kept []acked
	for _, a := range slices.Concat(j.items[j.next:], j.items[:j.next]) {
		if a.epoch < n {
			out = append(out, a)
		} else {
			kept = append(kept, a)
		}
	}
	overwritten = j.overwritten
	j.items, j.next, j.overwritten = kept, 0, 0
	return out, overwritten
}
