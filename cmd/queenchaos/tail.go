package main

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/queengate/queengate/internal/chaos/world"
)

// tailServedCounter counts the consume cycles a gateway served from its
// tail (docs/design.md, "The tail").
const tailServedCounter = "queengate_tail_cycles_served_total"

// tailCounters are the gateways' tail counters the report sums at the
// end: what the tail did over the whole run.
var tailCounters = []string{tailServedCounter, "queengate_tail_cycles_acked_total",
	"queengate_tail_cycles_missed_total", "queengate_tail_cycles_refused_total"}

// tailWait is the longest a fault waits for a tail to serve a cycle
// before it strikes anyway: the report then says it struck no serving
// tail, and the tests fail.
const tailWait = 30 * time.Second

// tailPoll is how often the served counters are read while waiting: a
// cycle takes a few milliseconds, so a fault struck right after a rise
// meets cycles in flight.
const tailPoll = 20 * time.Millisecond

// tailSeen is what a fault saw of a gateway's tail before it struck.
type tailSeen struct {
	Gateway int   // the gateway watched, -1 when none rose
	Served  int64 // its served cycles at the last reading
	Serving bool  // the count rose while watched: cycles were being served
}

// String is what the fault log says of the tail: nothing for a fault
// that did not look.
func (t tailSeen) String() string {
	switch {
	case t.Gateway < 0:
		return ""
	case t.Serving:
		return fmt.Sprintf(", struck right after gateway %d's tail served its cycle number %d", t.Gateway, t.Served)
	default:
		return fmt.Sprintf(", no tail seen serving (gateway %d's had served %d cycles)", t.Gateway, t.Served)
	}
}

// untilTailServes reads the served counters of candidates (indexes into
// w.Gateways()) until one rises, and returns at once: that gateway's tail
// is serving the consumers' cycles right now, so a fault struck next
// strikes among them. After tailWait without a rise it returns the first
// candidate's last count, not serving.
func untilTailServes(ctx context.Context, w *world.World, candidates []int, log func(string, ...any)) tailSeen {
	first := map[int]int64{}
	deadline := time.Now().Add(tailWait)
	last := tailSeen{Gateway: candidates[0]}
	for ctx.Err() == nil {
		for _, i := range candidates {
			n, ok := tailServed(ctx, w.Gateways()[i])
			if !ok {
				continue
			}
			if i == candidates[0] {
				last.Served = n
			}
			before, seen := first[i]
			switch {
			case !seen:
				first[i] = n
			case n > before:
				return tailSeen{Gateway: i, Served: n, Serving: true}
			}
		}
		if time.Now().After(deadline) {
			log("no tail served a cycle within %v at gateways %v: striking anyway", tailWait, candidates)
			return last
		}
		world.Sleep(ctx, tailPoll)
	}
	return last
}

// tailServed is g's served count now; false when g does not answer or
// exposes no tail (--tail-mb 0).
func tailServed(ctx context.Context, g *world.Gateway) (int64, bool) {
	counters, err := g.Counters(ctx, []string{tailServedCounter})
	if err != nil {
		return 0, false
	}
	n, ok := counters[tailServedCounter]
	return int64(n), ok
}

// tailCell is the report's word on the tails a kind of fault struck: the
// cycles each had served, "—" for faults that do not look.
func tailCell(f faultFigures) string {
	if !watchesTail(f.Kind) {
		return "—"
	}
	var parts []string
	for _, n := range f.TailServed {
		parts = append(parts, fmt.Sprintf("%d cycles", n))
	}
	if f.TailIdle > 0 {
		parts = append(parts, fmt.Sprintf("%d struck none serving", f.TailIdle))
	}
	return strings.Join(parts, ", ")
}

// writeTails adds what the gateways' tails did to the report.
func writeTails(b *strings.Builder, out *outcome) {
	if len(out.Tails) == 0 {
		return
	}
	fmt.Fprintf(b, "Gateways' tails at the end (a restarted gateway counts from its restart): %.0f cycles served, %.0f acks settled alone, %.0f missed, %.0f refused.\n\n",
		out.Tails[tailServedCounter], out.Tails["queengate_tail_cycles_acked_total"], out.Tails["queengate_tail_cycles_missed_total"],
		out.Tails["queengate_tail_cycles_refused_total"])
}
