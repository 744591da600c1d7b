package consume

import (
	"github.com/queengate/queengate/tail"
)

// UseTail serves the usual cycle from t, the memory of what this
// gateway's ingester committed to the same store (docs/design.md, "The
// tail"), remembering the leases this gateway answers. check (tests)
// reads every cycle served that way back from SQL, and fails the pop on
// any difference. A store that cannot run the cycle's statement keeps
// the usual path.
func (c *Consumers) UseTail(t *tail.Tail, check bool) {
	cycler, ok := c.store.(tail.Cycler)
	if t == nil || !ok {
		return
	}
	c.tail = &tail.Server{Tail: t, Leases: tail.NewLeases(tail.DefaultMaxLeases), Store: cycler}
	if checker, ok := c.store.(tail.Checker); ok && check {
		c.tail.Check = checker
	}
}

// TailMismatches counts the cycles served from the tail that check mode
// found differing from SQL (0 without a tail).
func (c *Consumers) TailMismatches() int64 {
	if c.tail == nil {
		return 0
	}
	return c.tail.Mismatches()
}
