package main

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"syscall"
	"time"

	"github.com/queengate/queengate/internal/chaos/world"
)

// faultKind is one way the scenario breaks the world.
type faultKind string

const (
	killGateway  faultKind = "gateway kill -9"
	termGateway  faultKind = "gateway SIGTERM"
	pauseGateway faultKind = "gateway SIGSTOP"
	crashPG      faultKind = "PostgreSQL immediate restart"
	stopPG       faultKind = "PostgreSQL stop"
	freezePG     faultKind = "PostgreSQL freeze"
	freezeCutPG  faultKind = "PostgreSQL freeze + cut"
	restartNATS  faultKind = "NATS node restart"
	// The failovers need a standby (world.Replication.Standby), and are then
	// the only PostgreSQL faults.
	failoverKill faultKind = "PostgreSQL failover (kill -9)"
	failoverStop faultKind = "PostgreSQL failover (stop)"
)

var allFaults = []faultKind{killGateway, termGateway, pauseGateway, crashPG, stopPG, freezePG, freezeCutPG, restartNATS}

var failoverFaults = []faultKind{failoverKill, failoverStop}

// checkFaults refuses faults the profile's PostgreSQL cannot take: a
// failover needs a standby, and with one the gateways reach PostgreSQL
// without the proxy, and a restarted primary would be a second one.
func checkFaults(p profile) error {
	for _, k := range p.Faults {
		isFailover := slices.Contains(failoverFaults, k)
		isPG := k == crashPG || k == stopPG || k == freezePG || k == freezeCutPG
		if isFailover && !p.Replication.Standby || isPG && p.Replication.Standby {
			return fmt.Errorf("profile %s: fault %s needs %s", p.Name, shortName(k), map[bool]string{true: "a standby", false: "no standby"}[isFailover])
		}
	}
	return nil
}

// fault is one fault done: when, to whom, and until when it lasted (the
// broken part back in service).
type fault struct {
	Kind   faultKind
	Target int // gateway or NATS node, -1 for PostgreSQL
	Start  time.Time
	End    time.Time
	Err    string
	// Tail is what the fault saw of a gateway's tail just before it
	// struck (the gateway faults: the target's; a failover: the first
	// gateway seen serving); Gateway -1 for the faults that do not look.
	Tail tailSeen
}

// watchesTail says whether a fault of kind waits for a tail serving
// cycles and strikes right after one: a gateway killed, stopped or
// paused in the middle of the cycles it serves from its tail, PostgreSQL
// failed over under serving tails.
func watchesTail(kind faultKind) bool {
	return kind == killGateway || kind == termGateway || kind == pauseGateway || slices.Contains(failoverFaults, kind)
}

// inject does one fault of kind and waits until the broken part serves
// again. rng picks the victim; log says what could not be done.
func inject(ctx context.Context, w *world.World, kind faultKind, rng *rand.Rand, log func(string, ...any)) fault {
	f := fault{Kind: kind, Target: -1, Tail: tailSeen{Gateway: -1}}
	switch kind {
	case killGateway, termGateway, pauseGateway:
		f.Target = rng.IntN(len(w.Gateways()))
	case restartNATS:
		f.Target = rng.IntN(len(w.NATSNodes()))
	}
	if watchesTail(kind) {
		candidates := []int{f.Target}
		if f.Target < 0 {
			candidates = allGateways(w)
		}
		f.Tail = untilTailServes(ctx, w, candidates, log)
	}
	f.Start = time.Now()
	err := strike(ctx, w, kind, f.Target)
	f.End = time.Now()
	if err != nil {
		f.Err = err.Error()
		log("fault %s: %v", kind, err)
	}
	return f
}

// strike does the fault, on target for those that have one, and waits
// until the broken part serves again.
func strike(ctx context.Context, w *world.World, kind faultKind, target int) error {
	switch kind {
	case killGateway:
		return w.Gateways()[target].RestartAfter(ctx, syscall.SIGKILL, time.Second)
	case termGateway:
		return w.Gateways()[target].RestartAfter(ctx, syscall.SIGTERM, time.Second)
	case pauseGateway:
		return w.Gateways()[target].Pause(ctx, 3*time.Second)
	case crashPG:
		return w.PGCrash(ctx)
	case stopPG:
		return w.PGStop(ctx, 3*time.Second)
	case freezePG:
		w.PGFreeze(ctx, 5*time.Second, false)
	case freezeCutPG:
		w.PGFreeze(ctx, 5*time.Second, true)
	case restartNATS:
		return w.NATSNodes()[target].Restart(ctx, 2*time.Second)
	case failoverKill, failoverStop:
		return w.Failover(ctx, kind == failoverStop)
	}
	return nil
}

func allGateways(w *world.World) []int {
	out := make([]int, len(w.Gateways()))
	for i := range out {
		out[i] = i
	}
	return out
}

// faultFigures are what producers saw around one kind of fault, summed or
// maxed over its instances.
type faultFigures struct {
	Kind  faultKind `json:"kind"`
	Count int       `json:"count"`
	// LongestFleetGap is the longest time without any successful answer,
	// to any producer; LongestProducerGap the longest one producer went
	// without, and MedianProducerGap the median of producers' longest.
	LongestFleetGap    time.Duration `json:"longestFleetGapNs"`
	LongestProducerGap time.Duration `json:"longestProducerGapNs"`
	MedianProducerGap  time.Duration `json:"medianProducerGapNs"`
	// LongestWait is the longest a request waited for an answer of any
	// kind (failed and 503 included, timeouts not).
	LongestWait     time.Duration `json:"longestWaitNs"`
	FailedNotStored int           `json:"failedNotStored"`
	FailedUnknown   int           `json:"failedUnknown"`
	Timeouts        int           `json:"timeouts"`
	Refused         int           `json:"refused"`
	Errors          []string      `json:"errors,omitempty"`
	// TailServed is, for each instance that saw a tail serving, the
	// cycles that gateway's tail had served when the fault struck, just
	// after one more; TailIdle counts the instances that waited in vain.
	// Both empty for the faults that do not look (watchesTail).
	TailServed []int64 `json:"tailServedBefore,omitempty"`
	TailIdle   int     `json:"tailIdle,omitempty"`
}

// DefiniteShare is the share of failed answers that said "not stored".
func (f faultFigures) DefiniteShare() float64 {
	if total := f.FailedNotStored + f.FailedUnknown; total > 0 {
		return float64(f.FailedNotStored) / float64(total)
	}
	return 1
}

// afterFault is how long past a fault's end its figures still count: the
// answers it held up arrive then.
const afterFault = 3 * time.Second

// figuresByKind measures each fault's window [start, end+afterFault] in
// the producers' events.
func figuresByKind(faults []fault, events []event, producers int) []faultFigures {
	byKind := map[faultKind]*faultFigures{}
	var order []faultKind
	for _, f := range faults {
		ff := byKind[f.Kind]
		if ff == nil {
			ff = &faultFigures{Kind: f.Kind}
			byKind[f.Kind] = ff
			order = append(order, f.Kind)
		}
		ff.Count++
		if f.Err != "" {
			ff.Errors = append(ff.Errors, f.Err)
		}
		switch {
		case f.Tail.Serving:
			ff.TailServed = append(ff.TailServed, f.Tail.Served)
		case watchesTail(f.Kind):
			ff.TailIdle++
		}
		from, to := f.Start, f.End.Add(afterFault)
		fleet, perProducer := gaps(events, producers, from, to)
		ff.LongestFleetGap = max(ff.LongestFleetGap, fleet)
		slices.Sort(perProducer)
		ff.LongestProducerGap = max(ff.LongestProducerGap, perProducer[len(perProducer)-1])
		ff.MedianProducerGap = max(ff.MedianProducerGap, perProducer[len(perProducer)/2])
		for _, e := range events {
			if e.at.Before(from) || e.at.After(to) {
				continue
			}
			if e.kind != timedOut {
				ff.LongestWait = max(ff.LongestWait, e.wait)
			}
			switch e.kind {
			case failedNotStored:
				ff.FailedNotStored += e.n
			case failedUnknown:
				ff.FailedUnknown += e.n
			case timedOut:
				ff.Timeouts++
			case refused:
				ff.Refused++
			}
		}
	}
	out := make([]faultFigures, 0, len(order))
	for _, k := range order {
		out = append(out, *byKind[k])
	}
	return out
}

// gaps returns the longest time in [from, to] without a successful
// answer to anyone, and the same per producer.
func gaps(events []event, producers int, from, to time.Time) (fleet time.Duration, perProducer []time.Duration) {
	last := make([]time.Time, producers)
	perProducer = make([]time.Duration, producers)
	lastAny := from
	for i := range last {
		last[i] = from
	}
	for _, e := range events {
		if e.kind != answeredOK || e.at.Before(from) || e.at.After(to) {
			continue
		}
		fleet = max(fleet, e.at.Sub(lastAny))
		lastAny = e.at
		perProducer[e.producer] = max(perProducer[e.producer], e.at.Sub(last[e.producer]))
		last[e.producer] = e.at
	}
	fleet = max(fleet, to.Sub(lastAny))
	for i := range perProducer {
		perProducer[i] = max(perProducer[i], to.Sub(last[i]))
	}
	return fleet, perProducer
}

func (k faultKind) String() string { return string(k) }

func parseFaults(s string) ([]faultKind, error) {
	if s == "all" {
		return allFaults, nil
	}
	var out []faultKind
	for _, name := range splitComma(s) {
		found := false
		for _, k := range append(slices.Clone(allFaults), failoverFaults...) {
			if shortName(k) == name {
				out = append(out, k)
				found = true
			}
		}
		if !found {
			return nil, fmt.Errorf("unknown fault %q", name)
		}
	}
	return out, nil
}

// shortName is a fault's name on the command line.
func shortName(k faultKind) string {
	return map[faultKind]string{killGateway: "kill", termGateway: "term", pauseGateway: "pause", crashPG: "pg-crash",
		stopPG: "pg-stop", freezePG: "pg-freeze", freezeCutPG: "pg-freeze-cut", restartNATS: "nats-restart",
		failoverKill: "failover-kill", failoverStop: "failover-stop"}[k]
}
