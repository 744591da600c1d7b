package dedup

import (
	"sync"
	"testing"
	"time"
)

type fakeClock struct {
	mu  sync.Mutex
	now time.Time
}

func (f *fakeClock) Now() time.Time { f.mu.Lock(); defer f.mu.Unlock(); return f.now }
func (f *fakeClock) Add(d time.Duration) {
	f.mu.Lock()
	f.now = f.now.Add(d)
	f.mu.Unlock()
}

// hydration of n in-window hashes for a partition, created at the clock.
func hydration(clock *fakeClock, pid int64, n int) Hydration {
	hs := hashes(uint64(pid)<<32, uint64(n))
	return Hydration{LastOffset: int64(n) - 1, WindowMs: minute,
		Ranges: []Range{{Base: 0, CreatedMs: clock.Now().UnixMilli(), Hashes: hs}}}
}

func newTestCache(budget int64) (*Cache, *fakeClock, *[]int) {
	clock := &fakeClock{now: time.UnixMilli(t0)}
	var warns []int
	c := New(Config{BudgetBytes: budget, Now: clock.Now, Warn: func(n int) { warns = append(warns, n) }})
	return c, clock, &warns
}

func TestNewPartitionHydratesThenVouches(t *testing.T) {
	t.Parallel()
	c, clock, _ := newTestCache(0)
	d := c.Decide(1, minute, hashes(1000, 3))
	if !d.Hydrate || d.Verified != -1 || d.Suppressed {
		t.Fatalf("first contact: %+v, want hydrate and -1", d)
	}
	c.Install(1, hydration(clock, 1, 10))
	d = c.Decide(1, minute, hashes(1<<40, 3))
	if d.Verified != 9 || d.Hit || d.Hydrate {
		t.Fatalf("after hydration: %+v, want to vouch for 9", d)
	}
	c.Learn(1, 10, 12, hashes(1<<40, 3))
	if d := c.Decide(1, minute, hashes(1<<40, 1)); !d.Hit || d.Verified != 12 || len(d.Candidates) != 1 || d.Candidates[0] != (Candidate{Index: 0, Offset: 10}) {
		t.Errorf("a learned hash must be a hit naming where it is stored, with the watermark: %+v", d)
	}
	if st := c.Stats(); st.BloomMisses+st.BloomFalsePositives < 3 || st.BloomMaybes < 1 {
		t.Errorf("bloom counters %+v: three absent lookups and one present one were made", st)
	}
	if st := c.Stats(); st.Entries != 1 || st.ResidentHashes != 13 || st.ResidentBytes <= 13*16 {
		t.Errorf("stats %+v", st)
	}
	if ps := c.Partition(1); ps.State != "vouching" || ps.ResidentHashes != 13 || ps.VerifiedUpto != 12 || ps.HydratedFrom != -1 {
		t.Errorf("partition state %+v, want vouching with 13 hashes over (-1, 12]", ps)
	}
	if ps := c.Partition(2); ps.State != "absent" {
		t.Errorf("never seen partition: %+v", ps)
	}
}

func TestWindowChangeForcesStickyRebuild(t *testing.T) {
	t.Parallel()
	c, clock, _ := newTestCache(0)
	c.Install(1, hydration(clock, 1, 10))
	if d := c.Decide(1, 2*minute, nil); d.Verified != -1 || !d.Hydrate {
		t.Fatalf("window changed: %+v, want -1 and a rehydration", d)
	}
	if ps := c.Partition(1); ps.State != "rebuild" {
		t.Errorf("state %q, want rebuild", ps.State)
	}
	// Sticky: until a hydration is installed, still -1, with the old window too.
	if d := c.Decide(1, minute, nil); d.Verified != -1 || !d.Hydrate {
		t.Fatalf("before the rebuild succeeded: %+v", d)
	}
	h := hydration(clock, 1, 10)
	h.WindowMs = 2 * minute
	c.Install(1, h)
	if d := c.Decide(1, 2*minute, nil); d.Verified != 9 {
		t.Errorf("after the rebuild: %+v", d)
	}
	if st := c.Stats(); st.Rebuilds != 1 {
		t.Errorf("%d rebuilds counted for one window change", st.Rebuilds)
	}
}

func TestInterleaveGapIsACheapAdmission(t *testing.T) {
	t.Parallel()
	c, clock, _ := newTestCache(1) // a budget nothing fits in
	c.Install(1, hydration(clock, 1, 10))
	c.Learn(1, 12, 12, hashes(1<<41, 1)) // another broker wrote 10..11
	if ps := c.Partition(1); ps.State != "gap" {
		t.Errorf("state %q, want gap", ps.State)
	}
	d := c.Decide(1, minute, nil)
	if d.Verified != -1 || !d.Fill || d.FillFrom != 9 || d.Hydrate || d.Suppressed {
		t.Fatalf("a gap: %+v, want -1 and an ungated fill above 9", d)
	}
	missed := []Range{{Base: 10, CreatedMs: t0, Hashes: hashes(1<<42, 2)}, {Base: 12, CreatedMs: t0, Hashes: hashes(1<<41, 1)}}
	if c.Fill(1, 9, 2*minute, missed, 12) {
		t.Error("a fill read under another window must not heal the entry")
	}
	if c.Fill(1, 8, minute, missed, 12) {
		t.Error("a fill read above another watermark must not heal the entry")
	}
	if !c.Fill(1, 9, minute, missed, 12) {
		t.Fatal("the fill was refused")
	}
	if d := c.Decide(1, minute, hashes(1<<42, 1)); d.Verified != 12 || !d.Hit || d.Fill {
		t.Errorf("after the fill: %+v, want 12 with the other writer's hash found", d)
	}
	if st := c.Stats(); st.Gaps != 1 || st.Fills != 1 || st.FilledBytes != 48 || st.Hydrations != 1 {
		t.Errorf("stats %+v, want 1 gap, one fill of 3 hashes and only the first hydration", st)
	}
}

func TestAdmissionGateCooldownAndGuard(t *testing.T) {
	t.Parallel()
	// Budget for about three 4096-hash partitions: 90 % of it is the limit.
	one := NewEntry(hydration(&fakeClock{now: time.UnixMilli(t0)}, 1, BlockCapacity)).Bytes()
	c, clock, warns := newTestCache(one * 3)
	for pid := int64(1); pid <= 2; pid++ {
		if d := c.Decide(pid, minute, nil); !d.Hydrate {
			t.Fatalf("partition %d: %+v", pid, d)
		}
		c.Install(pid, hydration(clock, pid, BlockCapacity))
	}
	// Partition 3 was measured before (a footprint hint), then evicted:
	// its rebuild must pass the gate. 1 and 2 were used just now (guard).
	c.acct.Lock()
	c.footprint[3] = one
	c.acct.Unlock()
	if d := c.Decide(3, minute, nil); !d.Suppressed || d.Verified != -1 || d.Hydrate {
		t.Fatalf("over 90%% with every resident partition guarded: %+v, want suppressed", d)
	}
	if len(*warns) != 1 || (*warns)[0] != 1 {
		t.Errorf("warnings %v, want one naming 1 suppressed partition", *warns)
	}
	if st := c.Stats(); st.Suppressed != 1 {
		t.Errorf("suppressed gauge %d", st.Suppressed)
	}
	if ps := c.Partition(3); ps.State != "suppressed" {
		t.Errorf("state %q, want suppressed", ps.State)
	}
	// During the cooldown it is not re-tested, even once room appears.
	clock.Add(10 * time.Second)
	if d := c.Decide(3, minute, nil); !d.Suppressed {
		t.Fatalf("during the cooldown: %+v", d)
	}
	// After the cooldown, 1 and 2 are past the guard: the LRU one (1,
	// used first) is evicted to admit 3.
	clock.Add(21 * time.Second)
	c.Decide(2, minute, nil) // 2 is used: guarded
	if d := c.Decide(3, minute, nil); !d.Hydrate || d.Suppressed {
		t.Fatalf("after the cooldown: %+v, want admitted", d)
	}
	c.mu.RLock()
	evicted, kept := c.slots[1] == nil, c.slots[2] != nil && c.slots[2].entry != nil
	c.mu.RUnlock()
	if !evicted || !kept || c.Stats().Evictions != 1 {
		t.Errorf("evicted 1: %v, kept 2: %v, %d evictions; want the least recently used one out", evicted, kept, c.Stats().Evictions)
	}
	// Another suppression within the minute does not warn again.
	c.acct.Lock()
	c.footprint[4] = 3 * one
	c.acct.Unlock()
	if d := c.Decide(4, minute, nil); !d.Suppressed {
		t.Fatalf("partition 4: %+v", d)
	}
	if len(*warns) != 1 {
		t.Errorf("warned %d times within a minute", len(*warns))
	}
}

func TestBrandNewPartitionsAreNeverSuppressed(t *testing.T) {
	t.Parallel()
	c, _, _ := newTestCache(1)
	for pid := int64(1); pid <= 50; pid++ {
		if d := c.Decide(pid, minute, nil); d.Suppressed || !d.Hydrate {
			t.Fatalf("new partition %d: %+v", pid, d)
		}
	}
}

func TestAuxiliaryMapsAreSoftCapped(t *testing.T) {
	t.Parallel()
	clock := &fakeClock{now: time.UnixMilli(t0)}
	c := New(Config{BudgetBytes: 1, SoftCap: 100, Now: clock.Now})
	for pid := int64(1); pid <= 1000; pid++ {
		c.acct.Lock()
		c.footprint[pid] = 1 << 20 // every one too big: all suppressed
		pruneLocked(c.footprint, c.cfg.SoftCap)
		c.acct.Unlock()
		c.Decide(pid, minute, nil)
	}
	c.acct.Lock()
	defer c.acct.Unlock()
	if len(c.cooldown) > 100 || len(c.footprint) > 100 {
		t.Errorf("cooldowns %d, footprints %d: soft cap 100", len(c.cooldown), len(c.footprint))
	}
}

func TestConcurrentPartitionsUnderEviction(t *testing.T) {
	t.Parallel()
	one := NewEntry(hydration(&fakeClock{now: time.UnixMilli(t0)}, 1, 512)).Bytes()
	clock := &fakeClock{now: time.UnixMilli(t0)}
	c := New(Config{BudgetBytes: one * 8, Now: clock.Now, Guard: time.Millisecond})
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := range 300 {
				pid := int64((g*7 + i) % 40)
				d := c.Decide(pid, minute, hashes(uint64(i), 4))
				if d.Hydrate {
					c.Install(pid, hydration(clock, pid, 512))
				}
				c.Learn(pid, int64(512+i), int64(512+i), hashes(uint64(1<<30+i), 1))
				if i%50 == 0 {
					clock.Add(2 * time.Millisecond)
					_ = c.Stats()
				}
			}
		})
	}
	wg.Wait()
	st := c.Stats()
	var sum int64
	c.mu.RLock()
	for _, s := range c.slots {
		s.mu.Lock()
		if s.entry != nil {
			sum += s.entry.Bytes()
		}
		s.mu.Unlock()
	}
	c.mu.RUnlock()
	if st.ResidentBytes != sum {
		t.Errorf("accounted %d bytes, entries hold %d", st.ResidentBytes, sum)
	}
	c.acct.Lock()
	listed := 0
	for s := c.lruHead; s != nil; s = s.next {
		listed++
	}
	c.acct.Unlock()
	c.mu.RLock()
	slots := len(c.slots)
	c.mu.RUnlock()
	if st.Evictions == 0 || listed != st.Entries || slots != st.Entries {
		t.Errorf("%d evictions; %d entries, %d on the LRU list, %d slots: want evictions, and every entry once on the list and in the map", st.Evictions, st.Entries, listed, slots)
	}
}

func TestLearnAboutAnUnknownPartitionKeepsNothing(t *testing.T) {
	t.Parallel()
	c, _, _ := newTestCache(0)
	for pid := int64(1); pid <= 100; pid++ {
		c.Learn(pid, 0, 0, hashes(uint64(pid), 1))
	}
	c.mu.RLock()
	n := len(c.slots)
	c.mu.RUnlock()
	if n != 0 || c.Stats().Entries != 0 {
		t.Errorf("%d slots, %d entries after reports about partitions never decided; want none", n, c.Stats().Entries)
	}
}

// manyPartitions is what a run over many partitions did.
type manyPartitions struct {
	touched, hydrations, evictions, suppressedDecisions int64
	peakResident                                        int64
	slots, entries                                      int
}

// runManyPartitions touches partitions 1..n in order, rounds times from
// round fromRound, each
// touch a decision for a push of 10 new hashes, a hydration when asked
// (the 6 newest stored hashes: a partition's round r writes offsets 10r
// to 10r+9), and the push's learning. The window is an hour: nothing
// expires. The clock moves tick per touch: a round faster than the guard
// finds every resident entry guarded (new partitions are suppressed once
// the budget is full), a slower one lets the least recently used go.
func runManyPartitions(t testing.TB, c *Cache, clock *fakeClock, n, fromRound, rounds int, tick time.Duration) manyPartitions {
	const window = 60 * minute
	var run manyPartitions
	push := hashes(1<<50, 10)
	seen := map[int64]bool{}
	for round := fromRound; round < fromRound+rounds; round++ {
		base := int64(10 * round)
		for pid := int64(1); pid <= int64(n); pid++ {
			clock.Add(tick)
			run.touched++
			seen[pid] = true
			push[0][0], push[0][1], push[0][2], push[0][3] = byte(pid), byte(pid>>8), byte(pid>>16), byte(round)
			d := c.Decide(pid, window, push)
			if d.Suppressed {
				run.suppressedDecisions++
				continue
			}
			if d.Hydrate {
				h := Hydration{LastOffset: base - 1, WindowMs: window}
				if round > 0 {
					h.Ranges = []Range{{Base: base - 6, CreatedMs: clock.Now().UnixMilli(), Hashes: hashes(uint64(pid)<<32, 6)}}
				}
				c.Install(pid, h)
				// The gate admitted it under 90 % of the budget: only this
				// entry may take the cache past that.
				c.acct.Lock()
				over := c.resident - c.cfg.BudgetBytes*9/10 - c.slots[pid].bytes
				c.acct.Unlock()
				if over > 0 {
					t.Fatalf("partition %d admitted %d bytes past 90 %% of the budget", pid, over)
				}
				d = c.Decide(pid, window, push)
			}
			if d.Verified != base-1 {
				t.Fatalf("partition %d, round %d: %+v, want to vouch for %d", pid, round, d, base-1)
			}
			c.Learn(pid, base, base+9, push)
			c.acct.Lock()
			run.peakResident = max(run.peakResident, c.resident)
			c.acct.Unlock()
		}
	}
	st := c.Stats()
	run.hydrations, run.evictions = st.Hydrations, st.Evictions
	c.mu.RLock()
	run.slots = len(c.slots)
	c.mu.RUnlock()
	run.entries = st.Entries
	if run.hydrations > int64(len(seen))+run.evictions {
		t.Errorf("%d hydrations for %d partitions touched and %d evictions: a thrash loop", run.hydrations, len(seen), run.evictions)
	}
	if run.slots != run.entries {
		t.Errorf("%d slots for %d entries: evicted or refused partitions left slots behind", run.slots, run.entries)
	}
	return run
}

// TestManyPartitionsAdmitEvictAndSuppressWithoutThrash: 10,000 partitions
// under a budget that holds about two thirds of them (the ratio of a
// million 16-hash partitions to the default budget; the cache has one LRU
// list and no fixed sizes below SoftCap, so the ratios and the clock, not
// the count, make the shape). Touched faster than
// the guard, the ones that do not fit are suppressed, not cycled; touched
// slower, the least recently used are evicted and come back with one
// hydration each, and entries grown by learning evict the idle ones
// rather than take the cache past its budget. Never more hydrations than
// partitions touched plus evictions, every admission within 90 % of the
// budget, no slot left without an entry.
func TestManyPartitionsAdmitEvictAndSuppressWithoutThrash(t *testing.T) {
	t.Parallel()
	const n = 10_000
	// A budget for about three quarters of them (entries of 10 hashes
	// take 480 bytes by the accounting).
	budget := int64(n) * 400
	c, clock, _ := newTestCache(budget)
	fast := runManyPartitions(t, c, clock, n, 0, 2, time.Microsecond) // two rounds within the guard
	if fast.suppressedDecisions == 0 || fast.evictions != 0 {
		t.Errorf("within the guard: %d suppressed decisions, %d evictions; want suppression and no eviction", fast.suppressedDecisions, fast.evictions)
	}
	clock.Add(time.Minute)                                            // past the cooldowns
	slow := runManyPartitions(t, c, clock, n, 2, 2, time.Millisecond) // a round takes 10 s: twice the guard
	if slow.evictions == 0 || slow.hydrations <= fast.hydrations {
		t.Errorf("past the guard: %d evictions, %d hydrations (%d before); want the LRU evicted and re-admitted", slow.evictions, slow.hydrations, fast.hydrations)
	}
	if slow.peakResident > budget {
		t.Errorf("past the guard, entries grown by learning kept %d bytes resident, over the budget %d", slow.peakResident, budget)
	}
	t.Logf("fast: %+v", fast)
	t.Logf("slow: %+v", slow)
}
