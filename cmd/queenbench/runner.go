package main

import (
	"context"
	"fmt"
	"io"
	"math/bits"
	"math/rand/v2"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/queengate/queengate/internal/bench"
	"github.com/queengate/queengate/internal/bench/report"
	"github.com/queengate/queengate/model"
)

// generator makes the batches of one run. Producers draw from it
// concurrently; each has its own random source, so a run is reproducible
// per producer from the seed.
type generator struct {
	w       bench.Workload
	runID   string
	queues  []string
	payload []byte // data of every message, w.PayloadBytes long
	// history is each partition's recent ids, kept only when the workload
	// retries: at a million partitions it would cost the load generator
	// more memory than the targets it measures.
	history []partitionHistory
	// touched has a bit per partition sent to (queue-major).
	touched []atomic.Uint64
	// sweep: partitions in turn rather than at random, so that a prefill
	// of at least a request per partition makes every partition exist.
	sweep bool
	swept atomic.Int64
	sent  atomic.Int64 // messages handed out
	limit int64        // messages to hand out; 0 = until the deadline
}

// historySize is how many recent ids a partition remembers for retries.
const historySize = 1024

// partitionHistory remembers recent ids of one partition, so that retries
// repeat an id that the same partition has seen. Its ring grows as ids
// come, up to historySize.
type partitionHistory struct {
	mu    sync.Mutex
	ids   []string
	owner []int32
	n     int // ids ever recorded
}

func (h *partitionHistory) add(id string, producer int) {
	h.mu.Lock()
	if len(h.ids) < historySize {
		h.ids, h.owner = append(h.ids, id), append(h.owner, int32(producer))
	} else {
		h.ids[h.n%historySize], h.owner[h.n%historySize] = id, int32(producer)
	}
	h.n++
	h.mu.Unlock()
}

// pick returns a recent id, preferring one of producer's own when own is
// set; "" when the partition has none yet.
func (h *partitionHistory) pick(r *rand.Rand, producer int, own bool) string {
	h.mu.Lock()
	defer h.mu.Unlock()
	n := len(h.ids)
	if n == 0 {
		return ""
	}
	for range 8 {
		i := r.IntN(n)
		if !own || h.owner[i] == int32(producer) {
			return h.ids[i]
		}
	}
	return h.ids[r.IntN(n)]
}

func newGenerator(w bench.Workload, runID string, limit int64) *generator {
	partitions := w.Queues * w.Partitions
	g := &generator{w: w, runID: runID, limit: limit, touched: make([]atomic.Uint64, (partitions+63)/64)}
	if w.RetryShare > 0 {
		g.history = make([]partitionHistory, partitions)
	}
	for q := range w.Queues {
		g.queues = append(g.queues, fmt.Sprintf("bench-%s-q%d", runID, q))
	}
	g.payload = makePayload(w.PayloadBytes)
	return g
}

// partitionsTouched is how many partitions were sent at least one request.
func (g *generator) partitionsTouched() int64 {
	n := 0
	for i := range g.touched {
		n += bits.OnesCount64(g.touched[i].Load())
	}
	return int64(n)
}

// makePayload is a JSON object of about n bytes.
func makePayload(n int) []byte {
	const head, tail = `{"orderId":9137,"amount":99.5,"note":"`, `"}`
	fill := max(n-len(head)-len(tail), 0)
	b := make([]byte, 0, len(head)+fill+len(tail))
	b = append(b, head...)
	for i := range fill {
		b = append(b, 'a'+byte(i%26))
	}
	return append(b, tail...)
}

// next makes producer p's next batch, or nil when the run's messages are
// all handed out.
func (g *generator) next(r *rand.Rand, p int, seq *int) *bench.Batch {
	n := g.requestSize(r)
	if g.limit > 0 {
		before := g.sent.Add(int64(n)) - int64(n)
		if before >= g.limit {
			return nil
		}
		n = int(min(int64(n), g.limit-before)) // the last request tops up to the limit
	}
	k := g.pickPartition(r)
	g.touched[k/64].Or(1 << (k % 64))
	qi, pi := k/g.w.Partitions, k%g.w.Partitions
	var hist *partitionHistory
	if g.history != nil {
		hist = &g.history[k]
	}
	b := &bench.Batch{Queue: g.queues[qi], Partition: "p" + strconv.Itoa(pi),
		IDs: make([]string, n), Data: make([][]byte, n)}
	for i := range b.IDs {
		id := ""
		if hist != nil && r.Float64() < g.w.RetryShare {
			id = hist.pick(r, p, r.Float64() >= g.w.CrossShare)
		}
		if id == "" {
			*seq++
			id = g.runID + "-" + strconv.Itoa(p) + "-" + strconv.Itoa(*seq)
			if hist != nil {
				hist.add(id, p)
			}
		}
		b.IDs[i], b.Data[i] = id, g.payload
	}
	return b
}

// requestSize is the messages of the next request: the workload's batch,
// or between its smallest and its batch, uniformly.
func (g *generator) requestSize(r *rand.Rand) int {
	lo, hi := g.w.MinPerRequest, g.w.PerRequest
	if lo <= 0 || lo >= hi {
		return hi
	}
	return lo + r.IntN(hi-lo+1)
}

// pickPartition is the next request's partition, queue-major: at random,
// or in turn when sweeping.
func (g *generator) pickPartition(r *rand.Rand) int {
	partitions := g.w.Queues * g.w.Partitions
	if g.sweep {
		return int((g.swept.Add(1) - 1) % int64(partitions))
	}
	qi, pi := r.IntN(g.w.Queues), r.IntN(g.w.Partitions)
	return qi*g.w.Partitions + pi
}

// producerResult is what one producer saw.
type producerResult struct {
	latencies []time.Duration
	answered  []time.Time // when each successful answer came
	byStatus  [4]int64
	requests  int64
	retries   int64
	maxGap    time.Duration
	exact     *exactness
	err       error
}

// retryBackoff is how long a producer waits before resending a failed
// request (RetryFailed): long enough not to spin on "no responders".
const retryBackoff = 50 * time.Millisecond

// send sends b until it is answered, when the workload retries failed
// requests; otherwise once. It returns nil statuses when ctx ends.
func send(ctx context.Context, t bench.Target, w bench.Workload, p int, b *bench.Batch, res *producerResult) []model.Status {
	for {
		statuses, err := t.Send(ctx, p, b)
		if err == nil {
			return statuses
		}
		if ctx.Err() != nil {
			return nil
		}
		if !w.RetryFailed {
			statuses = make([]model.Status, len(b.IDs))
			for i := range statuses {
				statuses[i] = model.StatusFailed
			}
			return statuses
		}
		res.retries++
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(retryBackoff):
		}
	}
}

// produce is producer p's loop: send the generator's batches until it is
// exhausted, the deadline passes or ctx ends, and record what came back.
func produce(ctx context.Context, t bench.Target, g *generator, p int, start, deadline time.Time, res *producerResult, answered *atomic.Int64) error {
	res.exact = newExactness()
	r := rand.New(rand.NewPCG(uint64(g.w.Seed), uint64(p)))
	seq := 0
	last := start
	for ctx.Err() == nil && (deadline.IsZero() || time.Now().Before(deadline)) {
		b := g.next(r, p, &seq)
		if b == nil {
			return nil
		}
		t0 := time.Now()
		statuses := send(ctx, t, g.w, p, b, res)
		if statuses == nil {
			return nil
		}
		now := time.Now()
		if len(statuses) != len(b.IDs) {
			return fmt.Errorf("%s answered %d statuses for %d messages", t.Name(), len(statuses), len(b.IDs))
		}
		if statuses[0] != model.StatusFailed {
			res.maxGap = max(res.maxGap, now.Sub(last))
			res.answered = append(res.answered, now)
			last = now
		}
		res.latencies = append(res.latencies, now.Sub(t0))
		res.requests++
		for _, s := range statuses {
			res.byStatus[s]++
		}
		res.exact.record(b, statuses)
		answered.Add(int64(len(statuses)))
	}
	return nil
}

// killWhen kills one gateway of t once answered reaches at messages (the
// failover scenario).
func killWhen(ctx context.Context, t bench.Target, answered *atomic.Int64, at int64, killed *atomic.Int64, errs chan<- error) {
	k, ok := t.(interface{ KillOne(context.Context) error })
	if !ok {
		errs <- fmt.Errorf("%s cannot kill a gateway", t.Name())
		return
	}
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for answered.Load() < at {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
	if err := k.KillOne(ctx); err != nil {
		errs <- fmt.Errorf("kill a gateway: %w", err)
		return
	}
	killed.Add(1)
}

// drive runs w.Producers producers against t until the generator is
// exhausted or the deadline passes, and summarises what they saw.
func drive(ctx context.Context, t bench.Target, g *generator, deadline time.Time, progress io.Writer) (bench.Result, *exactness, error) {
	w := g.w
	results := make([]producerResult, w.Producers)
	var answered atomic.Int64
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stopProgress := startProgress(progress, g, &answered, deadline)
	start := time.Now()
	killErr := make(chan error, 1)
	var killed atomic.Int64
	killDone := make(chan struct{})
	if w.KillAt > 0 && g.limit > 0 {
		go func() {
			defer close(killDone)
			killWhen(ctx, t, &answered, int64(w.KillAt*float64(g.limit)), &killed, killErr)
		}()
	} else {
		close(killDone)
	}
	var wg sync.WaitGroup
	for p := range w.Producers {
		wg.Go(func() {
			if err := produce(ctx, t, g, p, start, deadline, &results[p], &answered); err != nil {
				results[p].err = err
				cancel()
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	stopProgress()
	cancel() // a kill still waiting for its moment will not come
	<-killDone
	select {
	case err := <-killErr:
		return bench.Result{}, nil, err
	default:
	}

	out, exact, err := combineProducers(results, start, elapsed)
	if err != nil {
		return bench.Result{}, nil, err
	}
	out.Target, out.Scenario, out.Killed = t.Name(), w.Scenario, killed.Load()
	return out, exact, nil
}

// combineProducers sums the producers' results of a run that started at
// start and lasted elapsed: counts, latency percentiles, gaps, throughput
// and exactness; the first producer's error, if any, instead.
func combineProducers(results []producerResult, start time.Time, elapsed time.Duration) (bench.Result, *exactness, error) {
	out := bench.Result{Elapsed: elapsed}
	exact := newExactness()
	var all []time.Duration
	var answeredAt []time.Time
	for i := range results {
		r := &results[i]
		if r.err != nil {
			return bench.Result{}, nil, r.err
		}
		all = append(all, r.latencies...)
		answeredAt = append(answeredAt, r.answered...)
		out.MaxGap = max(out.MaxGap, r.maxGap)
		out.Retries += r.retries
		out.Requests += r.requests
		out.Queued += r.byStatus[model.StatusQueued]
		out.Duplicate += r.byStatus[model.StatusDuplicate]
		out.Failed += r.byStatus[model.StatusFailed]
		exact.merge(r.exact)
	}
	slices.Sort(all)
	out.FleetGap = longestGap(start, answeredAt)
	out.Messages = out.Queued + out.Duplicate + out.Failed
	if elapsed > 0 {
		// Answered failed is not throughput: a gateway refusing every
		// message at once would otherwise look fastest.
		out.Throughput = float64(out.Queued+out.Duplicate) / elapsed.Seconds()
	}
	out.P50, out.P90, out.P99 = report.Percentile(all, 0.50), report.Percentile(all, 0.90), report.Percentile(all, 0.99)
	if len(all) > 0 {
		out.Max = all[len(all)-1]
	}
	return out, exact, nil
}

// longestGap is the longest interval, from start, with none of the times.
func longestGap(start time.Time, times []time.Time) time.Duration {
	slices.SortFunc(times, func(a, b time.Time) int { return a.Compare(b) })
	gap, prev := time.Duration(0), start
	for _, at := range times {
		gap, prev = max(gap, at.Sub(prev)), at
	}
	return gap
}
