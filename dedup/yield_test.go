package dedup

import (
	"math"
	"runtime"
	"runtime/debug"
	"testing"
	"time"
)

func TestYieldBudgetLeavesTheRestOfTheProcessItsRoom(t *testing.T) {
	t.Parallel()
	const mib = 1 << 20
	for _, tc := range []struct {
		name             string
		budget, resident int64
		m                Memory
		want             int64
	}{
		{"no limit: the configured budget", 512 * mib, 100 * mib,
			Memory{Limit: math.MaxInt64, Live: 2000 * mib, Runtime: 50 * mib}, 512 * mib},
		{"room to spare: the configured budget", 512 * mib, 100 * mib,
			Memory{Limit: 2048 * mib, Live: 300 * mib, Runtime: 20 * mib}, 512 * mib},
		// 800 - 200 (a quarter) - 40 (runtime) - (500 - 100) others = 160.
		{"the others grew: the cache yields what they took", 512 * mib, 100 * mib,
			Memory{Limit: 800 * mib, Live: 500 * mib, Runtime: 40 * mib}, 160 * mib},
		{"the others take everything: the floor", 512 * mib, 100 * mib,
			Memory{Limit: 800 * mib, Live: 900 * mib, Runtime: 40 * mib}, 64 * mib},
		{"a cache larger than the live heap counts no others", 512 * mib, 300 * mib,
			Memory{Limit: 800 * mib, Live: 200 * mib, Runtime: 40 * mib}, 512 * mib},
	} {
		if got := YieldBudget(tc.budget, tc.resident, tc.m); got != tc.want {
			t.Errorf("%s: YieldBudget = %d MiB, want %d MiB", tc.name, got/mib, tc.want/mib)
		}
	}
}

func TestReadMemoryReportsTheLimitInForce(t *testing.T) {
	// Not parallel: it sets the process's memory limit.
	old := debug.SetMemoryLimit(3 << 30)
	defer debug.SetMemoryLimit(old)
	runtime.GC() // the live heap is what a collection found
	m := ReadMemory()
	if m.Limit != 3<<30 {
		t.Errorf("limit %d, want the one set (%d)", m.Limit, int64(3<<30))
	}
	if m.Live <= 0 || m.Runtime <= 0 {
		t.Errorf("%+v: a running process has a live heap and runtime memory", m)
	}
}

// TestYieldEvictsIdleEntriesAndGrowsBack: lowering the budget in force
// evicts the least recently used idle entries at once, never one used
// within the guard; raising it again admits new partitions as before.
func TestYieldEvictsIdleEntriesAndGrowsBack(t *testing.T) {
	t.Parallel()
	one := NewEntry(hydration(&fakeClock{now: time.UnixMilli(t0)}, 1, BlockCapacity)).Bytes()
	c, clock, _ := newTestCache(one * 10)
	for pid := int64(1); pid <= 6; pid++ {
		c.Decide(pid, minute, nil)
		c.Install(pid, hydration(clock, pid, BlockCapacity))
		clock.Add(time.Second)
	}
	clock.Add(10 * time.Second)
	c.Decide(6, minute, nil) // used within the guard
	c.Yield(one * 2)
	st := c.Stats()
	if st.BudgetBytes != one*2 || st.Entries != 1 || st.Evictions != 5 {
		t.Fatalf("after yielding to 2 entries' bytes: %+v, want the budget in force lowered and "+
			"all but the guarded entry evicted (90 %% of 2 entries holds one)", st)
	}
	if ps := c.Partition(6); ps.State != "vouching" {
		t.Errorf("the partition used within the guard: %q, want it kept", ps.State)
	}
	c.Yield(one * 100)
	if st := c.Stats(); st.BudgetBytes != one*10 {
		t.Errorf("budget in force %d after yielding more than configured, want the configured %d", st.BudgetBytes, one*10)
	}
	for pid := int64(7); pid <= 9; pid++ {
		c.acct.Lock()
		c.footprint[pid] = one
		c.acct.Unlock()
		if d := c.Decide(pid, minute, nil); !d.Hydrate {
			t.Fatalf("partition %d after the budget grew back: %+v, want admitted", pid, d)
		}
		c.Install(pid, hydration(clock, pid, BlockCapacity))
	}
	if st := c.Stats(); st.Entries != 4 {
		t.Errorf("%d entries, want 4: the grown budget admits again", st.Entries)
	}
}
