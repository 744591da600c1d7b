package sidebyside

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"

	queengate "github.com/queengate/queengate"
	"github.com/queengate/queengate/internal/bench"
	"github.com/queengate/queengate/internal/bench/proc"
	"github.com/queengate/queengate/internal/bench/report"
	"github.com/queengate/queengate/internal/bench/target"
)

// Options are what the read and consume scenarios take of queenbench's
// command line.
type Options struct {
	W          bench.Workload
	Rounds     int
	Prefix     string // the gateways' subject prefix
	PGURL      string // empty: a PostgreSQL of its own
	GatewayBin string // empty: built from this repository
	JSONOut    string // the report as JSON: a file, - for stdout, or empty
	// PushTime is how long pushes are measured alone, then beside readers
	// or consumers.
	PushTime time.Duration
	Consume  ConsumeOptions
}

// sideBySide is what the scenarios comparing queengate and JetStream on
// the same messages (read, consume) run on: a queengate started here, a
// client of it, and a JetStream server.
type sideBySide struct {
	env    *proc.Self
	dir    string
	js     *target.JetStream
	nc     *nats.Conn
	client *queengate.Client
}

func startSideBySide(ctx context.Context, o Options, name string, logf func(string, ...any)) (s *sideBySide, err error) {
	s = &sideBySide{}
	defer func() {
		if err != nil {
			s.Close()
		}
	}()
	if s.env, err = proc.StartSelf(ctx, o.W, o.PGURL, o.GatewayBin, o.Prefix, logf); err != nil {
		return nil, err
	}
	if s.dir, err = os.MkdirTemp("", "queenbench-js-"); err != nil {
		return s, err
	}
	if s.js, err = target.NewJetStream(ctx, filepath.Join(s.dir, "store")); err != nil {
		return s, err
	}
	if s.nc, err = nats.Connect(s.env.NATSURL, nats.Name("queenbench-"+name)); err != nil {
		return s, err
	}
	s.client, err = queengate.NewClient(s.nc, queengate.WithPrefix(o.Prefix), queengate.WithTimeout(time.Minute))
	return s, err
}

// Close stops what startSideBySide started, in reverse.
func (s *sideBySide) Close() {
	if s.client != nil {
		s.client.Close()
	}
	if s.nc != nil {
		s.nc.Close()
	}
	if s.js != nil {
		s.js.Close()
	}
	if s.dir != "" {
		os.RemoveAll(s.dir)
	}
	if s.env != nil {
		s.env.Stop()
	}
}

// storedSet is where a side-by-side scenario stores the same messages: a
// queengate queue, and a JetStream stream taking streamSubjects, in which
// the set's subjects are <subjects>.p<partition>.
type storedSet struct {
	queue, stream, streamSubjects, subjects string
}

// fill stores the workload's messages on both sides.
func (s *sideBySide) fill(ctx context.Context, set storedSet, w bench.Workload, logf func(string, ...any)) error {
	logf("storing %d messages of %d bytes in %d partitions, in queengate and in JetStream", w.Total, w.PayloadBytes, w.Partitions)
	if err := fillQueengate(ctx, s.client, set.queue, w); err != nil {
		return fmt.Errorf("fill queengate: %w", err)
	}
	if err := fillJetStream(ctx, s.js, set, w); err != nil {
		return fmt.Errorf("fill jetstream: %w", err)
	}
	return nil
}

// alternate runs queengate's side and JetStream's each round, in
// alternating order so that drift (a filling disk, a warming cache)
// favours neither, and hands each result to done with its round.
func alternate[R any](rounds int, queengateSide, jetstreamSide func(round int) (R, error), done func(round int, r R)) error {
	for round := 1; round <= rounds; round++ {
		sides := []func(int) (R, error){queengateSide, jetstreamSide}
		if round%2 == 0 {
			slices.Reverse(sides)
		}
		for _, side := range sides {
			r, err := side(round)
			if err != nil {
				return err
			}
			done(round, r)
		}
	}
	return nil
}

// medianRatio is the median over rounds of queengate's throughput over
// JetStream's; key gives a result's round, target and throughput.
func medianRatio[R any](rs []R, key func(R) (round int, target string, throughput float64)) float64 {
	by := map[int]map[string]float64{}
	for _, r := range rs {
		round, target, throughput := key(r)
		if by[round] == nil {
			by[round] = map[string]float64{}
		}
		by[round][target] = throughput
	}
	var ratios []float64
	for _, m := range by {
		if m["jetstream"] > 0 {
			ratios = append(ratios, m["queengate"]/m["jetstream"])
		}
	}
	return report.MedianFloat(ratios)
}

// latencies collects durations from several goroutines.
type latencies struct {
	mu sync.Mutex
	d  []time.Duration
}

func (l *latencies) add(d time.Duration) {
	l.mu.Lock()
	l.d = append(l.d, d)
	l.mu.Unlock()
}

// at gives the q-quantiles (0.5 for the median) of what was added.
func (l *latencies) at(qs ...float64) []time.Duration {
	l.mu.Lock()
	defer l.mu.Unlock()
	slices.Sort(l.d)
	out := make([]time.Duration, len(qs))
	for i, q := range qs {
		out[i] = report.Percentile(l.d, q)
	}
	return out
}

// benchBatch is n messages of the workload's size, transactionIds
// <prefix>-0 onwards.
func benchBatch(prefix string, n int, w bench.Workload) []queengate.Message {
	msgs := make([]queengate.Message, n)
	for k := range msgs {
		msgs[k] = queengate.Message{TransactionID: fmt.Sprintf("%s-%d", prefix, k), Data: payload(k, w.PayloadBytes)}
	}
	return msgs
}

// pushFor pushes 100-message requests from 8 producers to queue for d,
// transactionIds starting with prefix, and returns the messages stored
// per second and each request's latency.
func pushFor(ctx context.Context, c *queengate.Client, queue, prefix string, w bench.Workload, d time.Duration) (float64, *latencies, error) {
	var total atomic.Int64
	lat := &latencies{}
	deadline := time.Now().Add(d)
	start := time.Now()
	err := perPartition(8, func(p int) error {
		for i := 0; time.Now().Before(deadline); i++ {
			msgs := benchBatch(fmt.Sprintf("%s-%d-%d", prefix, p, i), 100, w)
			sent := time.Now()
			if _, err := c.Push(ctx, queue, fmt.Sprint("p", p%w.Partitions), msgs...); err != nil {
				return err
			}
			lat.add(time.Since(sent))
			total.Add(int64(len(msgs)))
		}
		return nil
	})
	return float64(total.Load()) / time.Since(start).Seconds(), lat, err
}
