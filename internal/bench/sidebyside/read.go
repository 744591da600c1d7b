package sidebyside

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	queengate "github.com/queengate/queengate"
	"github.com/queengate/queengate/internal/bench"
	"github.com/queengate/queengate/internal/bench/target"
)

// The read scenario stores the same messages in queengate and in a
// JetStream stream, then reads them back, one reader per partition on
// each side (queengate's read API from offset 0; a JetStream ordered
// consumer filtered on the partition's subject), alternating rounds. It
// then measures push latency with and without a reader beside the
// pushes.

// readBenchResult is one round of one side.
type readBenchResult struct {
	Target     string        `json:"target"`
	Round      int           `json:"round"`
	Messages   int64         `json:"messages"`
	Elapsed    time.Duration `json:"elapsedNs"`
	Throughput float64       `json:"throughput"`
}

// ReadReport is the read scenario's outcome.
type ReadReport struct {
	Messages, Partitions, PayloadBytes int
	Results                            []readBenchResult
	RatioMedian                        float64
	PushP99Alone, PushP99WithReader    time.Duration
	PushP50Alone, PushP50WithReader    time.Duration
	// ReadBesidePushes is how many messages a second the reader beside
	// the pushes read.
	ReadBesidePushes float64 `json:",omitempty"`
	// Replication is the PostgreSQL queenbench ran (--replication; ""
	// the single server). With a standby the gateways read from it.
	Replication string `json:",omitempty"`
	// ReadPaths counts the gateways' reads of the read rounds by who
	// served them (queengate_pg_read_pool_reads_total's path: standby,
	// standby_after_wait, primary_standby_behind,
	// primary_standby_failed), and ReadPathsBesidePushes those of the
	// reader beside the pushes; both empty without a read pool.
	ReadPaths             map[string]int64 `json:",omitempty"`
	ReadPathsBesidePushes map[string]int64 `json:",omitempty"`
}

// RunRead runs the read scenario and prints its report on stdout (and as
// JSON where o says).
func RunRead(ctx context.Context, o Options, stdout io.Writer, logf func(string, ...any)) error {
	w := o.W
	s, err := startSideBySide(ctx, o, "read", logf)
	if err != nil {
		return err
	}
	defer s.Close()
	client, js := s.client, s.js
	rep := &ReadReport{Messages: int(w.Total), Partitions: w.Partitions, PayloadBytes: w.PayloadBytes, Replication: w.Replication}
	queue := fmt.Sprintf("read-%x", time.Now().UnixNano()&0xffffff)
	if err := s.fill(ctx, storedSet{queue: queue, stream: target.JetStreamStream, streamSubjects: "bench.>", subjects: "bench.read"}, w, logf); err != nil {
		return err
	}
	err = alternate(o.Rounds,
		func(int) (readBenchResult, error) { return readQueengate(ctx, client, queue, w) },
		func(int) (readBenchResult, error) { return readJetStream(ctx, js, w) },
		func(round int, r readBenchResult) {
			r.Round = round
			logf("round %d: %s read %d messages in %v: %.0f msg/s", round, r.Target, r.Messages, r.Elapsed.Round(time.Millisecond), r.Throughput)
			rep.Results = append(rep.Results, r)
		})
	if err != nil {
		return err
	}
	rep.RatioMedian = medianRatio(rep.Results, func(r readBenchResult) (int, string, float64) { return r.Round, r.Target, r.Throughput })
	// The fill only pushed: every read counted so far is a round's.
	if rep.ReadPaths, err = readPaths(ctx, s.env.AdminAddrs()); err != nil {
		return err
	}
	if err := pushBesideReader(ctx, s, o, queue, rep, logf); err != nil {
		return err
	}
	all, err := readPaths(ctx, s.env.AdminAddrs())
	if err != nil {
		return err
	}
	rep.ReadPathsBesidePushes = subtractPaths(all, rep.ReadPaths)
	writeReadBenchReport(stdout, o, rep)
	if o.JSONOut != "" {
		b, _ := json.MarshalIndent(rep, "", "  ")
		return os.WriteFile(o.JSONOut, append(b, '\n'), 0o644)
	}
	return nil
}

// readPathsMetric is the gateways' counter of the reads meant for the
// read pool, by the path that served them.
const readPathsMetric = `queengate_pg_read_pool_reads_total{path="`

// readPaths adds up, over the gateways at addrs, the reads their read
// pool served by path; empty when they have no read pool.
func readPaths(ctx context.Context, addrs []string) (map[string]int64, error) {
	paths := map[string]int64{}
	for _, addr := range addrs {
		m, err := target.ScrapeMetrics(ctx, addr)
		if err != nil {
			return nil, err
		}
		for name, v := range m {
			if path, ok := strings.CutPrefix(name, readPathsMetric); ok {
				paths[strings.TrimSuffix(path, `"}`)] += int64(v)
			}
		}
	}
	return paths, nil
}

// subtractPaths is what the counters of paths gained since before.
func subtractPaths(paths, before map[string]int64) map[string]int64 {
	out := map[string]int64{}
	for path, n := range paths {
		out[path] = n - before[path]
	}
	return out
}

func payload(n, size int) json.RawMessage {
	s := fmt.Sprintf(`{"n":%d,"pad":"`, n)
	return json.RawMessage(s + strings.Repeat("x", max(size-len(s)-2, 0)) + `"}`)
}

// fillRequest is how many messages the fill sends per request, and puts
// in a partition at a time: 1000, or fewer when there are too many
// partitions for every one to get 1000.
func fillRequest(w bench.Workload) int64 {
	return min(1000, max(1, (w.Total+int64(w.Partitions)-1)/int64(w.Partitions)))
}

// fillQueengate pushes w.Total messages, fillRequest per request, spread
// over the partitions in turn, from 8 producers.
func fillQueengate(ctx context.Context, c *queengate.Client, queue string, w bench.Workload) error {
	n := fillRequest(w)
	var next atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for range 8 {
		wg.Go(func() {
			for {
				start := next.Add(n) - n
				if start >= w.Total {
					return
				}
				msgs := make([]queengate.Message, 0, n)
				for k := start; k < min(start+n, w.Total); k++ {
					msgs = append(msgs, queengate.Message{TransactionID: fmt.Sprint("r-", k), Data: payload(int(k), w.PayloadBytes)})
				}
				partition := fmt.Sprint("p", (start/n)%int64(w.Partitions))
				if _, err := c.Push(ctx, queue, partition, msgs...); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	return <-errs
}

// fillJetStream (re)creates the set's stream and publishes w.Total
// messages to it as fillQueengate pushes them: the same partitions, in
// the same order.
func fillJetStream(ctx context.Context, t *target.JetStream, set storedSet, w bench.Workload) error {
	if err := t.RecreateStream(ctx, set.stream, set.streamSubjects, w); err != nil {
		return err
	}
	js := t.AdminJS
	n := fillRequest(w)
	for start := int64(0); start < w.Total; start += 1000 {
		var acks []jetstream.PubAckFuture
		for k := start; k < min(start+1000, w.Total); k++ {
			subject := fmt.Sprintf("%s.p%d", set.subjects, (k/n)%int64(w.Partitions))
			f, err := js.PublishAsync(subject, payload(int(k), w.PayloadBytes), jetstream.WithMsgID(fmt.Sprint("r-", k)))
			if err != nil {
				return err
			}
			acks = append(acks, f)
		}
		for _, f := range acks {
			select {
			case <-f.Ok():
			case err := <-f.Err():
				return err
			case <-ctx.Done():
				return ctx.Err()
			}
		}
	}
	return nil
}

// readQueengate reads every partition from offset 0 to its end, one
// reader per partition.
func readQueengate(ctx context.Context, c *queengate.Client, queue string, w bench.Workload) (readBenchResult, error) {
	var total atomic.Int64
	start := time.Now()
	err := perPartition(w.Partitions, func(p int) error {
		next := int64(0)
		for {
			ans, err := c.Read(ctx, queue, fmt.Sprint("p", p), queengate.ReadRequest{From: next, Max: queengate.MaxReadMax})
			if err != nil {
				return err
			}
			if len(ans.Messages) == 0 {
				return nil
			}
			total.Add(int64(len(ans.Messages)))
			next = ans.Next
		}
	})
	return result("queengate", total.Load(), time.Since(start), w, err)
}

// readJetStream reads the stream with one ordered consumer per partition
// subject.
func readJetStream(ctx context.Context, t *target.JetStream, w bench.Workload) (readBenchResult, error) {
	var total atomic.Int64
	start := time.Now()
	err := perPartition(w.Partitions, func(p int) error {
		want := partitionShare(w, p)
		cons, err := t.AdminJS.OrderedConsumer(ctx, target.JetStreamStream, jetstream.OrderedConsumerConfig{
			FilterSubjects: []string{fmt.Sprintf("bench.read.p%d", p)}})
		if err != nil {
			return err
		}
		it, err := cons.Messages(jetstream.PullMaxMessages(5000))
		if err != nil {
			return err
		}
		defer it.Stop()
		for n := int64(0); n < want; n++ {
			if _, err := it.Next(); err != nil {
				return err
			}
			total.Add(1)
		}
		return nil
	})
	return result("jetstream", total.Load(), time.Since(start), w, err)
}

// partitionShare is how many messages the fill put in partition p.
func partitionShare(w bench.Workload, p int) int64 {
	n := fillRequest(w)
	var share int64
	for start := int64(0); start < w.Total; start += n {
		if int((start/n)%int64(w.Partitions)) == p {
			share += min(n, w.Total-start)
		}
	}
	return share
}

func perPartition(n int, f func(p int) error) error {
	var wg sync.WaitGroup
	errs := make([]error, n)
	for p := range n {
		wg.Go(func() { errs[p] = f(p) })
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

func result(target string, n int64, took time.Duration, w bench.Workload, err error) (readBenchResult, error) {
	if err == nil && n != w.Total {
		err = fmt.Errorf("%s read %d messages, %d were stored", target, n, w.Total)
	}
	return readBenchResult{Target: target, Messages: n, Elapsed: took, Throughput: float64(n) / took.Seconds()}, err
}

// pushBesideReader measures push latency (8 producers, 100 messages per
// request) for d alone, then for d with a reader (in a process of its own:
// readerRole) reading the stored partitions over and over.
func pushBesideReader(ctx context.Context, s *sideBySide, o Options, queue string, rep *ReadReport, logf func(string, ...any)) error {
	w := o.W
	_, lat, err := pushFor(ctx, s.client, queue+"-push", "push-alone", w, o.PushTime)
	if err != nil {
		return err
	}
	q := lat.at(0.5, 0.99)
	rep.PushP50Alone, rep.PushP99Alone = q[0], q[1]
	reader, err := startReader(ctx, readerTask{NATSURL: s.env.NATSURL, Prefix: o.Prefix, Queue: queue, Partitions: w.Partitions, Total: w.Total})
	if err != nil {
		return err
	}
	_, lat, err = pushFor(ctx, s.client, queue+"-push", "push-beside", w, o.PushTime)
	rate, stopErr := readerRate(reader)
	if err = errors.Join(err, stopErr); err != nil {
		return err
	}
	q = lat.at(0.5, 0.99)
	rep.PushP50WithReader, rep.PushP99WithReader = q[0], q[1]
	rep.ReadBesidePushes = rate
	logf("push latency alone p50 %v p99 %v; with a reader p50 %v p99 %v (the reader at %.0f msg/s)", rep.PushP50Alone, rep.PushP99Alone,
		rep.PushP50WithReader, rep.PushP99WithReader, rate)
	return nil
}

func writeReadBenchReport(out io.Writer, o Options, rep *ReadReport) {
	fmt.Fprintf(out, "## read: %d messages of %d bytes in %d partitions, one reader per partition\n\n", rep.Messages, rep.PayloadBytes, rep.Partitions)
	if rep.Replication != "" {
		fmt.Fprintf(out, "PostgreSQL: --replication %s (a primary with synchronous_commit %s%s)\n\n", rep.Replication, o.W.SynchronousCommit(), standbyNote(rep))
	}
	fmt.Fprintln(out, "| round | target | msg/s | elapsed |\n|---:|---|---:|---:|")
	for _, r := range rep.Results {
		fmt.Fprintf(out, "| %d | %s | %.0f | %v |\n", r.Round, r.Target, r.Throughput, r.Elapsed.Round(time.Millisecond))
	}
	fmt.Fprintf(out, "\nqueengate ÷ JetStream ordered consumers, median of %d rounds: %.2f\n", o.Rounds, rep.RatioMedian)
	fmt.Fprintf(out, "Push latency (8 producers, 100 per request): alone p50 %v, p99 %v; with a reader beside (its own process, %.0f msg/s) p50 %v, p99 %v\n",
		rep.PushP50Alone.Round(time.Microsecond), rep.PushP99Alone.Round(time.Microsecond), rep.ReadBesidePushes,
		rep.PushP50WithReader.Round(time.Microsecond), rep.PushP99WithReader.Round(time.Microsecond))
	if len(rep.ReadPaths) == 0 {
		fmt.Fprintln(out, "Reads served by the primary: the gateways have no --pg-read-url")
		return
	}
	fmt.Fprintf(out, "Reads by who served them (queengate_pg_read_pool_reads_total): read rounds %s; reader beside the pushes %s\n",
		formatPaths(rep.ReadPaths), formatPaths(rep.ReadPathsBesidePushes))
}

// standbyNote says where the gateways read, for the report's header.
func standbyNote(rep *ReadReport) string {
	if rep.Replication == bench.ReplicationNone {
		return ", no standby: reads on the primary"
	}
	return " and a standby on this machine; the gateways read from it with --pg-read-url, target_session_attrs=standby"
}

// formatPaths lists the read paths in the order of the fallbacks.
func formatPaths(paths map[string]int64) string {
	var parts []string
	for _, path := range []string{"standby", "standby_after_wait", "primary_standby_behind", "primary_standby_failed"} {
		parts = append(parts, fmt.Sprintf("%s %d", path, paths[path]))
	}
	return strings.Join(parts, ", ")
}
