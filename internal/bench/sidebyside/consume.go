package sidebyside

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	queengate "github.com/queengate/queengate"
	"github.com/queengate/queengate/consumer"
	"github.com/queengate/queengate/internal/bench"
	"github.com/queengate/queengate/internal/bench/report"
	"github.com/queengate/queengate/internal/bench/target"
)

// The consume scenario stores the same messages in queengate and in a
// JetStream stream, then consumes them with acknowledgements in several
// shapes, each a few alternating rounds, a new group or consumer per
// round: the same number of consumers on each side (queengate: consumers
// of a group, each popping batches from any partition and acknowledging
// them by transactionId; JetStream: fetchers of a durable pull consumer
// over all the stream's subjects, fetching batches and acknowledging each
// message explicitly). The shapes: each batch size of --consume-batch
// over the workload's partitions; the same messages over
// --consume-partitions partitions (JetStream: a stream of that many
// subjects); --consume-fanout groups (JetStream: durable consumers) each
// reading everything. Every message must be delivered and acknowledged
// exactly once per group (no consumer fails). Each round's CPU, across
// every process that serves it, is compared with the fill's (the pushes).
// It then measures end-to-end latency (push to delivery) with consumers
// waiting while producers push, push throughput with and without a
// consumer beside, and, with --idle-pollers, what long polls cost while
// nothing arrives (consumeidle.go).

// consumeBenchResult is one round of one side in one shape.
type consumeBenchResult struct {
	Target       string        `json:"target"`
	Round        int           `json:"round"`
	Shape        string        `json:"shape"`
	Partitions   int           `json:"partitions"`
	Batch        int           `json:"batch"`
	Groups       int           `json:"groups"`
	Messages     int64         `json:"messages"` // deliveries counted once per group
	Redeliveries int64         `json:"redeliveries"`
	Duplicates   int64         `json:"duplicates"` // delivered more than once to a group
	Elapsed      time.Duration `json:"elapsedNs"`
	Throughput   float64       `json:"throughput"`
	// Cut: the round stopped at --consume-round-time, Messages short of
	// all; its throughput is what it delivered until then.
	Cut bool `json:"cut,omitempty"`
	// CPUMicrosPerMessage is the serving processes' CPU over the round
	// per message delivered (cpuMeter), -1 if unknown.
	CPUMicrosPerMessage float64 `json:"cpuMicrosPerMessage"`
	// Cycles are the consumers' requests: pops, or fetches (consumesplit.go).
	Cycles int64 `json:"cycles"`
	// Split is CPUMicrosPerMessage by process, with the load generator's.
	Split []ProcessCPU `json:"split"`
}

// ConsumeReport is the consume scenario's outcome. Batch and
// RatioMedian are the first shape's (batches of 100 if measured).
type ConsumeReport struct {
	Messages, Partitions, PayloadBytes, Batch int
	Results                                   []consumeBenchResult
	RatioMedian                               float64
	LatencyP50, LatencyP99                    time.Duration // queengate, push to delivery
	JetStreamLatencyP50, JetStreamLatencyP99  time.Duration // JetStream, publish to delivery
	PushAlone, PushWithConsumers              float64       // msg/s
	PushP99Alone, PushP99WithConsumers        time.Duration
	Shapes                                    []ShapeSummary
	// PushCPUMicros and JetStreamPushCPUMicros are the CPU per message
	// stored by the fill (queengate: requests of fillRequest messages;
	// JetStream: asynchronous publishes).
	PushCPUMicros, JetStreamPushCPUMicros float64
	// PostgresCPUCounted: queengate's CPU includes PostgreSQL's processes
	// (false when its server's processes cannot be read here).
	PostgresCPUCounted bool
	Idle               *consumeIdleReport `json:",omitempty"`
	// Splits are each shape's CPU by process, a side each; Fits the
	// fixed cost of a cycle and the cost of a message over the batch
	// shapes (none with one batch size).
	Splits []ShapeSplit
	Fits   []CycleFit
}

// ShapeSummary is a shape's medians over its rounds.
type ShapeSummary struct {
	Shape      string `json:"shape"`
	Partitions int    `json:"partitions"`
	Batch      int    `json:"batch"`
	Groups     int    `json:"groups"`
	Consumers  int    `json:"consumers"` // per group
	// Queengate and JetStream are median msg/s, RatioMedian the median
	// of the rounds' ratios.
	Queengate, JetStream float64
	RatioMedian          float64 `json:"ratioMedian"`
	// CPU per consumed message, medians, in µs.
	QueengateCPUMicros, JetStreamCPUMicros float64
}

// ConsumeOptions shape the consume scenario beyond the workload.
type ConsumeOptions struct {
	Batches    []int // pop and fetch sizes, a shape each
	Partitions int   // > 0: also a shape over this many partitions
	// PopPartitions is how many partitions each pop of the Partitions
	// shape may lease (a pop's "partitions"; 0 or 1: one).
	PopPartitions int
	Fanout        int // > 0: also a shape of this many groups
	IdlePollers   int // > 0: the idle phase with this many long polls
	IdleTime      time.Duration
	IdleSettle    time.Duration
	RoundTime     time.Duration // longest a round may take
}

// consumeShape is one way of consuming the stored messages.
type consumeShape struct {
	name                                 string
	set                                  storedSet
	partitions, batch, groups, consumers int
	popPartitions                        int // partitions a pop may lease (0: one)
	roundTime                            time.Duration
	inFit                                bool // a batch size over the workload's partitions
}

// group names a group (JetStream: a durable consumer) of a round.
func (sh consumeShape) group(round, g int) string {
	return fmt.Sprintf("%s-%d-g%d", strings.ReplaceAll(sh.name, " ", "-"), round, g)
}

// mainBatch is the batch size of the first shape: 100 if measured.
func mainBatch(batches []int) int {
	if slices.Contains(batches, 100) {
		return 100
	}
	return batches[0]
}

// consumeShapes are the shapes to measure, the main one (mainBatch over
// the workload's partitions) first. Every shape runs as many consumers
// per group as the workload has partitions, each popping any partition.
func consumeShapes(co ConsumeOptions, w bench.Workload, main, wide storedSet) []consumeShape {
	b := mainBatch(co.Batches)
	one := func(name string, set storedSet, partitions, batch, groups int) consumeShape {
		return consumeShape{name: name, set: set, partitions: partitions, batch: batch, groups: groups, consumers: w.Partitions,
			roundTime: co.RoundTime}
	}
	batch := func(size int) consumeShape {
		sh := one(fmt.Sprint("batch ", size), main, w.Partitions, size, 1)
		sh.inFit = true
		return sh
	}
	shapes := []consumeShape{batch(b)}
	for _, other := range co.Batches {
		if other != b {
			shapes = append(shapes, batch(other))
		}
	}
	if co.Partitions > 0 {
		name := fmt.Sprint(co.Partitions, " partitions")
		if co.PopPartitions > 1 {
			name += fmt.Sprint(" by ", co.PopPartitions) // partitions per pop
		}
		sh := one(name, wide, co.Partitions, b, 1)
		sh.popPartitions = co.PopPartitions
		shapes = append(shapes, sh)
	}
	if co.Fanout > 0 {
		shapes = append(shapes, one(fmt.Sprint("fan-out ", co.Fanout), main, w.Partitions, b, co.Fanout))
	}
	return shapes
}

// RunConsume runs the consume scenario and prints its report on stdout
// (and as JSON where o says).
func RunConsume(ctx context.Context, o Options, stdout io.Writer, logf func(string, ...any)) error {
	w, co := o.W, o.Consume
	s, err := startSideBySide(ctx, o, "consume", logf)
	if err != nil {
		return err
	}
	defer s.Close()
	client, js := s.client, s.js
	qgMeter, err := newQueengateMeter(ctx, s.env)
	if err != nil {
		logf("PostgreSQL's CPU is left out: %v", err)
	}
	jsMeter := cpuMeter{pids: []int{js.Server.PID()}}
	rep := &ConsumeReport{Messages: int(w.Total), Partitions: w.Partitions, PayloadBytes: w.PayloadBytes, Batch: mainBatch(co.Batches),
		PostgresCPUCounted: qgMeter.postmaster > 0}
	queue := fmt.Sprintf("consume-%x", time.Now().UnixNano()&0xffffff)
	main := storedSet{queue: queue, stream: target.JetStreamStream, streamSubjects: "bench.>", subjects: "bench.read"} // bench.live: latency
	wide := storedSet{queue: queue + "-wide", stream: target.JetStreamStream + "WIDE", streamSubjects: "wide.>", subjects: "wide"}
	if err := fillMeasured(ctx, s, main, w, qgMeter, jsMeter, rep, logf); err != nil {
		return err
	}
	if co.Partitions > 0 {
		ww := w
		ww.Partitions = co.Partitions
		if err := s.fill(ctx, wide, ww, logf); err != nil {
			return err
		}
	}
	shapes := consumeShapes(co, w, main, wide)
	split := sideMeters{queengate: queengateSplit(s.env, qgMeter.postmaster), jetstream: jetStreamSplit(js)}
	for _, sh := range shapes {
		if err := runConsumeShape(ctx, s, sh, o.Rounds, w, split, rep, logf); err != nil {
			return fmt.Errorf("%s: %w", sh.name, err)
		}
	}
	rep.RatioMedian = rep.Shapes[0].RatioMedian
	rep.Fits = fitCycles(rep.Splits)
	if err := consumeLatency(ctx, client, queue+"-live", w, o.PushTime, rep); err != nil {
		return err
	}
	if err := consumeLatencyJetStream(ctx, js, w, o.PushTime, rep); err != nil {
		return err
	}
	if err := pushBesideConsumers(ctx, client, queue+"-beside", w, o.PushTime, rep, logf); err != nil {
		return err
	}
	logf("end to end p50 %v p99 %v (JetStream %v, %v); push %.0f msg/s alone, %.0f with a consumer beside", rep.LatencyP50, rep.LatencyP99,
		rep.JetStreamLatencyP50, rep.JetStreamLatencyP99, rep.PushAlone, rep.PushWithConsumers)
	if co.IdlePollers > 0 {
		// Last: the gateway holds the long polls until they time out.
		if rep.Idle, err = consumeIdle(ctx, s, queue, shapes[0].group(1, 0), co, qgMeter, logf); err != nil {
			return fmt.Errorf("idle: %w", err)
		}
	}
	writeConsumeBenchReport(stdout, o, rep)
	if o.JSONOut != "" {
		b, _ := json.MarshalIndent(rep, "", "  ")
		return os.WriteFile(o.JSONOut, append(b, '\n'), 0o644)
	}
	return nil
}

// fillMeasured is sideBySide.fill taking each side's CPU per message
// stored.
func fillMeasured(ctx context.Context, s *sideBySide, set storedSet, w bench.Workload, qg, js cpuMeter, rep *ConsumeReport, logf func(string, ...any)) error {
	logf("storing %d messages of %d bytes in %d partitions, in queengate and in JetStream", w.Total, w.PayloadBytes, w.Partitions)
	var err error
	rep.PushCPUMicros, err = qg.perMessage(w.Total, func() error { return fillQueengate(ctx, s.client, set.queue, w) })
	if err != nil {
		return fmt.Errorf("fill queengate: %w", err)
	}
	rep.JetStreamPushCPUMicros, err = js.perMessage(w.Total, func() error { return fillJetStream(ctx, s.js, set, w) })
	if err != nil {
		return fmt.Errorf("fill jetstream: %w", err)
	}
	return nil
}

// sideMeters meter each side's processes during its consume rounds.
type sideMeters struct {
	queengate, jetstream splitMeter
}

// runConsumeShape runs a shape's rounds, both sides alternating, and adds
// their results and summaries to rep.
func runConsumeShape(ctx context.Context, s *sideBySide, sh consumeShape, rounds int, w bench.Workload, meters sideMeters, rep *ConsumeReport, logf func(string, ...any)) error {
	logf("consuming: %s (%d partitions, batches of %d, %d group(s) of %d consumers)", sh.name, sh.partitions, sh.batch, sh.groups, sh.consumers)
	side := func(m splitMeter, consume func(round int) (consumeBenchResult, error)) func(int) (consumeBenchResult, error) {
		return func(round int) (r consumeBenchResult, err error) {
			cpu, err := m.read()
			if err == nil {
				r, err = consume(round)
			}
			if err == nil {
				r.Split, err = m.since(cpu, r.Messages, r.Cycles)
				r.CPUMicrosPerMessage = servingMicrosPerMessage(r.Split, r.Messages)
			}
			return r, err
		}
	}
	var results []consumeBenchResult
	err := alternate(rounds,
		side(meters.queengate, func(round int) (consumeBenchResult, error) { return consumeQueengate(ctx, s.client, sh, round, w) }),
		side(meters.jetstream, func(round int) (consumeBenchResult, error) { return consumeJetStream(ctx, s.js, sh, round, w) }),
		func(round int, r consumeBenchResult) {
			r.Round, r.Shape, r.Partitions, r.Batch, r.Groups = round, sh.name, sh.partitions, sh.batch, sh.groups
			logf("round %d: %s consumed %d messages%s in %v: %.0f msg/s, %.1f µs CPU each, %d redelivered, %d twice",
				round, r.Target, r.Messages, cutNote(r.Cut), r.Elapsed.Round(time.Millisecond), r.Throughput, r.CPUMicrosPerMessage, r.Redeliveries, r.Duplicates)
			results = append(results, r)
		})
	if err != nil {
		return err
	}
	rep.Results = append(rep.Results, results...)
	rep.Shapes = append(rep.Shapes, summariseShape(sh, results))
	rep.Splits = append(rep.Splits, summariseSplits(sh, results)...)
	return nil
}

// cutNote marks a round cut short by --consume-round-time.
func cutNote(cut bool) string {
	if cut {
		return " (cut at --consume-round-time)"
	}
	return ""
}

// summariseShape takes the medians of a shape's rounds.
func summariseShape(sh consumeShape, results []consumeBenchResult) ShapeSummary {
	median := func(target string, f func(consumeBenchResult) float64) float64 {
		var xs []float64
		for _, r := range results {
			if r.Target == target {
				xs = append(xs, f(r))
			}
		}
		return report.MedianFloat(xs)
	}
	throughput := func(r consumeBenchResult) float64 { return r.Throughput }
	cpu := func(r consumeBenchResult) float64 { return r.CPUMicrosPerMessage }
	return ShapeSummary{Shape: sh.name, Partitions: sh.partitions, Batch: sh.batch, Groups: sh.groups, Consumers: sh.consumers,
		Queengate: median("queengate", throughput), JetStream: median("jetstream", throughput),
		RatioMedian:        medianRatio(results, func(r consumeBenchResult) (int, string, float64) { return r.Round, r.Target, r.Throughput }),
		QueengateCPUMicros: median("queengate", cpu), JetStreamCPUMicros: median("jetstream", cpu)}
}

// exactly counts deliveries per group and transactionId: every stored
// message once to each group.
type exactly struct {
	mu   sync.Mutex
	seen map[string]int32
	dups int64
}

func newExactly(w bench.Workload, groups int) *exactly {
	return &exactly{seen: make(map[string]int32, w.Total*int64(groups))}
}

// add counts a delivery of id to group g.
func (e *exactly) add(g int, id string) {
	if g > 0 {
		id = strconv.Itoa(g) + "/" + id
	}
	e.mu.Lock()
	if e.seen[id]++; e.seen[id] == 2 {
		e.dups++
	}
	e.mu.Unlock()
}

// check says what a round delivered, and fails it unless every message
// reached every group once; cut, the round ran out of time: fewer
// messages are expected, and still none twice.
func (e *exactly) check(target string, w bench.Workload, groups int, took time.Duration, redelivered int64, cut bool) (consumeBenchResult, error) {
	r := consumeBenchResult{Target: target, Messages: int64(len(e.seen)), Redeliveries: redelivered, Duplicates: e.dups,
		Elapsed: took, Throughput: float64(len(e.seen)) / took.Seconds()}
	want := w.Total * int64(groups)
	r.Cut = cut && r.Messages < want
	if (r.Messages != want && !r.Cut) || e.dups > 0 || redelivered > 0 {
		return r, fmt.Errorf("%s: %d of %d deliveries, %d twice, %d redelivered", target, r.Messages, want, e.dups, redelivered)
	}
	return r, nil
}

// consumeQueengate drains the shape's queue with new groups, each of
// sh.consumers consumers popping from any partition (up to
// sh.popPartitions at once); each batch is acknowledged by transactionId
// with the consumer's next pop, each lease's, as the Go package consumer
// does (one request per batch).
func consumeQueengate(ctx context.Context, c *queengate.Client, sh consumeShape, round int, w bench.Workload) (consumeBenchResult, error) {
	ex := newExactly(w, sh.groups)
	acked := make([]atomic.Int64, sh.groups)
	var redelivered, cycles atomic.Int64
	start := time.Now()
	deadline := start.Add(sh.roundTime)
	err := perPartition(sh.groups*sh.consumers, func(i int) error {
		g := i / sh.consumers
		var pending []queengate.PopAck
		for acked[g].Load() < w.Total && time.Now().Before(deadline) {
			req := queengate.PopRequest{Group: sh.group(round, g), Consumer: fmt.Sprint("c", i%sh.consumers),
				Max: sh.batch, WaitMs: 100, Partitions: sh.popPartitions}
			if len(pending) == 1 {
				req.Ack = &pending[0]
			} else if len(pending) > 1 {
				req.Acks = pending
			}
			a, err := c.Pop(ctx, sh.set.queue, "", req)
			cycles.Add(1)
			if err != nil {
				return err
			}
			if err := countAcked(a.Ack, &acked[g]); err != nil {
				return err
			}
			for k := range a.Acks {
				if err := countAcked(&a.Acks[k], &acked[g]); err != nil {
					return err
				}
			}
			pending = nil
			for _, l := range a.Leases() {
				ack := queengate.PopAck{Partition: l.Partition, LeaseID: l.LeaseID, Items: make([]queengate.AckItem, len(l.Messages))}
				for k, m := range l.Messages {
					ex.add(g, m.TransactionID)
					if m.Attempts > 1 {
						redelivered.Add(1)
					}
					ack.Items[k] = queengate.AckItem{TransactionID: m.TransactionID, Status: queengate.AckCompleted}
				}
				pending = append(pending, ack)
			}
		}
		return nil
	})
	took := time.Since(start)
	if err != nil {
		return consumeBenchResult{}, err
	}
	r, err := ex.check("queengate", w, sh.groups, took, redelivered.Load(), !time.Now().Before(deadline))
	r.Cycles = cycles.Load()
	return r, err
}

// countAcked adds an ack's settled items, refusing any other result.
func countAcked(a *queengate.AckAnswer, acked *atomic.Int64) error {
	if a == nil {
		return nil
	}
	for _, it := range a.Items {
		if it.Result != "acked" {
			return fmt.Errorf("ack of %s: %s", it.TransactionID, it.Result)
		}
	}
	acked.Add(int64(len(a.Items)))
	return nil
}

// consumeJetStream drains the shape's stream with new durable pull
// consumers over all its subjects, one per group, each fetched by
// sh.consumers fetchers acknowledging each message explicitly.
func consumeJetStream(ctx context.Context, t *target.JetStream, sh consumeShape, round int, w bench.Workload) (consumeBenchResult, error) {
	conss := make([]jetstream.Consumer, sh.groups)
	for g := range conss {
		var err error
		conss[g], err = t.AdminJS.CreateOrUpdateConsumer(ctx, sh.set.stream, jetstream.ConsumerConfig{
			Durable: sh.group(round, g), AckPolicy: jetstream.AckExplicitPolicy, FilterSubject: sh.set.subjects + ".>",
			MaxAckPending: 100 * sh.batch * sh.consumers, AckWait: time.Minute})
		if err != nil {
			return consumeBenchResult{}, err
		}
	}
	ex := newExactly(w, sh.groups)
	consumed := make([]atomic.Int64, sh.groups)
	var redelivered, cycles atomic.Int64
	start := time.Now()
	deadline := start.Add(sh.roundTime)
	err := perPartition(sh.groups*sh.consumers, func(i int) error {
		g := i / sh.consumers
		for consumed[g].Load() < w.Total && time.Now().Before(deadline) {
			batch, err := conss[g].Fetch(sh.batch, jetstream.FetchMaxWait(100*time.Millisecond))
			cycles.Add(1)
			if err != nil {
				return err
			}
			for m := range batch.Messages() {
				ex.add(g, m.Headers().Get(nats.MsgIdHdr))
				if md, err := m.Metadata(); err == nil && md.NumDelivered > 1 {
					redelivered.Add(1)
				}
				if err := m.Ack(); err != nil {
					return err
				}
				consumed[g].Add(1)
			}
			if err := batch.Error(); err != nil {
				return err
			}
		}
		return nil
	})
	took := time.Since(start)
	if err != nil {
		return consumeBenchResult{}, err
	}
	r, err := ex.check("jetstream", w, sh.groups, took, redelivered.Load(), !time.Now().Before(deadline))
	r.Cycles = cycles.Load()
	return r, err
}

// consumeLatency pushes 100-message requests at a pace consumers keep up
// with (one every 10 ms, 10k msg/s) for d while consumers wait on the
// queue, and takes each message's delay from its commit (createdAt) to
// its delivery: the long poll's wake-up, not a backlog.
func consumeLatency(ctx context.Context, c *queengate.Client, queue string, w bench.Workload, d time.Duration, rep *ConsumeReport) error {
	if _, err := c.Configure(ctx, queengate.ConfigureRequest{Queue: queue}); err != nil {
		return err
	}
	cctx, cancel := context.WithCancel(ctx)
	defer cancel()
	lat := &latencies{}
	var wg sync.WaitGroup
	for p := range w.Partitions {
		wg.Go(func() {
			_ = consumer.Run(cctx, c, queue, "latency", consumer.Options{Consumer: fmt.Sprint("c", p), Max: rep.Batch, Wait: time.Second},
				func(_ context.Context, m queengate.Delivery) error {
					lat.add(time.Since(m.CreatedAt))
					return nil
				})
		})
	}
	err := pushPaced(ctx, c, queue, w, d, 10*time.Millisecond)
	cancel()
	wg.Wait()
	q := lat.at(0.5, 0.99)
	rep.LatencyP50, rep.LatencyP99 = q[0], q[1]
	return err
}

// consumeLatencyJetStream is consumeLatency's other side: 100 messages
// published every 10 ms for d while one pull consumer per partition
// fetches and acknowledges, each message's delay taken from its stream
// timestamp to its delivery.
func consumeLatencyJetStream(ctx context.Context, t *target.JetStream, w bench.Workload, d time.Duration, rep *ConsumeReport) error {
	cons, err := t.AdminJS.CreateOrUpdateConsumer(ctx, target.JetStreamStream, jetstream.ConsumerConfig{
		Durable: "latency", AckPolicy: jetstream.AckExplicitPolicy, FilterSubject: "bench.live.>", AckWait: time.Minute})
	if err != nil {
		return err
	}
	cctx, cancel := context.WithCancel(ctx)
	defer cancel()
	lat := &latencies{}
	var wg sync.WaitGroup
	for range w.Partitions {
		wg.Go(func() {
			for cctx.Err() == nil {
				batch, err := cons.Fetch(rep.Batch, jetstream.FetchMaxWait(time.Second))
				if err != nil {
					return
				}
				for m := range batch.Messages() {
					if md, err := m.Metadata(); err == nil {
						lat.add(time.Since(md.Timestamp))
					}
					_ = m.Ack()
				}
			}
		})
	}
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	deadline := time.Now().Add(d)
	for i := 0; time.Now().Before(deadline) && err == nil; i++ {
		var acks []jetstream.PubAckFuture
		for k := range 100 {
			f, perr := t.AdminJS.PublishAsync(fmt.Sprintf("bench.live.p%d", i%w.Partitions), payload(k, w.PayloadBytes))
			if perr != nil {
				err = perr
				break
			}
			acks = append(acks, f)
		}
		for _, f := range acks {
			select {
			case <-f.Ok():
			case perr := <-f.Err():
				err = perr
			}
		}
		<-tick.C
	}
	cancel()
	wg.Wait()
	q := lat.at(0.5, 0.99)
	rep.JetStreamLatencyP50, rep.JetStreamLatencyP99 = q[0], q[1]
	return err
}

// pushPaced pushes a 100-message request every interval for d, the
// partitions in turn.
func pushPaced(ctx context.Context, c *queengate.Client, queue string, w bench.Workload, d, interval time.Duration) error {
	tick := time.NewTicker(interval)
	defer tick.Stop()
	deadline := time.Now().Add(d)
	for i := 0; time.Now().Before(deadline); i++ {
		if _, err := c.Push(ctx, queue, fmt.Sprint("p", i%w.Partitions), benchBatch(fmt.Sprint(queue, "-", i), 100, w)...); err != nil {
			return err
		}
		select {
		case <-tick.C:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return nil
}

// pushBesideConsumers measures push throughput for d alone, then for d
// with one consumer draining the queue as the pushes arrive.
func pushBesideConsumers(ctx context.Context, c *queengate.Client, queue string, w bench.Workload, d time.Duration, rep *ConsumeReport, logf func(string, ...any)) error {
	rate, lat, err := pushFor(ctx, c, queue+"-alone", "alone", w, d)
	if err != nil {
		return err
	}
	rep.PushAlone, rep.PushP99Alone = rate, lat.at(0.99)[0]
	if _, err := c.Configure(ctx, queengate.ConfigureRequest{Queue: queue + "-beside"}); err != nil {
		return err
	}
	cctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Go(func() {
		_ = consumer.Run(cctx, c, queue+"-beside", "drain", consumer.Options{Consumer: "beside", Max: rep.Batch, Wait: time.Second},
			func(context.Context, queengate.Delivery) error { return nil })
	})
	rate, lat, err = pushFor(ctx, c, queue+"-beside", "beside", w, d)
	rep.PushWithConsumers, rep.PushP99WithConsumers = rate, lat.at(0.99)[0]
	cancel()
	wg.Wait()
	logf("push alone %.0f msg/s, with a consumer beside %.0f msg/s", rep.PushAlone, rep.PushWithConsumers)
	return err
}

func writeConsumeBenchReport(out io.Writer, o Options, rep *ConsumeReport) {
	fmt.Fprintf(out, "## consume: %d messages of %d bytes, the same number of consumers per group on each side\n\n", rep.Messages, rep.PayloadBytes)
	fmt.Fprintln(out, "| shape | round | target | msg/s | elapsed | CPU µs/msg | redelivered | twice |\n|---|---:|---|---:|---:|---:|---:|---:|")
	for _, r := range rep.Results {
		fmt.Fprintf(out, "| %s | %d | %s | %.0f%s | %v | %.1f | %d | %d |\n", r.Shape, r.Round, r.Target, r.Throughput, cutNote(r.Cut), r.Elapsed.Round(time.Millisecond),
			r.CPUMicrosPerMessage, r.Redeliveries, r.Duplicates)
	}
	pg := "PostgreSQL included"
	if !rep.PostgresCPUCounted {
		pg = "PostgreSQL not counted"
	}
	fmt.Fprintf(out, "\nMedians of %d rounds (queengate ÷ JetStream pull consumer with explicit acks: the median of the rounds' ratios; CPU: every serving process, %s):\n\n", o.Rounds, pg)
	fmt.Fprintln(out, "| shape | partitions | batch | groups × consumers | queengate msg/s | JetStream msg/s | ratio | queengate CPU µs/msg | JetStream CPU µs/msg |\n|---|---:|---:|---:|---:|---:|---:|---:|---:|")
	for _, sh := range rep.Shapes {
		fmt.Fprintf(out, "| %s | %d | %d | %d × %d | %.0f | %.0f | %.2f | %.1f | %.1f |\n", sh.Shape, sh.Partitions, sh.Batch, sh.Groups, sh.Consumers,
			sh.Queengate, sh.JetStream, sh.RatioMedian, sh.QueengateCPUMicros, sh.JetStreamCPUMicros)
	}
	fmt.Fprintf(out, "\nqueengate ÷ JetStream pull consumer with explicit acks, %s, median of %d rounds: %.2f\n", rep.Shapes[0].Shape, o.Rounds, rep.RatioMedian)
	fmt.Fprintf(out, "CPU per pushed message (the fill): queengate %.1f µs, JetStream %.1f µs; per consumed message (%s): queengate %.1f µs (%.2f× its push), JetStream %.1f µs\n",
		rep.PushCPUMicros, rep.JetStreamPushCPUMicros, rep.Shapes[0].Shape, rep.Shapes[0].QueengateCPUMicros,
		rep.Shapes[0].QueengateCPUMicros/rep.PushCPUMicros, rep.Shapes[0].JetStreamCPUMicros)
	fmt.Fprintf(out, "End to end (stored to delivered, consumers waiting while 10k msg/s arrive): queengate p50 %v, p99 %v; JetStream p50 %v, p99 %v\n",
		rep.LatencyP50.Round(time.Microsecond), rep.LatencyP99.Round(time.Microsecond),
		rep.JetStreamLatencyP50.Round(time.Microsecond), rep.JetStreamLatencyP99.Round(time.Microsecond))
	fmt.Fprintf(out, "Push throughput (8 producers, 100 per request): alone %.0f msg/s (p99 %v), with a consumer beside %.0f msg/s (p99 %v): %.2f×\n",
		rep.PushAlone, rep.PushP99Alone.Round(time.Microsecond), rep.PushWithConsumers, rep.PushP99WithConsumers.Round(time.Microsecond),
		rep.PushWithConsumers/rep.PushAlone)
	if i := rep.Idle; i != nil {
		fmt.Fprintf(out, "Idle, %d long polls waiting while nothing arrives (%.0f s): PostgreSQL %.1f statements/s (%.1f without pollers), gateway CPU %.1f%% of a core (%.1f%% without), PostgreSQL CPU %.1f%%; %d polls answered, %d failed, %d messages delivered\n",
			i.Pollers, i.Seconds, i.StatementsPerSecond, i.BaselineStatementsPerSecond, i.GatewayCPUPercent, i.BaselineGatewayCPUPercent,
			i.PostgresCPUPercent, i.PollsAnswered, i.PollErrors, i.Delivered)
	}
	writeSplitAndFit(out, o.Rounds, rep)
}
