package dedup

import (
	"sync"
	"sync/atomic"
	"time"
)

// Config tunes the cache. Zero values take the defaults below (the numbers
// of docs/design.md, "The broker cache").
type Config struct {
	// BudgetBytes is the LRU budget (QUEEN_DEDUP_CACHE_MB); default
	// DefaultBudgetBytes.
	BudgetBytes int64
	// Cooldown is how long a suppressed partition answers -1 before its
	// rebuild is tested again; default DefaultCooldown.
	Cooldown time.Duration
	// Guard protects a partition used this recently from eviction to admit
	// another; default DefaultGuard.
	Guard time.Duration
	// WarnEvery rate-limits the suppression warning, process-wide;
	// default DefaultWarnEvery.
	WarnEvery time.Duration
	// SoftCap bounds the auxiliary maps (cooldowns, footprint hints);
	// default DefaultSoftCap entries each, pruned beyond.
	SoftCap int
	// Now is the clock; default time.Now. Tests move it by hand.
	Now func() time.Time
	// Warn is called (rate-limited) when partitions are suppressed.
	Warn func(suppressed int)
}

func (c Config) withDefaults() Config {
	if c.BudgetBytes <= 0 {
		c.BudgetBytes = DefaultBudgetBytes
	}
	if c.Cooldown <= 0 {
		c.Cooldown = DefaultCooldown
	}
	if c.Guard <= 0 {
		c.Guard = DefaultGuard
	}
	if c.WarnEvery <= 0 {
		c.WarnEvery = DefaultWarnEvery
	}
	if c.SoftCap <= 0 {
		c.SoftCap = DefaultSoftCap
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	if c.Warn == nil {
		c.Warn = func(int) {}
	}
	return c
}

// Decision is what the cache says about a frame before its push.
type Decision struct {
	// Verified is the p_verified to send: the entry's watermark when it
	// vouches, else -1 (probe the whole window).
	Verified int64
	// Candidates are the resident occurrences of the frame's hashes,
	// when the entry vouches: SQL checks exactly these stored slots, and
	// everything above Verified, instead of the whole window.
	Candidates []Candidate
	// Hit reports a resident hash.
	Hit bool
	// WindowHashes estimates what a full probe would unroll (the entry's
	// in-window resident hashes), for the narrowed probes' share.
	WindowHashes int
	// Fill asks the caller to read the rows stored above FillFrom (the
	// entry met another writer's commit) and give them to Fill: cheaper
	// than a hydration, and the entry vouches again at once.
	Fill     bool
	FillFrom int64
	// Hydrate asks the caller to read the partition's window
	// (pgstore.Hydrate) and Install it; the push may go meanwhile with -1.
	Hydrate bool
	// Suppressed: the partition failed the admission gate and serves its
	// cooldown answering -1.
	Suppressed bool
}

// Cache holds the entries of many partitions under one byte budget. The
// map is read-locked only to find a partition's slot; all work is under
// the slot's own mutex, so partitions do not contend (flushes of one
// partition are single-flight already).
//
// A partition has a slot only while it has an entry: an evicted one's
// slot leaves the map, and a partition the gate refuses never gets one,
// so partitions that come and go cost nothing once gone.
type Cache struct {
	cfg Config

	mu    sync.RWMutex
	slots map[int64]*slot

	// Accounting and the admission gate's bookkeeping.
	acct sync.Mutex
	// budget is the budget in force: the configured one, or less while
	// the cache yields memory to the rest of the process (Yield).
	budget   int64
	resident int64 // bytes of resident entries
	hashes   int64 // their hashes
	entries  int
	// The slots with an entry, most recently used first: eviction walks
	// from the tail and stops at the guard, whatever the number of entries.
	lruHead, lruTail *slot
	cooldown         map[int64]time.Time // suppressed until
	footprint        map[int64]int64     // last measured bytes per partition
	lastWarn         time.Time

	// Event counters, for metrics.
	misses, maybes, falsePositives atomic.Int64
	gaps, rebuilds, evictions      atomic.Int64
	hydrations, hydratedBytes      atomic.Int64
	births                         atomic.Int64
	fills, filledBytes             atomic.Int64
}

// The defaults of Config's zero values.
const (
	DefaultBudgetBytes = 512 << 20
	DefaultCooldown    = 30 * time.Second
	DefaultGuard       = 5 * time.Second
	DefaultWarnEvery   = time.Minute
	DefaultSoftCap     = 100_000
)

// Lock order: a slot's mu, then Cache.acct, then Cache.mu; other slots
// only with TryLock. Nothing holds Cache.mu while waiting on a slot.
type slot struct {
	mu    sync.Mutex
	entry *Entry
	bytes int64 // accounted for entry
	pid   int64
	// Under Cache.acct: when last used (Unix ns, the cache's clock) and
	// the LRU links, while the slot has an entry.
	used       int64
	prev, next *slot
	hashes     int32 // accounted for entry
	// dead: evicted and out of the map; whoever locks it looks again.
	dead bool
}

// New builds an empty cache.
func New(cfg Config) *Cache {
	cfg = cfg.withDefaults()
	return &Cache{cfg: cfg, budget: cfg.BudgetBytes, slots: map[int64]*slot{},
		cooldown: map[int64]time.Time{}, footprint: map[int64]int64{}}
}

// lockSlot returns pid's slot, locked and in the map, making one when
// create is set; else nil for a partition without one.
func (c *Cache) lockSlot(pid int64, create bool) *slot {
	for {
		c.mu.RLock()
		s := c.slots[pid]
		c.mu.RUnlock()
		if s == nil {
			if !create {
				return nil
			}
			c.mu.Lock()
			if s = c.slots[pid]; s == nil {
				// Locked before anyone can find it: nobody else sees a
				// slot without its entry.
				s = &slot{pid: pid}
				s.mu.Lock()
				c.slots[pid] = s
				c.mu.Unlock()
				return s
			}
			c.mu.Unlock()
		}
		s.mu.Lock()
		if !s.dead {
			return s
		}
		s.mu.Unlock()
	}
}

// Decide answers for one frame of partition pid whose queue has the
// given window. A window of 0 needs no cache: the probe does not run.
func (c *Cache) Decide(pid int64, windowMs int64, hashes []Hash) Decision {
	now := c.cfg.Now()
	s := c.lockSlot(pid, false)
	if s == nil {
		// No entry: a first contact or an evicted partition.
		if !c.admit(pid, nil, now) {
			return Decision{Verified: -1, Suppressed: true}
		}
		return Decision{Verified: -1, Hydrate: true}
	}
	defer s.mu.Unlock()
	if s.entry.windowMs != windowMs && !s.entry.NeedsRebuild() {
		// The expiry bookkeeping was computed under the old window: only a
		// full rehydration (sticky until it succeeds) can vouch again.
		s.entry.WindowChanged()
		c.rebuilds.Add(1)
	}
	if !s.entry.NeedsRebuild() {
		// Cheap admissions (vouching, or with an interleave gap) are never
		// gated; a gap also asks for a rebuild.
		v, cands, hit := s.entry.Verified(hashes, now.UnixMilli())
		m, y, f := s.entry.takeCounters()
		c.misses.Add(m)
		c.maybes.Add(y)
		c.falsePositives.Add(f)
		c.reaccount(s, now)
		d := Decision{Verified: v, Candidates: cands, Hit: hit, WindowHashes: s.entry.WindowHashes(now.UnixMilli())}
		if s.entry.Gap() {
			d.Fill = true
			_, d.FillFrom = s.entry.Watermarks()
		}
		return d
	}
	if !c.admit(pid, s, now) {
		return Decision{Verified: -1, Suppressed: true}
	}
	return Decision{Verified: -1, Hydrate: true}
}

// admit is the gate for a full rehydration: everything except this
// partition's own resident bytes (s, locked, when it has an entry to
// rebuild), plus its estimated footprint, must stay under 90 % of the
// budget, evicting partitions idle for longer than the guard if that
// makes room. A partition that fails serves a cooldown.
func (c *Cache) admit(pid int64, s *slot, now time.Time) bool {
	c.acct.Lock()
	defer c.acct.Unlock()
	own := int64(0)
	if s != nil {
		own = s.bytes
		c.touchLocked(s, now)
	}
	if until, ok := c.cooldown[pid]; ok {
		if now.Before(until) {
			return false
		}
		delete(c.cooldown, pid)
	}
	// Brand-new partitions estimate an empty window: never suppressed on
	// first contact.
	estimate := c.footprint[pid]
	limit := c.budget * 9 / 10
	if c.resident-own+estimate <= limit {
		return true
	}
	c.evictLocked(s, now, c.resident-own+estimate-limit)
	if c.resident-own+estimate <= limit {
		return true
	}
	c.cooldown[pid] = now.Add(c.cfg.Cooldown)
	pruneLocked(c.cooldown, c.cfg.SoftCap)
	if now.Sub(c.lastWarn) >= c.cfg.WarnEvery {
		c.lastWarn = now
		c.cfg.Warn(c.suppressedLocked(now))
	}
	return false
}

// evictLocked drops least recently used entries, never one used within
// the guard and never self's (the slot asking, locked by the caller, or
// nil), until need bytes are freed or none is left to drop. It walks the
// LRU list from its tail, so its cost is what it evicts, not the number
// of entries. Called with acct held; takes slot locks with TryLock so it
// never waits on a partition in use (that one is recent anyway). Evicted
// slots leave the map.
func (c *Cache) evictLocked(self *slot, now time.Time, need int64) {
	guarded := now.UnixNano() - c.cfg.Guard.Nanoseconds()
	var gone []*slot
	for k := c.lruTail; k != nil && need > 0 && k.used < guarded; {
		prev := k.prev
		if k != self && k.mu.TryLock() {
			need -= k.bytes
			c.resident -= k.bytes
			c.hashes -= int64(k.hashes)
			c.entries--
			c.footprint[k.pid] = k.bytes
			c.unlinkLocked(k)
			k.entry, k.bytes, k.hashes, k.dead = nil, 0, 0, true
			c.evictions.Add(1)
			k.mu.Unlock()
			gone = append(gone, k)
		}
		k = prev
	}
	if len(gone) > 0 {
		c.mu.Lock()
		for _, k := range gone {
			if c.slots[k.pid] == k {
				delete(c.slots, k.pid)
			}
		}
		c.mu.Unlock()
	}
	pruneLocked(c.footprint, c.cfg.SoftCap)
}

// touchLocked marks s used now, moving it to the head of the LRU list
// when it is on it. Called with acct held.
func (c *Cache) touchLocked(s *slot, now time.Time) {
	s.used = now.UnixNano()
	if s.bytes == 0 || c.lruHead == s {
		return
	}
	c.unlinkLocked(s)
	c.pushFrontLocked(s)
}

func (c *Cache) pushFrontLocked(s *slot) {
	s.prev, s.next = nil, c.lruHead
	if c.lruHead != nil {
		c.lruHead.prev = s
	}
	c.lruHead = s
	if c.lruTail == nil {
		c.lruTail = s
	}
}

func (c *Cache) unlinkLocked(s *slot) {
	if s.prev != nil {
		s.prev.next = s.next
	} else if c.lruHead == s {
		c.lruHead = s.next
	}
	if s.next != nil {
		s.next.prev = s.prev
	} else if c.lruTail == s {
		c.lruTail = s.prev
	}
	s.prev, s.next = nil, nil
}

// pruneLocked keeps an auxiliary map under the soft cap; the only cost
// of a dropped hint is a re-measured footprint, of a dropped cooldown an
// early re-test.
func pruneLocked[V any](m map[int64]V, softCap int) {
	for id := range m {
		if len(m) <= softCap {
			return
		}
		delete(m, id)
	}
}

func (c *Cache) suppressedLocked(now time.Time) int {
	n := 0
	for _, until := range c.cooldown {
		if now.Before(until) {
			n++
		}
	}
	return n
}

// NowMs is the cache's clock in Unix milliseconds. Hydrations should give
// created times on this clock (see Range).
func (c *Cache) NowMs() int64 { return c.cfg.Now().UnixMilli() }

// Install puts a fresh hydration in place of whatever the partition had:
// a rebuild (after a gap, an overlap or a window change) succeeds here.
func (c *Cache) Install(pid int64, h Hydration) {
	c.install(pid, NewEntry(h))
	c.hydrations.Add(1)
}

// Birth installs the entry of a partition known to hold no message (its
// creator's first push is on its way): what a hydration would read, read
// from nobody. Counted apart from hydrations, which read PostgreSQL.
func (c *Cache) Birth(pid int64, windowMs int64) {
	c.install(pid, NewEntry(Hydration{LastOffset: -1, WindowMs: windowMs}))
	c.births.Add(1)
}

func (c *Cache) install(pid int64, e *Entry) {
	s := c.lockSlot(pid, true)
	defer s.mu.Unlock()
	s.entry = e
	c.hydratedBytes.Add(int64(e.Len()) * 16)
	c.reaccount(s, c.cfg.Now())
}

// Fill heals partition pid's gap above from with the rows read above it
// and the allocator of the same snapshot (see Entry.Fill), under the
// window they were read with. It reports whether the entry vouches again;
// when not (the window changed, rows were purged, or another fill got
// there first), a full hydration is the way back.
func (c *Cache) Fill(pid, from int64, windowMs int64, ranges []Range, last int64) bool {
	s := c.lockSlot(pid, false)
	if s == nil {
		return false
	}
	defer s.mu.Unlock()
	if s.entry.windowMs != windowMs {
		return false
	}
	if _, upto := s.entry.Watermarks(); upto != from || !s.entry.Fill(ranges, last) {
		return false
	}
	c.fills.Add(1)
	n := 0
	for _, r := range ranges {
		n += len(r.Hashes)
	}
	c.filledBytes.Add(int64(n) * 16)
	c.reaccount(s, c.cfg.Now())
	return true
}

// Learn records a committed push (see Entry.Learn).
func (c *Cache) Learn(pid, base, last int64, written []Hash) {
	// Only partitions with a slot have an entry to learn into; not
	// creating one keeps reports about other partitions (timer fires) from
	// growing the map.
	s := c.lockSlot(pid, false)
	if s == nil {
		return
	}
	defer s.mu.Unlock()
	gap, rebuild := s.entry.Gap(), s.entry.NeedsRebuild()
	s.entry.Learn(base, last, written, c.cfg.Now().UnixMilli())
	if !gap && s.entry.Gap() {
		c.gaps.Add(1)
	}
	if !rebuild && s.entry.NeedsRebuild() {
		c.rebuilds.Add(1)
	}
	c.reaccount(s, time.Time{})
}

// reaccount updates the budget with the slot's current footprint (an
// entry is never 0 bytes), and marks it used at now unless that is zero
// (learning a push is not a use: its decision was). Called with the slot
// locked and holding an entry.
func (c *Cache) reaccount(s *slot, now time.Time) {
	b, n := s.entry.Bytes(), int64(s.entry.Len())
	c.acct.Lock()
	c.resident += b - s.bytes
	c.hashes += n - int64(s.hashes)
	if s.bytes == 0 {
		c.entries++
		s.used = now.UnixNano()
		c.pushFrontLocked(s)
	}
	s.bytes, s.hashes = b, int32(n)
	if !now.IsZero() {
		c.touchLocked(s, now)
	}
	c.footprint[s.pid] = b
	pruneLocked(c.footprint, c.cfg.SoftCap)
	if c.resident > c.budget {
		// Entries grown by learning took the cache past its budget: the
		// least recently used idle ones go, down to the admission limit,
		// so that a million resident entries growing at once stay within
		// it too. Never this one, nor any used within the guard.
		c.evictLocked(s, c.cfg.Now(), c.resident-c.budget*9/10)
	}
	c.acct.Unlock()
}

// Stats are the cache's figures for metrics. The counters only grow.
type Stats struct {
	// BudgetBytes is the budget in force (Yield).
	BudgetBytes, ResidentBytes, ResidentHashes int64
	Entries, Suppressed                        int
	// Bloom front: definite misses, maybes (sent to the exact ring), and
	// maybes the exact ring found absent.
	BloomMisses, BloomMaybes, BloomFalsePositives int64
	// Interleave gaps seen, full rebuilds marked (overlap, window change),
	// entries evicted, hydrations installed and their bytes (16 per hash),
	// entries born empty for partitions just created (no read), gaps
	// healed by a fill and the bytes it read.
	Gaps, Rebuilds, Evictions, Hydrations, HydratedBytes int64
	Births                                               int64
	Fills, FilledBytes                                   int64
}

// Stats reads the accounting; it takes no slot lock.
func (c *Cache) Stats() Stats {
	c.acct.Lock()
	st := Stats{BudgetBytes: c.budget, ResidentBytes: c.resident, ResidentHashes: c.hashes, Entries: c.entries,
		Suppressed: c.suppressedLocked(c.cfg.Now())}
	c.acct.Unlock()
	st.BloomMisses, st.BloomMaybes, st.BloomFalsePositives = c.misses.Load(), c.maybes.Load(), c.falsePositives.Load()
	st.Gaps, st.Rebuilds, st.Evictions = c.gaps.Load(), c.rebuilds.Load(), c.evictions.Load()
	st.Hydrations, st.HydratedBytes, st.Births = c.hydrations.Load(), c.hydratedBytes.Load(), c.births.Load()
	st.Fills, st.FilledBytes = c.fills.Load(), c.filledBytes.Load()
	return st
}

// PartitionState is one partition's entry as an operator sees it.
type PartitionState struct {
	// State is "vouching", "gap" (another writer interleaved; filled on
	// next use), "rebuild" (overlap or window change), "suppressed" (the
	// admission gate refused its rebuild for now) or "absent".
	State          string
	ResidentHashes int
	Bytes          int64
	HydratedFrom   int64
	VerifiedUpto   int64
}

// Partition reports pid's entry. It waits for the slot's lock, so it is
// for operators, not for the push path.
func (c *Cache) Partition(pid int64) PartitionState {
	st := PartitionState{State: "absent", HydratedFrom: -1, VerifiedUpto: -1}
	if s := c.lockSlot(pid, false); s != nil {
		if e := s.entry; e != nil {
			st.ResidentHashes, st.Bytes = e.Len(), e.Bytes()
			st.HydratedFrom, st.VerifiedUpto = e.Watermarks()
			switch {
			case e.NeedsRebuild():
				st.State = "rebuild"
			case e.Gap():
				st.State = "gap"
			default:
				st.State = "vouching"
			}
		}
		s.mu.Unlock()
	}
	c.acct.Lock()
	until, cooling := c.cooldown[pid]
	c.acct.Unlock()
	if cooling && c.cfg.Now().Before(until) && st.State != "vouching" {
		st.State = "suppressed"
	}
	return st
}

// Budget is the configured byte budget; Stats has the one in force.
func (c *Cache) Budget() int64 { return c.cfg.BudgetBytes }

// Lookup is what pid's entry knows of one hash, for operators.
type Lookup struct {
	// State is as in PartitionState.
	State string
	// Offsets are the hash's resident occurrences; Wide: it sits in a
	// block whose offsets are not kept, so only a full probe can place it.
	Offsets []int64
	Wide    bool
	// VerifiedUpto is the watermark a push would send while vouching.
	VerifiedUpto int64
}

// Look reports what pid's entry knows of h, without changing it (no
// expiry, no counters). It waits for the slot's lock: for operators only.
func (c *Cache) Look(pid int64, h Hash) Lookup {
	st := c.Partition(pid)
	l := Lookup{State: st.State, VerifiedUpto: st.VerifiedUpto}
	s := c.lockSlot(pid, false)
	if s == nil {
		return l
	}
	defer s.mu.Unlock()
	if e := s.entry; e != nil {
		m, y, f := e.misses, e.maybes, e.falsePositives
		offs, ok := e.occurrences(&h)
		e.misses, e.maybes, e.falsePositives = m, y, f
		l.Offsets, l.Wide = offs, !ok
	}
	return l
}
