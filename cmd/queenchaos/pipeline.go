package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/nats-io/nats.go"

	queengate "github.com/queengate/queengate"
	"github.com/queengate/queengate/internal/chaos/world"
)

// The pipeline scenario checks ack-and-push (docs/protocol.md, "Ack and
// push") under kill -9: consumer processes pop from an input queue,
// derive one message per input (transactionId "out-" + the input's) and
// ack-and-push it to an output queue, while the scenario kills them with
// SIGKILL at random moments (and they kill themselves at chosen points:
// after a pop, and right after sending an ack-and-push whose answer they
// never read; others send it again, as after a lost answer, or stall
// past their lease), and kills gateways too. At the end every input must be
// completed and every derived message be in the output queue exactly
// once, with its data.

// pipelineProfile sizes a pipeline run.
type pipelineProfile struct {
	Messages     int     // input messages
	Partitions   int     // of the input queue (the output has the same)
	Workers      int     // consumer processes running at once
	WorkerKills  int     // SIGKILLs the scenario sends to workers
	GatewayKills int     // SIGKILLs it sends to gateways (each restarted)
	CrashShare   float64 // share of a worker's batches at which it kills itself
	Batch        int     // messages a worker pops at once
	Seed         uint64
	Deadline     time.Duration // for the whole run after the input is pushed
}

var pipelineProfiles = map[string]pipelineProfile{
	"short": {Messages: 3000, Partitions: 4, Workers: 3, WorkerKills: 6, GatewayKills: 1, CrashShare: 0.05,
		Batch: 20, Seed: 1, Deadline: 4 * time.Minute},
	"long": {Messages: 100_000, Partitions: 8, Workers: 4, WorkerKills: 60, GatewayKills: 4, CrashShare: 0.02,
		Batch: 100, Seed: 1, Deadline: 30 * time.Minute},
}

// Environment of a worker process (the queenchaos binary, or the test
// binary, started again).
const (
	workerEnv      = "QUEENCHAOS_PIPELINE_WORKER" // the worker's name
	workerNATS     = "QUEENCHAOS_PIPELINE_NATS"
	workerSeed     = "QUEENCHAOS_PIPELINE_SEED"
	workerCrash    = "QUEENCHAOS_PIPELINE_CRASH"
	workerBatch    = "QUEENCHAOS_PIPELINE_BATCH"
	pipelineIn     = "pipeline-in"
	pipelineOut    = "pipeline-out"
	pipelineGroup  = "pipeline"
	pipelineLease  = 3000 // ms: a killed worker's partitions come back this soon
	workerRequests = 5 * time.Second
)

// pipelineOutcome is what a run did and what the verifier found.
type pipelineOutcome struct {
	Profile      pipelineProfile
	Elapsed      time.Duration
	WorkerKills  int // sent by the scenario
	WorkerDeaths int // workers that died, by the scenario's kills or their own
	GatewayKills int
	// What workers were answered: ack-and-pushes answered duplicate (done
	// before), refused (409: the lease ran out), retried (no answer).
	Redone, Refused, Retried int
	// Verifier: input messages not completed by the group; derived
	// messages missing, stored more than once, with other data or in
	// another partition than their input's; messages in the output that
	// no input derives.
	Uncompleted, Missing, Doubled, WrongData, WrongPartition, Phantom int
	Examples                                                          []string
}

// Violations counts what breaks exactly once.
func (o pipelineOutcome) Violations() int {
	return o.Uncompleted + o.Missing + o.Doubled + o.WrongData + o.WrongPartition + o.Phantom
}

func (o pipelineOutcome) markdown() string {
	return fmt.Sprintf("## queenchaos pipeline (%v)\n\n%d input messages in %d partitions, %d workers; %d worker kills sent, %d worker deaths "+
		"(kills and self-kills after a pop or an unanswered ack-and-push), %d gateway kills. Ack-and-pushes answered duplicate (redone) %d, "+
		"refused %d, retried after no answer %d.\n\n"+
		"Verifier: uncompleted inputs %d, derived messages missing %d, doubled %d, wrong data %d, wrong partition %d, phantom %d.\n",
		o.Elapsed.Round(time.Second), o.Profile.Messages, o.Profile.Partitions, o.Profile.Workers, o.WorkerKills, o.WorkerDeaths,
		o.GatewayKills, o.Redone, o.Refused, o.Retried, o.Uncompleted, o.Missing, o.Doubled, o.WrongData, o.WrongPartition, o.Phantom)
}

// runPipelineCommand is `queenchaos pipeline`.
func runPipelineCommand(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("queenchaos pipeline", flag.ContinueOnError)
	fs.SetOutput(stderr)
	name := fs.String("profile", "long", "short (3k messages) or long (100k)")
	messages := fs.Int("messages", 0, "input messages (default: the profile's)")
	bin := fs.String("gateway-bin", "", "queengate binary (default: build it from this repository)")
	mdOut := fs.String("markdown", "", "write the report as Markdown to this file")
	if err := fs.Parse(args); err != nil {
		return err
	}
	p, ok := pipelineProfiles[*name]
	if !ok {
		return fmt.Errorf("--profile %q: short or long", *name)
	}
	if *messages > 0 {
		p.Messages = *messages
	}
	log := func(format string, args ...any) {
		fmt.Fprintf(stderr, "%s queenchaos pipeline: %s\n", time.Now().Format("15:04:05.000"), fmt.Sprintf(format, args...))
	}
	dir, err := os.MkdirTemp("", "queenchaos-pipeline-")
	if err != nil {
		return err
	}
	if *bin == "" {
		*bin = filepath.Join(dir, "queengate")
		if out, err := exec.CommandContext(ctx, "go", "build", "-o", *bin, "github.com/queengate/queengate/cmd/queengate").CombinedOutput(); err != nil {
			return fmt.Errorf("build queengate: %w\n%s", err, out)
		}
	}
	out, err := runPipeline(ctx, p, dir, *bin, log)
	if err != nil {
		return fmt.Errorf("%w (data and logs kept in %s)", err, dir)
	}
	md := out.markdown()
	fmt.Fprint(stdout, md)
	if *mdOut != "" {
		if err := os.WriteFile(*mdOut, []byte(md), 0o644); err != nil {
			return err
		}
	}
	if n := out.Violations(); n > 0 {
		return fmt.Errorf("the verifier found %d violations: %s (data and logs kept in %s)", n, strings.Join(out.Examples, "; "), dir)
	}
	_ = os.RemoveAll(dir)
	return nil
}

// runPipeline runs profile p in dir with gateway binary bin.
func runPipeline(ctx context.Context, p pipelineProfile, dir, bin string, log func(string, ...any)) (pipelineOutcome, error) {
	out := pipelineOutcome{Profile: p}
	w, err := world.Start(ctx, dir, bin, 1, 2, world.Replication{}, log)
	if err != nil {
		return out, err
	}
	defer w.Stop()
	if err := w.CreateQueue(ctx, pipelineIn, 3600, 0); err != nil { // never dead-letter: kills make leases run out
		return out, err
	}
	log("pushing %d input messages", p.Messages)
	if err := pushInputs(ctx, w, p); err != nil {
		return out, err
	}
	start := time.Now()
	runCtx, cancel := context.WithTimeout(ctx, p.Deadline)
	defer cancel()
	ws, err := startWorkers(w, p)
	if err != nil {
		return out, err
	}
	defer ws.stop()
	rng := rand.New(rand.NewPCG(p.Seed, 7))
	gatewayEvery := max(1, p.WorkerKills/max(1, p.GatewayKills))
	for {
		done, ok := completed(runCtx, w)
		switch {
		case runCtx.Err() != nil:
			return out, fmt.Errorf("the pipeline did not finish within %v: %d of %d inputs completed", p.Deadline, done, p.Messages)
		case ok && done == int64(p.Messages):
		case out.WorkerKills < p.WorkerKills && done >= int64((out.WorkerKills+1)*p.Messages/(p.WorkerKills+1)):
			// Kills spread over the run whatever its pace, each at a
			// random moment of a worker's cycle.
			world.Sleep(runCtx, time.Duration(rng.Int64N(int64(100*time.Millisecond))))
			ws.kill(rng.IntN(p.Workers))
			out.WorkerKills++
			if out.WorkerKills%gatewayEvery == 0 && out.GatewayKills < p.GatewayKills {
				g := w.Gateways()[out.GatewayKills%len(w.Gateways())]
				if err := g.RestartAfter(runCtx, syscall.SIGKILL, 200*time.Millisecond); err != nil {
					return out, fmt.Errorf("restart gateway %d: %w", g.Index(), err)
				}
				out.GatewayKills++
			}
			continue
		default:
			world.Sleep(runCtx, 20*time.Millisecond)
			continue
		}
		break
	}
	out.Elapsed = time.Since(start)
	out.WorkerDeaths = ws.deaths()
	ws.stop()
	n := countWorkerLines(dir, lineRedone, lineRefused, lineRetried)
	out.Redone, out.Refused, out.Retried = n[0], n[1], n[2]
	log("every input completed in %v; verifying", out.Elapsed.Round(time.Second))
	return out, verifyPipeline(ctx, w, p, &out)
}

// pushInputs pushes the input messages "in-<i>", partition "p<i mod
// partitions>", retrying until each is answered stored.
func pushInputs(ctx context.Context, w *world.World, p pipelineProfile) error {
	nc, err := nats.Connect(w.NATSURLs())
	if err != nil {
		return err
	}
	defer nc.Close()
	c, err := queengate.NewClient(nc, queengate.WithTimeout(10*time.Second))
	if err != nil {
		return err
	}
	for part := range p.Partitions {
		var batch []queengate.Message
		flush := func() error {
			for attempt := 0; len(batch) > 0; attempt++ {
				answers, err := c.Push(ctx, pipelineIn, "p"+strconv.Itoa(part), batch...)
				if err == nil && !anyFailed(answers) {
					batch = batch[:0]
					return nil
				}
				if attempt == 20 {
					return fmt.Errorf("push of the inputs: %v", err)
				}
				world.Sleep(ctx, 500*time.Millisecond)
			}
			return nil
		}
		for i := part; i < p.Messages; i += p.Partitions {
			id := "in-" + strconv.Itoa(i)
			batch = append(batch, queengate.Message{TransactionID: id, Data: json.RawMessage(`{"n":` + strconv.Itoa(i) + `}`)})
			if len(batch) == 500 {
				if err := flush(); err != nil {
					return err
				}
			}
		}
		if err := flush(); err != nil {
			return err
		}
	}
	return nil
}

func anyFailed(answers []queengate.Result) bool {
	for _, a := range answers {
		if a.Status == queengate.StatusFailed {
			return true
		}
	}
	return false
}

// completed is how many input messages the group has completed (ok
// false while PostgreSQL cannot be asked).
func completed(ctx context.Context, w *world.World) (n int64, ok bool) {
	conn, err := pgx.Connect(ctx, w.PGURL())
	if err != nil {
		return 0, false
	}
	defer conn.Close(ctx)
	err = conn.QueryRow(ctx, `
		SELECT coalesce(sum(c.next_offset), 0)
		  FROM queen.consumer_cursors c JOIN queen.consumer_groups g ON g.id = c.group_id JOIN queen.queues q ON q.id = g.queue_id
		 WHERE q.name = $1 AND g.name = $2`, pipelineIn, pipelineGroup).Scan(&n)
	return n, err == nil
}

// verifyPipeline reads the output queue back: each input's derived
// message once, with its data, in its input's partition, and nothing
// else; and every input completed (each input partition's cursor past
// its last message, no marks left).
func verifyPipeline(ctx context.Context, w *world.World, p pipelineProfile, out *pipelineOutcome) error {
	conn, err := pgx.Connect(ctx, w.PGURL())
	if err != nil {
		return err
	}
	defer conn.Close(ctx)
	if err := conn.QueryRow(ctx, `
		SELECT count(*) FROM queen.log_partitions p JOIN queen.queues q ON q.id = p.queue_id
		  JOIN queen.consumer_groups g ON g.queue_id = q.id AND g.name = $2
		  JOIN queen.consumer_cursors c ON c.group_id = g.id AND c.partition_id = p.id
		 WHERE q.name = $1 AND (c.next_offset <> p.last_offset + 1
		       OR EXISTS (SELECT 1 FROM queen.consumer_marks m WHERE m.group_id = g.id AND m.partition_id = p.id))`,
		pipelineIn, pipelineGroup).Scan(&out.Uncompleted); err != nil {
		return err
	}
	rows, err := conn.Query(ctx, `
		SELECT p.name, m.txn_id, m.data::text
		  FROM queen.log_segments s JOIN queen.log_partitions p ON p.id = s.partition_id JOIN queen.queues q ON q.id = p.queue_id
		 CROSS JOIN LATERAL unnest(s.txn_ids, s.data) AS m(txn_id, data)
		 WHERE q.name = $1`, pipelineOut)
	if err != nil {
		return err
	}
	seen := make([]int, p.Messages)
	var partition, id, data string
	_, err = pgx.ForEachRow(rows, []any{&partition, &id, &data}, func() error {
		i, err := strconv.Atoi(strings.TrimPrefix(id, "out-in-"))
		if err != nil || i < 0 || i >= p.Messages || !strings.HasPrefix(id, "out-in-") {
			out.Phantom++
			out.example("phantom " + id)
			return nil
		}
		seen[i]++
		if data != derivedData(i) {
			out.WrongData++
			out.example(fmt.Sprintf("%s has data %.80s", id, data))
		}
		if partition != "p"+strconv.Itoa(i%p.Partitions) {
			out.WrongPartition++
			out.example(fmt.Sprintf("%s in partition %s", id, partition))
		}
		return nil
	})
	for i, n := range seen {
		switch {
		case n == 0:
			out.Missing++
			out.example(fmt.Sprintf("out-in-%d missing", i))
		case n > 1:
			out.Doubled++
			out.example(fmt.Sprintf("out-in-%d stored %d times", i, n))
		}
	}
	return err
}

func (o *pipelineOutcome) example(s string) {
	if len(o.Examples) < 10 {
		o.Examples = append(o.Examples, s)
	}
}

// derivedData is the data a worker derives from input i.
func derivedData(i int) string { return `{"from":"in-` + strconv.Itoa(i) + `"}` }

// workers are the consumer processes, each restarted when it dies.
type workers struct {
	mu      sync.Mutex
	procs   []*exec.Cmd
	died    int
	stopped bool
	w       *world.World
	seed    uint64
	crash   float64
	batch   int
	wg      sync.WaitGroup
}

func startWorkers(w *world.World, p pipelineProfile) (*workers, error) {
	ws := &workers{w: w, seed: p.Seed, crash: p.CrashShare, batch: p.Batch, procs: make([]*exec.Cmd, p.Workers)}
	for i := range p.Workers {
		if err := ws.start(i); err != nil {
			ws.stop()
			return nil, err
		}
	}
	return ws, nil
}

// start runs worker i, and starts it again whenever it dies until stop.
func (ws *workers) start(i int) error {
	self, err := os.Executable()
	if err != nil {
		return err
	}
	logFile, err := os.OpenFile(filepath.Join(ws.w.Dir(), fmt.Sprintf("worker-%d.log", i)), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	ws.mu.Lock()
	ws.seed++
	cmd := exec.Command(self)
	cmd.Env = append(os.Environ(), workerEnv+"=worker-"+strconv.Itoa(i), workerNATS+"="+ws.w.NATSURLs(),
		workerSeed+"="+strconv.FormatUint(ws.seed, 10), workerCrash+"="+strconv.FormatFloat(ws.crash, 'f', -1, 64),
		workerBatch+"="+strconv.Itoa(ws.batch), "GOMAXPROCS=1")
	ws.mu.Unlock()
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		logFile.Close()
		return err
	}
	ws.mu.Lock()
	ws.procs[i] = cmd
	ws.mu.Unlock()
	ws.wg.Add(1)
	go func() {
		defer ws.wg.Done()
		_ = cmd.Wait()
		logFile.Close()
		ws.mu.Lock()
		ws.died++
		stopped := ws.stopped
		ws.mu.Unlock()
		if !stopped {
			_ = ws.start(i) // a failed restart leaves the others to finish
		}
	}()
	return nil
}

// kill sends SIGKILL to worker i; it is started again.
func (ws *workers) kill(i int) {
	ws.mu.Lock()
	defer ws.mu.Unlock()
	if cmd := ws.procs[i]; cmd != nil && cmd.Process != nil {
		_ = cmd.Process.Kill()
	}
}

func (ws *workers) deaths() int {
	ws.mu.Lock()
	defer ws.mu.Unlock()
	return ws.died
}

// stop ends every worker and waits for them.
func (ws *workers) stop() {
	ws.mu.Lock()
	ws.stopped = true
	for _, cmd := range ws.procs {
		if cmd != nil && cmd.Process != nil {
			_ = cmd.Process.Kill()
		}
	}
	ws.mu.Unlock()
	ws.wg.Wait()
}

// isPipelineWorker says whether this process was started as a worker.
func isPipelineWorker() bool { return os.Getenv(workerEnv) != "" }

// pipelineWorkerMain is a worker process: pop, derive, ack-and-push,
// until killed.
func pipelineWorkerMain() int {
	name := os.Getenv(workerEnv)
	seed, _ := strconv.ParseUint(os.Getenv(workerSeed), 10, 64)
	crash, _ := strconv.ParseFloat(os.Getenv(workerCrash), 64)
	batch, _ := strconv.Atoi(os.Getenv(workerBatch))
	nc, err := nats.Connect(os.Getenv(workerNATS), nats.MaxReconnects(-1), nats.ReconnectWait(100*time.Millisecond))
	if err != nil {
		fmt.Fprintln(os.Stderr, name, err)
		return 1
	}
	c, err := queengate.NewClient(nc, queengate.WithTimeout(workerRequests))
	if err != nil {
		fmt.Fprintln(os.Stderr, name, err)
		return 1
	}
	wk := worker{name: name, nc: nc, c: c, rng: rand.New(rand.NewPCG(seed, 11)), crash: crash, batch: max(1, batch)}
	for {
		wk.step(context.Background())
	}
}

type worker struct {
	name  string
	nc    *nats.Conn
	c     *queengate.Client
	rng   *rand.Rand
	crash float64
	batch int
}

// step pops a batch and ack-and-pushes its derived messages, retrying
// the same request after a lost answer (a retry answers alreadyAcked and
// duplicate). At chosen points it kills itself.
func (wk *worker) step(ctx context.Context) {
	a, err := wk.c.Pop(ctx, pipelineIn, "", queengate.PopRequest{Group: pipelineGroup, Consumer: wk.name, Max: wk.batch,
		LeaseMs: pipelineLease, WaitMs: 1000})
	if err != nil || len(a.Messages) == 0 {
		if err != nil {
			time.Sleep(100 * time.Millisecond) // a gateway restarting: ask again soon
		}
		return
	}
	wk.maybeDie() // leased, nothing settled
	req := queengate.AckPushRequest{Group: pipelineGroup, LeaseID: a.LeaseID}
	for _, m := range a.Messages {
		off := m.Offset
		i, _ := strconv.Atoi(strings.TrimPrefix(m.TransactionID, "in-"))
		req.Items = append(req.Items, queengate.AckItem{Offset: &off, Status: queengate.AckCompleted})
		req.Push = append(req.Push, queengate.DerivedMessage{Queue: pipelineOut, Partition: a.Partition,
			TransactionID: "out-" + m.TransactionID, Data: json.RawMessage(derivedData(i))})
	}
	if wk.rng.Float64() < wk.crash {
		// A slow consumer: its lease runs out, another takes the batch
		// over, and this one's ack-and-push is refused, or answered
		// duplicate when the other finished first.
		time.Sleep(pipelineLease * time.Millisecond * 3 / 2)
	}
	if wk.rng.Float64() < 2*wk.crash {
		// Sent, and the answer lost: the request is sent again (below, as
		// after a timeout), or the consumer dies (its work is done).
		body, _ := req.AppendJSON(nil)
		_ = wk.nc.Publish(queengate.Subjects{Prefix: queengate.DefaultPrefix}.ConsumeAckPush(pipelineIn, a.Partition), body)
		_ = wk.nc.Flush()
		if wk.rng.IntN(2) == 0 {
			die()
		}
	}
	for attempt := 0; attempt < 5; attempt++ {
		ans, err := wk.c.AckAndPush(ctx, pipelineIn, a.Partition, req)
		var werr *queengate.Error
		switch {
		case err == nil:
			if slices.ContainsFunc(ans.Pushed, func(p queengate.PushedMessage) bool { return p.Status == queengate.StatusDuplicate }) {
				fmt.Fprintln(os.Stderr, lineRedone) // done before: a retry, or a lease taken over
			}
			return
		case errors.As(err, &werr) && werr.Code < 500:
			fmt.Fprintln(os.Stderr, lineRefused, werr.Text) // the lease ran out: the next pop redoes it
			return
		}
		fmt.Fprintln(os.Stderr, lineRetried, err)
	}
}

// What workers write to their logs, counted in the report.
const (
	lineRedone  = "ack-and-push answered duplicate"
	lineRefused = "ack-and-push refused:"
	lineRetried = "ack-and-push retried after:"
)

// countWorkerLines counts, in the workers' logs of dir, the lines that
// start with each of prefixes.
func countWorkerLines(dir string, prefixes ...string) []int {
	counts := make([]int, len(prefixes))
	logs, _ := filepath.Glob(filepath.Join(dir, "worker-*.log"))
	for _, l := range logs {
		b, err := os.ReadFile(l)
		if err != nil {
			continue
		}
		for _, line := range strings.Split(string(b), "\n") {
			for i, p := range prefixes {
				if strings.HasPrefix(line, p) {
					counts[i]++
				}
			}
		}
	}
	return counts
}

// maybeDie kills the process with a share of crash.
func (wk *worker) maybeDie() {
	if wk.rng.Float64() < wk.crash {
		die()
	}
}

func die() { _ = syscall.Kill(os.Getpid(), syscall.SIGKILL) }
