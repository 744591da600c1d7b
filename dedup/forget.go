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
