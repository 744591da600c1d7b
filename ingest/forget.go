package ingest

import "time"

// ForgetQueue drops what the ingester holds of a deleted queue: its
// partitions' memos (ids that no longer exist), their dedup cache
// entries and their tails. Each shard does it between flushes; a partition in flight
// keeps its memo, its push is refused (the partition is gone) and
// resolved again, as is any push of a gateway that never heard of the
// delete. Best effort: a shard whose queue of these is full skips it.
func (in *Ingester) ForgetQueue(queue string) {
	for _, s := range in.shards {
		select {
		case s.forget <- queue:
		default:
		}
	}
}

// forgetQueue is ForgetQueue in the shard's goroutine, which owns the
// memos of the partitions not in flight.
func (s *shard) forgetQueue(queue string) {
	var pids []int64
	for key, p := range s.parts {
		if p.queue != queue || p.inflight {
			continue
		}
		if p.meta.ID != 0 {
			pids = append(pids, p.meta.ID)
		}
		if len(p.buffers) == 0 {
			delete(s.parts, key)
		} else {
			p.resolvedAt = time.Time{} // its next flush resolves the name again
		}
	}
	if s.ing.cache != nil && len(pids) > 0 {
		s.ing.cache.Forget(pids)
	}
	if s.ing.tail != nil && len(pids) > 0 {
		s.ing.tail.Drop(pids...)
	}
}
