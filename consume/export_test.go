package consume

import "time"

// SetCheckEvery sets how often run-out leases are looked for while pops
// wait (before the gateway starts).
func (c *Consumers) SetCheckEvery(d time.Duration) { c.checkEvery = d }

// Waiting reports whether a pop waits on queue.
func (c *Consumers) Waiting(queue string) bool { return c.Waiters(queue) > 0 }

// Waiters counts the pops waiting on queue.
func (c *Consumers) Waiters(queue string) int { return c.waits.waiters(queue) }

// Sleeping counts the pops waiting on queue that neither pop nor are
// about to.
func (c *Consumers) Sleeping(queue string) int { return c.waits.sleeping(queue) }

// SetRevalidate sets how long a wait list stays known empty.
func (c *Consumers) SetRevalidate(d time.Duration) { c.waits.revalidate = d }

// Checks counts the looks for run-out leases so far.
func (c *Consumers) Checks() int64 { return c.checks.Load() }

// Flushes counts the flusher's ticks so far, each writing what was noted
// before it began.
func (f *ActivityFlusher) Flushes() int64 { return f.ticks.Load() }
