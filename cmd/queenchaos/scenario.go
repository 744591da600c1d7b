package main

import (
	"context"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/queengate/queengate/internal/chaos/verify"
	"github.com/queengate/queengate/internal/chaos/world"
)

// profile is a scenario: the world's size, the load, and the faults.
type profile struct {
	Name      string
	Gateways  int
	NATSNodes int
	Load      load
	Window    int           // the queue's dedup window, seconds
	Duration  time.Duration // producing time
	Warmup    time.Duration // before the first fault
	Every     time.Duration // between faults (a fault's own time included)
	Faults    []faultKind   // done in turn, round robin
	// BackToBack does each fault once instead, the next as soon as the
	// last one is over (untilRecovered), and ends producing after the
	// last: Every is unused, Duration the most producing time.
	BackToBack bool
	Drain      time.Duration // most time given to finish after producing stops
	Consume    consumeLoad   // no groups: no consumers
	Seed       uint64
	// Replication is one PostgreSQL, or a primary and a standby for the
	// failover faults.
	Replication world.Replication
}

// chaosConsumers are the short and long profiles' consumers: two groups
// of three, pops of up to batch messages handled in 20 ms, one batch in
// 25 in 1.5 s (a consumer then handles about eight batches a second:
// batches of 100 serve 2,400 msg/s per group), leases of 2 s so that
// every fault but the shortest outlasts some, and 3 attempts so that the
// failing group's chosen messages are dead-lettered soon. That group's
// consumers also die on one message in poisonEvery of each producer (on
// its first poisonFirst such only, when set, in the profiles whose length
// follows their faults, not the clock): with
// the default maxUnheardDeliveries (3), nine deliveries, about 3 s each
// (the lease, and the pop that finds it run out), hold its partition for
// that group some 30 s; the drain leaves time for the last. A third
// group, mirror, follows each partition with a consumer of its own that
// handles a batch in 100 ms: it keeps up within a frame or two, the
// cycles a gateway serves from its tail (consumeLoad.Follower).
func chaosConsumers(batch int, poisonEvery, poisonFirst uint32) consumeLoad {
	return consumeLoad{Groups: []string{"audit", "billing"}, PerGroup: 3, Max: batch,
		Lease: 2 * time.Second, Wait: time.Second, Handling: 20 * time.Millisecond, SlowEvery: 25, SlowHandling: 1500 * time.Millisecond,
		FailEvery: 200, PoisonEvery: poisonEvery, PoisonFirst: poisonFirst, MaxAttempts: 3, Drain: time.Minute,
		Follower: "mirror", FollowHandling: 100 * time.Millisecond}
}

var profiles = map[string]profile{
	// short runs each fault kind once, back to back, in the test suite.
	"short": {Name: "short", Gateways: 3, NATSNodes: 3, Window: 3600,
		Load:     load{Producers: 8, Partitions: 16, Batch: 10, Rate: 1500, RetryShare: 0.2, Timeout: 2 * time.Second},
		Duration: 3 * time.Minute, Warmup: 5 * time.Second, BackToBack: true, Faults: allFaults,
		Drain: time.Minute, Consume: chaosConsumers(100, 500, 2), Seed: 1},
	// long repeats every fault kind, in a random order, for 10 minutes.
	"long": {Name: "long", Gateways: 3, NATSNodes: 3, Window: 3600,
		Load:     load{Producers: 16, Partitions: 32, Batch: 20, Rate: 3000, RetryShare: 0.2, Timeout: 2 * time.Second},
		Duration: 10 * time.Minute, Warmup: 10 * time.Second, Every: 12 * time.Second, Faults: allFaults,
		Drain: 2 * time.Minute, Consume: chaosConsumers(300, 20000, 0), Seed: 1},
	// soak runs no faults: a fixed offered load, high (on the 2-core
	// machine it was written on, about what three gateways serve), for
	// throughput and memory over time. The window is two
	// minutes, so that caches and log_txns reach their steady size within
	// the run and anything growing past it shows.
	"soak": {Name: "soak", Gateways: 3, NATSNodes: 3, Window: 120,
		Load:     load{Producers: 32, Partitions: 64, Batch: 50, Rate: 100000, RetryShare: 0.2, Timeout: 5 * time.Second},
		Duration: 10 * time.Minute, Drain: 2 * time.Minute, Seed: 1},
	// failover-sync fails over between a primary and a synchronous
	// standby every 40 s, by kill -9 and by shutdown in turn, under about
	// a million new ids in five minutes: nothing acknowledged may be
	// lost, the verifier is the strict one.
	"failover-sync": failoverProfile("failover-sync", world.Replication{Standby: true, Sync: true, Commit: "on"}),
	// failover-async does the same with an asynchronous standby: the
	// verifier counts what the failovers lost and judges the rest.
	"failover-async": failoverProfile("failover-async", world.Replication{Standby: true}),
	// failover-short is one failover (kill -9) to a synchronous standby
	// (remote_apply) under a light load, in the test suite.
	"failover-short": {Name: "failover-short", Gateways: 2, NATSNodes: 1, Window: 3600,
		Load:     load{Producers: 4, Partitions: 8, Batch: 10, Rate: 1000, RetryShare: 0.2, Timeout: 2 * time.Second},
		Duration: 2 * time.Minute, Warmup: 4 * time.Second, BackToBack: true, Faults: []faultKind{failoverKill},
		Drain: time.Minute, Consume: chaosConsumers(100, 500, 2), Seed: 1,
		Replication: world.Replication{Standby: true, Sync: true, Commit: "remote_apply"}},
}

// failoverProfile is a full failover profile with repl.
func failoverProfile(name string, repl world.Replication) profile {
	return profile{Name: name, Gateways: 3, NATSNodes: 3, Window: 3600,
		Load:     load{Producers: 16, Partitions: 32, Batch: 20, Rate: 5000, RetryShare: 0.2, Timeout: 2 * time.Second},
		Duration: 5 * time.Minute, Warmup: 15 * time.Second, Every: 40 * time.Second, Faults: failoverFaults,
		Drain: 2 * time.Minute, Consume: chaosConsumers(300, 20000, 0), Seed: 1, Replication: repl}
}

// outcome is a run's figures.
type outcome struct {
	Profile  string          `json:"profile"`
	Started  time.Time       `json:"started"`
	Elapsed  time.Duration   `json:"elapsedNs"`
	Load     load            `json:"load"`
	Faults   []faultFigures  `json:"faults"`
	Verifier verify.Findings `json:"verifier"`
	// Unanswered are messages still without a stored answer when the
	// drain ended (the verifier cannot say they were lost: never acked).
	Unanswered int64 `json:"unanswered"`
	Retries    int64 `json:"retries"`
	// PopFailures are consumers' pops that got no answer or an error.
	PopFailures int64    `json:"popFailures"`
	Minutes     []minute `json:"minutes"`
	// Failovers are the failover faults one by one; Counters the
	// gateways' failover and cache counters at the end, summed.
	Failovers []failoverFigures  `json:"failovers,omitempty"`
	Counters  map[string]float64 `json:"counters,omitempty"`
	// Tails are the gateways' tail counters at the end, summed.
	Tails map[string]float64 `json:"tails,omitempty"`
}

// minute is one minute of the run: messages answered as stored, and the
// gateways' resident memory at its end.
type minute struct {
	Messages int64   `json:"messages"`
	RSSBytes []int64 `json:"rssBytes"`
}

// runProfile runs p in dir with the gateway binary bin.
func runProfile(ctx context.Context, p profile, dir, bin string, log func(string, ...any)) (*outcome, error) {
	if err := checkFaults(p); err != nil {
		return nil, err
	}
	w, err := world.Start(ctx, dir, bin, p.NATSNodes, p.Gateways, p.Replication, log)
	if err != nil {
		return nil, err
	}
	defer w.Stop()
	queue := "chaos-" + p.Name
	w.Queue = queue
	if err := w.CreateQueue(ctx, queue, p.Window, p.Consume.MaxAttempts); err != nil {
		return nil, err
	}
	p.Load.RepeatWithin = time.Duration(p.Window) * time.Second / 2
	out := &outcome{Profile: p.Name, Started: time.Now(), Load: p.Load}
	led := newLedger(p.Load.Partitions)
	producers, err := startProducers(w, p, queue, led)
	if err != nil {
		return nil, err
	}
	defer func() {
		for _, pr := range producers {
			pr.nc.Close()
		}
	}()
	fleet, err := startConsumers(ctx, w, p.Consume, queue, p.Load.Partitions, p.Load.Timeout)
	if err != nil {
		return nil, err
	}
	defer fleet.close()
	drainCtx, cancelDrain := context.WithCancel(ctx)
	defer cancelDrain()
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for _, pr := range producers {
		wg.Go(func() { pr.run(drainCtx, stop) })
	}
	log("%s: %d producers offering %d msg/s to %d gateways for %v", p.Name, p.Load.Producers, p.Load.Rate, p.Gateways, p.Duration)
	if len(fleet.consumers) > 0 {
		log("%s: %v", p.Name, p.Consume)
	}
	faults, rss := schedule(ctx, w, p, led, log)
	close(stop)
	stopped := time.Now()
	drainProducers(&wg, p.Drain, cancelDrain, log)
	log("drain: producers done %v after producing stopped", time.Since(stopped).Round(10*time.Millisecond))
	consumed := fleet.finish(ctx, w, stopped, log)
	out.Elapsed = time.Since(out.Started)
	out.Counters = w.GatewayCounters(ctx, failoverCounters)
	out.Tails = w.GatewayCounters(ctx, tailCounters)
	slices.SortFunc(led.events, func(a, b event) int { return a.at.Compare(b.at) })
	out.Faults = figuresByKind(faults, led.events, p.Load.Producers)
	out.Failovers = figuresByFailover(w.Failovers(), led.events, p.Load.Producers)
	out.Minutes = perMinute(led.events, out.Started, rss)
	out.Retries = led.retries
	out.Unanswered = led.unanswered()
	out.PopFailures = fleet.led.popFailures.Load()
	if out.Verifier, err = verifyRun(ctx, w, led, consumed, log); err != nil {
		return nil, err
	}
	if c := out.Verifier.Consume; c != nil && c.Violations() > 0 {
		// What the consumers saw, to look into what the verifier found.
		if err := writeJSON(filepath.Join(dir, "consumed.json"), consumed); err != nil {
			log("consumed.json: %v", err)
		}
	}
	return out, nil
}

// verifyRun runs the verifier on the world's queue: the strict one,
// unless failovers under asynchronous replication may have lost some.
func verifyRun(ctx context.Context, w *world.World, led *ledger, consumed *verify.Consumed, log func(string, ...any)) (verify.Findings, error) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Hour) // a soak's log holds tens of millions of messages
	defer cancel()
	verifying := time.Now()
	reported, err := reportedLost(w)
	if err != nil {
		return verify.Findings{}, fmt.Errorf("gateways' reports of lost messages: %w", err)
	}
	f, err := verify.VerifyFailovers(ctx, w.PGURL(), w.Queue, led.expected(), consumed, verifierFailovers(w), reported)
	if err != nil {
		return f, fmt.Errorf("verify: %w", err)
	}
	log("verified in %v", time.Since(verifying).Round(10*time.Millisecond))
	return f, nil
}

// drainProducers waits for the producers, which resend what was not yet
// answered, for at most drain; then it cancels them (cancelDrain) and
// waits for them to return.
func drainProducers(wg *sync.WaitGroup, drain time.Duration, cancelDrain context.CancelFunc, log func(string, ...any)) {
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(drain):
		log("drain: producers still retrying after %v; giving up on them", drain)
		cancelDrain()
		<-done
	}
}

func startProducers(w *world.World, p profile, queue string, led *ledger) ([]*producer, error) {
	var out []*producer
	for i := range p.Load.Producers {
		nc, err := w.Connect(i, "queenchaos producer "+strconv.Itoa(i))
		if err != nil {
			return nil, err
		}
		out = append(out, &producer{index: i, queue: queue, load: p.Load, nc: nc, led: led,
			rng: rand.New(rand.NewPCG(p.Seed, uint64(i))), answered: make([][]answeredAt, p.Load.Partitions)})
	}
	return out, nil
}

// schedule runs the faults for the profile's duration, taking the
// gateways' memory each minute.
func schedule(ctx context.Context, w *world.World, p profile, led *ledger, log func(string, ...any)) ([]fault, [][]int64) {
	rng := rand.New(rand.NewPCG(p.Seed, 0xfa17))
	end := time.Now().Add(p.Duration)
	nextFault := time.Now().Add(p.Warmup)
	nextMinute := time.Now().Add(time.Minute)
	var faults []fault
	var rss [][]int64
	kinds := slices.Clone(p.Faults)
	for i := 0; time.Now().Before(end) && ctx.Err() == nil; {
		now := time.Now()
		if !now.Before(nextMinute) {
			rss = append(rss, w.GatewayRSS())
			nextMinute = nextMinute.Add(time.Minute)
		}
		if len(kinds) > 0 && !now.Before(nextFault) && (p.BackToBack || now.Add(p.Every).Before(end)) {
			if i%len(kinds) == 0 && i > 0 {
				rng.Shuffle(len(kinds), func(a, b int) { kinds[a], kinds[b] = kinds[b], kinds[a] })
			}
			f := inject(ctx, w, kinds[i%len(kinds)], rng, log)
			log("%s (target %d): %v%s", f.Kind, f.Target, f.End.Sub(f.Start).Round(10*time.Millisecond), f.Tail)
			faults = append(faults, f)
			i++
			if !p.BackToBack {
				nextFault = f.Start.Add(p.Every)
				continue
			}
			untilRecovered(ctx, led, p.Load.Producers, f, end, log)
			if i == len(kinds) {
				break // each kind done once: producing ends
			}
			continue
		}
		world.Sleep(ctx, 100*time.Millisecond)
	}
	rss = append(rss, w.GatewayRSS())
	return faults, rss
}

// untilRecovered waits until fault f's window has passed (afterFault
// past its end: its figures are measured alone) and every producer has
// had a request answered as stored since its end, or until end.
func untilRecovered(ctx context.Context, led *ledger, producers int, f fault, end time.Time, log func(string, ...any)) {
	mark := led.mark()
	windowEnd := f.End.Add(afterFault)
	for ctx.Err() == nil {
		if time.Now().After(windowEnd) && led.answeredSince(mark, f.End) == producers {
			return
		}
		if time.Now().After(end) {
			log("%s: %d of %d producers answered since its end when producing time ran out", f.Kind, led.answeredSince(mark, f.End), producers)
			return
		}
		world.Sleep(ctx, 100*time.Millisecond)
	}
}

// perMinute counts messages answered as stored in each whole minute.
func perMinute(events []event, start time.Time, rss [][]int64) []minute {
	var out []minute
	for _, e := range events {
		if e.kind != answeredOK {
			continue
		}
		m := int(e.at.Sub(start) / time.Minute)
		for len(out) <= m {
			out = append(out, minute{})
		}
		out[m].Messages += int64(e.n)
	}
	for i := range out {
		if i < len(rss) {
			out[i].RSSBytes = rss[i]
		}
	}
	return out
}

func splitComma(s string) []string {
	var out []string
	for _, part := range strings.Split(s, ",") {
		if part = strings.TrimSpace(part); part != "" {
			out = append(out, part)
		}
	}
	return out
}
