package dedup

// Forget drops the entries of partitions that no longer exist (their
// queue was deleted): ids are never reused, so nothing would ask for them
// again, and they would hold their bytes until evicted. Lock order as
// eviction's: each slot's mu, then acct; Cache.mu after both are let go.
func (c *Cache) Forget(pids []int64) {
	var gone []*slot
	for _, pid := range pids {
		s := c.lockSlot(pid, false)
		if s == nil {
			continue
		}
		c.acct.Lock()
		if s.bytes > 0 { // on the LRU list and accounted for
			c.resident -= s.bytes
			c.hashes -= int64(s.hashes)
			c.entries--
			c.unlinkLocked(s)
		}
		delete(c.footprint, pid)
		delete(c.cooldown, pid)
		c.acct.Unlock()
		s.entry, s.bytes, s.hashes, s.dead = nil, 0, 0, true
		s.mu.Unlock()
		gone = append(gone, s)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, s := range gone {
		if c.slots[s.pid] == s {
			delete(c.slots, s.pid)
		}
	}
}

// Clear drops every entry: the store they were learned from may no longer
// be the one pushes reach (a failover, a restart, a restored backup).
// Each partition hydrates again at its next push. It returns how many
// entries it dropped. Entries installed while it runs may stay: the
// caller keeps anything learned from the old store from arriving once it
// has begun.
func (c *Cache) Clear() int {
	c.mu.RLock()
	pids := make([]int64, 0, len(c.slots))
	for pid := range c.slots {
		pids = append(pids, pid)
	}
	c.mu.RUnlock()
	c.Forget(pids)
	return len(pids)
}
