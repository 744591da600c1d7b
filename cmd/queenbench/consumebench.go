package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	queengate "github.com/queengate/queengate"
)

// The consume scenario stores the same messages in queengate and in a
// JetStream stream, then consumes them with acknowledgements, one
// consumer per partition on each side (queengate: a consumer group
// popping batches from any partition and acknowledging them by
// transactionId; JetStream: a durable pull consumer fetching batches and
// acknowledging each message explicitly), a new group or consumer per
// round, alternating rounds. Every message must be delivered and
// acknowledged exactly once (no consumer fails). It then measures
// end-to-end latency (push to delivery) with a consumer waiting while
// producers push, and push throughput with and without consumers beside.

// consumeBenchResult is one round of one side.
type consumeBenchResult struct {
	Target       string        `json:"target"`
	Round        int           `json:"round"`
	Messages     int64         `json:"messages"`
	Redeliveries int64         `json:"redeliveries"`
	Duplicates   int64         `json:"duplicates"` // delivered more than once
	Elapsed      time.Duration `json:"elapsedNs"`
	Throughput   float64       `json:"throughput"`
}

// consumeBenchReport is the consume scenario's outcome.
type consumeBenchReport struct {
	Messages, Partitions, PayloadBytes, Batch int
	Results                                   []consumeBenchResult
	RatioMedian                               float64
	LatencyP50, LatencyP99                    time.Duration // queengate, push to delivery
	JetStreamLatencyP50, JetStreamLatencyP99  time.Duration // JetStream, publish to delivery
	PushAlone, PushWithConsumers              float64       // msg/s
	PushP99Alone, PushP99WithConsumers        time.Duration
}

const consumeBatch = 100

func runConsumeBench(ctx context.Context, o options, stdout io.Writer, logf func(string, ...any)) error {
	w := o.w
	s, err := startSideBySide(ctx, o, "consume", logf)
	if err != nil {
		return err
	}
	defer s.Close()
	client, js := s.client, s.js
	rep := &consumeBenchReport{Messages: int(w.Total), Partitions: w.Partitions, PayloadBytes: w.PayloadBytes, Batch: consumeBatch}
	queue := fmt.Sprintf("consume-%x", time.Now().UnixNano()&0xffffff)
	if err := s.fill(ctx, queue, w, logf); err != nil {
		return err
	}
	err = alternate(o.rounds,
		func(round int) (consumeBenchResult, error) { return consumeQueengate(ctx, client, queue, round, w) },
		func(round int) (consumeBenchResult, error) { return consumeJetStream(ctx, js, round, w) },
		func(round int, r consumeBenchResult) {
			r.Round = round
			logf("round %d: %s consumed %d messages in %v: %.0f msg/s, %d redelivered, %d twice",
				round, r.Target, r.Messages, r.Elapsed.Round(time.Millisecond), r.Throughput, r.Redeliveries, r.Duplicates)
			rep.Results = append(rep.Results, r)
		})
	if err != nil {
		return err
	}
	rep.RatioMedian = medianRatio(rep.Results, func(r consumeBenchResult) (int, string, float64) { return r.Round, r.Target, r.Throughput })
	if err := consumeLatency(ctx, client, queue+"-live", w, o.readPushTime, rep); err != nil {
		return err
	}
	if err := consumeLatencyJetStream(ctx, js, w, o.readPushTime, rep); err != nil {
		return err
	}
	if err := pushBesideConsumers(ctx, client, queue+"-beside", w, o.readPushTime, rep, logf); err != nil {
		return err
	}
	logf("end to end p50 %v p99 %v (JetStream %v, %v); push %.0f msg/s alone, %.0f with a consumer beside", rep.LatencyP50, rep.LatencyP99,
		rep.JetStreamLatencyP50, rep.JetStreamLatencyP99, rep.PushAlone, rep.PushWithConsumers)
	writeConsumeBenchReport(stdout, o, rep)
	if o.jsonOut != "" {
		b, _ := json.MarshalIndent(rep, "", "  ")
		return os.WriteFile(o.jsonOut, append(b, '\n'), 0o644)
	}
	return nil
}

// exactly counts deliveries per transactionId: every stored message once.
type exactly struct {
	mu   sync.Mutex
	seen map[string]int32
	dups int64
}

func (e *exactly) add(id string) {
	e.mu.Lock()
	if e.seen[id]++; e.seen[id] == 2 {
		e.dups++
	}
	e.mu.Unlock()
}

func (e *exactly) check(target string, w Workload, took time.Duration, redelivered int64) (consumeBenchResult, error) {
	r := consumeBenchResult{Target: target, Messages: int64(len(e.seen)), Redeliveries: redelivered, Duplicates: e.dups,
		Elapsed: took, Throughput: float64(len(e.seen)) / took.Seconds()}
	if r.Messages != w.Total || e.dups > 0 || redelivered > 0 {
		return r, fmt.Errorf("%s: %d of %d messages consumed, %d twice, %d redelivered", target, r.Messages, w.Total, e.dups, redelivered)
	}
	return r, nil
}

// consumeQueengate drains the queue with a new group, one consumer per
// partition popping from any partition; each batch is acknowledged by
// transactionId with the consumer's next pop, as the client's Consume
// does (one request per batch).
func consumeQueengate(ctx context.Context, c *queengate.Client, queue string, round int, w Workload) (consumeBenchResult, error) {
	group := fmt.Sprint("bench-", round)
	ex := &exactly{seen: make(map[string]int32, w.Total)}
	var acked, redelivered atomic.Int64
	start := time.Now()
	err := perPartition(w.Partitions, func(p int) error {
		var pending *queengate.PopAck
		for acked.Load() < w.Total {
			a, err := c.Pop(ctx, queue, "", queengate.PopRequest{Group: group, Consumer: fmt.Sprint("c", p), Max: consumeBatch,
				WaitMs: 100, Ack: pending})
			if err != nil {
				return err
			}
			if err := countAcked(a.Ack, &acked); err != nil {
				return err
			}
			pending = nil
			if len(a.Messages) == 0 {
				continue
			}
			pending = &queengate.PopAck{Partition: a.Partition, LeaseID: a.LeaseID, Items: make([]queengate.AckItem, len(a.Messages))}
			for i, m := range a.Messages {
				ex.add(m.TransactionID)
				if m.Attempts > 1 {
					redelivered.Add(1)
				}
				pending.Items[i] = queengate.AckItem{TransactionID: m.TransactionID, Status: queengate.AckCompleted}
			}
		}
		return nil
	})
	took := time.Since(start)
	if err != nil {
		return consumeBenchResult{}, err
	}
	return ex.check("queengate", w, took, redelivered.Load())
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

// consumeJetStream drains the stream with a new durable pull consumer,
// one fetcher per partition, acknowledging each message explicitly.
func consumeJetStream(ctx context.Context, t *jetstreamTarget, round int, w Workload) (consumeBenchResult, error) {
	cons, err := t.adminJS.CreateOrUpdateConsumer(ctx, jetstreamStream, jetstream.ConsumerConfig{
		Durable: fmt.Sprint("bench-", round), AckPolicy: jetstream.AckExplicitPolicy, FilterSubject: "bench.read.>",
		MaxAckPending: 100 * consumeBatch * w.Partitions, AckWait: time.Minute})
	if err != nil {
		return consumeBenchResult{}, err
	}
	ex := &exactly{seen: make(map[string]int32, w.Total)}
	var consumed, redelivered atomic.Int64
	start := time.Now()
	err = perPartition(w.Partitions, func(int) error {
		for consumed.Load() < w.Total {
			batch, err := cons.Fetch(consumeBatch, jetstream.FetchMaxWait(100*time.Millisecond))
			if err != nil {
				return err
			}
			for m := range batch.Messages() {
				ex.add(m.Headers().Get(nats.MsgIdHdr))
				if md, err := m.Metadata(); err == nil && md.NumDelivered > 1 {
					redelivered.Add(1)
				}
				if err := m.Ack(); err != nil {
					return err
				}
				consumed.Add(1)
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
	return ex.check("jetstream", w, took, redelivered.Load())
}

// consumeLatency pushes 100-message requests at a pace consumers keep up
// with (one every 10 ms, 10k msg/s) for d while consumers wait on the
// queue, and takes each message's delay from its commit (createdAt) to
// its delivery: the long poll's wake-up, not a backlog.
func consumeLatency(ctx context.Context, c *queengate.Client, queue string, w Workload, d time.Duration, rep *consumeBenchReport) error {
	if _, err := c.Configure(ctx, queengate.ConfigureRequest{Queue: queue}); err != nil {
		return err
	}
	cctx, cancel := context.WithCancel(ctx)
	defer cancel()
	lat := &latencies{}
	var wg sync.WaitGroup
	for p := range w.Partitions {
		wg.Go(func() {
			_ = c.Consume(cctx, queue, "latency", queengate.ConsumeOptions{Consumer: fmt.Sprint("c", p), Max: consumeBatch, Wait: time.Second},
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
func consumeLatencyJetStream(ctx context.Context, t *jetstreamTarget, w Workload, d time.Duration, rep *consumeBenchReport) error {
	cons, err := t.adminJS.CreateOrUpdateConsumer(ctx, jetstreamStream, jetstream.ConsumerConfig{
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
				batch, err := cons.Fetch(consumeBatch, jetstream.FetchMaxWait(time.Second))
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
			f, perr := t.adminJS.PublishAsync(fmt.Sprintf("bench.live.p%d", i%w.Partitions), payload(k, w.PayloadBytes))
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
func pushPaced(ctx context.Context, c *queengate.Client, queue string, w Workload, d, interval time.Duration) error {
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
func pushBesideConsumers(ctx context.Context, c *queengate.Client, queue string, w Workload, d time.Duration, rep *consumeBenchReport, logf func(string, ...any)) error {
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
		_ = c.Consume(cctx, queue+"-beside", "drain", queengate.ConsumeOptions{Consumer: "beside", Max: consumeBatch, Wait: time.Second},
			func(context.Context, queengate.Delivery) error { return nil })
	})
	rate, lat, err = pushFor(ctx, c, queue+"-beside", "beside", w, d)
	rep.PushWithConsumers, rep.PushP99WithConsumers = rate, lat.at(0.99)[0]
	cancel()
	wg.Wait()
	logf("push alone %.0f msg/s, with a consumer beside %.0f msg/s", rep.PushAlone, rep.PushWithConsumers)
	return err
}

func writeConsumeBenchReport(out io.Writer, o options, rep *consumeBenchReport) {
	fmt.Fprintf(out, "## consume: %d messages of %d bytes in %d partitions, batches of %d, one consumer per partition\n\n",
		rep.Messages, rep.PayloadBytes, rep.Partitions, rep.Batch)
	fmt.Fprintln(out, "| round | target | msg/s | elapsed | redelivered | twice |\n|---:|---|---:|---:|---:|---:|")
	for _, r := range rep.Results {
		fmt.Fprintf(out, "| %d | %s | %.0f | %v | %d | %d |\n", r.Round, r.Target, r.Throughput, r.Elapsed.Round(time.Millisecond), r.Redeliveries, r.Duplicates)
	}
	fmt.Fprintf(out, "\nqueengate ÷ JetStream pull consumer with explicit acks, median of %d rounds: %.2f\n", o.rounds, rep.RatioMedian)
	fmt.Fprintf(out, "End to end (stored to delivered, consumers waiting while 10k msg/s arrive): queengate p50 %v, p99 %v; JetStream p50 %v, p99 %v\n",
		rep.LatencyP50.Round(time.Microsecond), rep.LatencyP99.Round(time.Microsecond),
		rep.JetStreamLatencyP50.Round(time.Microsecond), rep.JetStreamLatencyP99.Round(time.Microsecond))
	fmt.Fprintf(out, "Push throughput (8 producers, 100 per request): alone %.0f msg/s (p99 %v), with a consumer beside %.0f msg/s (p99 %v): %.2f×\n",
		rep.PushAlone, rep.PushP99Alone.Round(time.Microsecond), rep.PushWithConsumers, rep.PushP99WithConsumers.Round(time.Microsecond),
		rep.PushWithConsumers/rep.PushAlone)
}
