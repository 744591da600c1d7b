package dedup

import (
	"context"
	"math"
	"runtime/metrics"
	"time"
)

// The cache is the one structure of the gateway sized by a budget; the
// others grow with the partitions a process serves (fusion state, counts,
// routes) and are bounded only by how long they stay idle. With a million
// partitions, those and a full cache together passed the process's memory
// limit, and the collector then ran back to back (sessions1m: half of
// the gateway's CPU). So the cache yields: the budget in force is what
// the memory limit leaves once the rest of the live heap is counted.

// garbageShare is the part of the memory limit kept for the garbage made
// between two collections: with the live heap at most the rest, the
// collector runs once per that many bytes allocated, not continually.
const garbageShare = 4 // a quarter

// yieldFloor is the fraction of the configured budget the cache keeps
// whatever the rest of the process holds: below it, partitions would
// hydrate on nearly every push.
const yieldFloor = 8 // an eighth

// Memory is what the Go runtime reports of the process's memory.
type Memory struct {
	// Limit is the soft memory limit (math.MaxInt64: none).
	Limit int64
	// Live is the heap the last collection found live (0 before the
	// first collection).
	Live int64
	// Runtime is what the runtime holds beside the heap: goroutine
	// stacks, its own metadata and buffers.
	Runtime int64
}

var memorySamples = []string{
	"/gc/gomemlimit:bytes",
	"/gc/heap/live:bytes",
	"/memory/classes/total:bytes",
	"/memory/classes/heap/objects:bytes",
	"/memory/classes/heap/unused:bytes",
	"/memory/classes/heap/free:bytes",
	"/memory/classes/heap/released:bytes",
}

// ReadMemory samples the runtime's memory figures.
func ReadMemory() Memory {
	s := make([]metrics.Sample, len(memorySamples))
	for i, name := range memorySamples {
		s[i].Name = name
	}
	metrics.Read(s)
	v := func(i int) int64 {
		if s[i].Value.Kind() != metrics.KindUint64 {
			return 0
		}
		return int64(min(s[i].Value.Uint64(), math.MaxInt64))
	}
	heap := v(3) + v(4) + v(5) + v(6)
	return Memory{Limit: v(0), Live: v(1), Runtime: max(v(2)-heap, 0)}
}

// YieldBudget is the budget in force for a cache configured with budget
// bytes and holding resident bytes, in a process whose memory is m: the
// room under the limit, less the garbage's share and the runtime's own,
// less the live heap that is not the cache's; never more than budget nor
// less than its floor.
func YieldBudget(budget, resident int64, m Memory) int64 {
	if m.Limit <= 0 || m.Limit == math.MaxInt64 {
		return budget
	}
	room := m.Limit - m.Limit/garbageShare - m.Runtime
	others := max(m.Live-resident, 0)
	return min(max(room-others, budget/yieldFloor), budget)
}

// Yield sets the budget in force to b (at most the configured budget).
// Lowering it evicts the least recently used entries idle for longer than
// the guard down to the admission limit at once; raising it lets the
// cache grow back as partitions come.
func (c *Cache) Yield(b int64) {
	b = min(b, c.cfg.BudgetBytes)
	c.acct.Lock()
	defer c.acct.Unlock()
	c.budget = b
	if c.resident > b {
		c.evictLocked(nil, c.cfg.Now(), c.resident-b*9/10)
	}
}

// residentBytes is what the resident entries take. Not Stats, which
// counts the suppressed partitions by walking the cooldowns under the
// lock every push's admission takes.
func (c *Cache) residentBytes() int64 {
	c.acct.Lock()
	defer c.acct.Unlock()
	return c.resident
}

// YieldToMemory sets the budget in force from the process's memory every
// interval until ctx ends.
func (c *Cache) YieldToMemory(ctx context.Context, every time.Duration) {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			c.Yield(YieldBudget(c.cfg.BudgetBytes, c.residentBytes(), ReadMemory()))
		}
	}
}
