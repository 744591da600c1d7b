package main

import (
	"bytes"
	"encoding/json"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/queengate/queengate/internal/bench"
	"github.com/queengate/queengate/internal/bench/proc"
	"github.com/queengate/queengate/internal/bench/report"
	"github.com/queengate/queengate/internal/bench/sidebyside"
	"github.com/queengate/queengate/internal/gatewaybin"
	"github.com/queengate/queengate/internal/pgtest"
	"github.com/queengate/queengate/model"
)

// init lets the test binary play the nats-server role: proc.StartNATSServer
// re-executes the running binary, which under go test is this one. init runs
// before TestMain, so the child never starts the tests.
func init() {
	proc.PlayRole()
}

func TestMain(m *testing.M) { pgtest.Run(m, removeGatewayBuild) }

// gatewayBuild is the queengate binary the --self tests share: built
// once per test process instead of once per test (each build links it,
// and on an empty build cache parallel tests would each compile it).
var gatewayBuild struct {
	once sync.Once
	dir  string
	bin  string
	err  error
}

// gatewayBinary builds queengate from this tree on first use, so that
// running only the unit tests does not build it, and returns its path.
func gatewayBinary(t *testing.T) string {
	t.Helper()
	gatewayBuild.once.Do(func() {
		// Not t.TempDir: the binary outlives the test that built it.
		dir, err := os.MkdirTemp("", "queenbench-test-")
		if err != nil {
			gatewayBuild.err = err
			return
		}
		gatewayBuild.dir = dir
		gatewayBuild.bin, gatewayBuild.err = gatewaybin.Build(dir)
	})
	if gatewayBuild.err != nil {
		t.Fatal(gatewayBuild.err)
	}
	return gatewayBuild.bin
}

func removeGatewayBuild() {
	if gatewayBuild.dir != "" {
		_ = os.RemoveAll(gatewayBuild.dir)
	}
}

func TestExactnessVerdict(t *testing.T) {
	t.Parallel()
	b1 := &bench.Batch{Queue: "q", Partition: "p1", IDs: []string{"a", "b", "a"}}
	b2 := &bench.Batch{Queue: "q", Partition: "p2", IDs: []string{"a"}}
	cases := []struct {
		name                 string
		s1, s2               []model.Status
		distinct, violations int64
	}{
		{"exact", []model.Status{model.StatusQueued, model.StatusQueued, model.StatusDuplicate}, []model.Status{model.StatusQueued}, 3, 0},
		{"queued twice", []model.Status{model.StatusQueued, model.StatusQueued, model.StatusQueued}, []model.Status{model.StatusQueued}, 3, 1},
		{"duplicate of nothing", []model.Status{model.StatusDuplicate, model.StatusQueued, model.StatusDuplicate}, []model.Status{model.StatusQueued}, 3, 1},
		{"failed is not counted", []model.Status{model.StatusFailed, model.StatusQueued, model.StatusQueued}, []model.Status{model.StatusFailed}, 2, 0},
	}
	for _, c := range cases {
		e1, e2 := newExactness(), newExactness()
		e1.record(b1, c.s1)
		e2.record(b2, c.s2)
		e1.merge(e2)
		if d, v := e1.verdict(); d != c.distinct || v != c.violations {
			t.Errorf("%s: distinct %d violations %d, want %d and %d", c.name, d, v, c.distinct, c.violations)
		}
	}
}

func TestOptionsValidation(t *testing.T) {
	t.Parallel()
	cases := []struct {
		args []string
		want string // "" means valid
	}{
		{[]string{"--self"}, ""},
		{[]string{"--self", "--scenario", "wide", "--compare", "all"}, ""},
		{[]string{"--self", "--scenario", "nope"}, "--scenario \"nope\""},
		{[]string{"--self", "--target", "kafka"}, "target \"kafka\""},
		{[]string{"--self", "--compare", "naive,queengate"}, "queengate first"},
		{[]string{"--self", "--batch", "0"}, "--batch 0"},
		{[]string{"--self", "--batch", "1001"}, "--batch 1001"},
		{[]string{"--self", "--retries", "1.5"}, "shares between 0 and 1"},
		{[]string{"--self", "--duration", "10s", "--messages", "5"}, "exactly one of --messages"},
		{[]string{"--self", "--window", "-2"}, "--window -2"},
		{[]string{}, "give --self, or --nats-url"},
		{[]string{"--nats-url", "nats://127.0.0.1:1", "--target", "naive"}, "give --pg-url"},
		{[]string{"--self", "--compare", "all", "--fire-and-forget"}, "--fire-and-forget applies"},
		{[]string{"--self", "stray"}, "unexpected arguments"},
		{[]string{"--self", "--scenario", "sessions1m", "--compare", "queengate,jetstream"}, ""},
		{[]string{"--self", "--batch", "10", "--batch-min", "11"}, "--batch-min 11"},
		{[]string{"--self", "--scenario", "sessions1m", "--batch", "5"}, ""},
		{[]string{"--self", "--scenario", "sessions1m", "--batch", "1", "--batch-min", "2"}, "--batch-min 2"},
		{[]string{"--self", "--cache-mb", "-1"}, "--cache-mb -1"},
		{[]string{"--self", "--scenario", "consume", "--consume-pop-partitions", "0"}, "--consume-pop-partitions 0: 1 to 100"},
		{[]string{"--self", "--scenario", "consume", "--consume-pop-partitions", "101"}, "--consume-pop-partitions 101: 1 to 100"},
		{[]string{"--self", "--scenario", "consume", "--consume-pop-partitions", "1"}, ""},
	}
	for _, c := range cases {
		_, err := parseOptions(c.args, &bytes.Buffer{})
		switch {
		case c.want == "" && err != nil:
			t.Errorf("%v: %v", c.args, err)
		case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
			t.Errorf("%v: err %v, want it to mention %q", c.args, err, c.want)
		case c.want != "" && exitCode(err) != 2:
			t.Errorf("%v: exit code %d, want 2", c.args, exitCode(err))
		}
	}
	for _, help := range []string{"--help", "-h"} {
		var out bytes.Buffer
		if _, err := parseOptions([]string{help}, &out); exitCode(err) != 0 || !strings.Contains(out.String(), "queenbench measures") {
			t.Errorf("%s: exit code %d (%v), usage %q; want 0 and the usage", help, exitCode(err), err, out.String())
		}
	}
	o, err := parseOptions([]string{"--self", "--scenario", "retries", "--partitions", "7"}, &bytes.Buffer{})
	if err != nil {
		t.Fatal(err)
	}
	if o.w.Partitions != 7 || o.w.RetryShare != 0.2 || o.w.Producers != 64 {
		t.Errorf("explicit flags must override the preset and keep the rest: %+v", o.w)
	}
	o, err = parseOptions([]string{"--self", "--timeout", "3s", "--retry-failed"}, &bytes.Buffer{})
	if err != nil {
		t.Fatal(err)
	}
	if o.w.AttemptTimeout() != 3*time.Second || !o.w.RetryFailed {
		t.Errorf("--timeout 3s --retry-failed: timeout %v, retry %v", o.w.AttemptTimeout(), o.w.RetryFailed)
	}
}

// TestReplicationOption: --replication takes a known mode, only for a
// PostgreSQL queenbench starts and a scenario whose report says it (read,
// which reads from the standby; not consume), and reaches the workload;
// without it the workload names none.
func TestReplicationOption(t *testing.T) {
	t.Parallel()
	cases := []struct {
		args []string
		want string // "" means valid
	}{
		{[]string{"--self", "--pg-url", "", "--replication", "none"}, ""},
		{[]string{"--self", "--pg-url", "", "--replication", "async", "--scenario", "sessions"}, ""},
		{[]string{"--self", "--pg-url", "", "--replication", "sync", "--compare", "queengate,naive"}, ""},
		{[]string{"--self", "--pg-url", "", "--replication", "remote_apply"}, ""},
		{[]string{"--self", "--pg-url", "", "--replication", "quorum"}, `--replication "quorum": one of none, async, sync, remote_apply`},
		{[]string{"--self", "--pg-url", "postgres://127.0.0.1/x", "--replication", "sync"}, "without --pg-url"},
		{[]string{"--nats-url", "nats://127.0.0.1:1", "--replication", "async"}, "give --self"},
		{[]string{"--self", "--pg-url", "", "--replication", "async", "--scenario", "read"}, ""},
		{[]string{"--self", "--pg-url", "", "--replication", "sync", "--scenario", "read"}, ""},
		{[]string{"--self", "--pg-url", "", "--replication", "sync", "--scenario", "consume"}, "not with --scenario consume"},
	}
	for _, c := range cases {
		o, err := parseOptions(c.args, &bytes.Buffer{})
		switch {
		case c.want == "" && err != nil:
			t.Errorf("%v: %v", c.args, err)
		case c.want == "" && o.w.Replication != c.args[4]:
			t.Errorf("%v: workload replication %q, want %q", c.args, o.w.Replication, c.args[4])
		case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
			t.Errorf("%v: err %v, want it to mention %q", c.args, err, c.want)
		case c.want != "" && exitCode(err) != 2:
			t.Errorf("%v: exit code %d, want 2", c.args, exitCode(err))
		}
	}
	o, err := parseOptions([]string{"--self", "--pg-url", ""}, &bytes.Buffer{})
	if err != nil || o.w.Replication != "" || o.w.SynchronousCommit() != "" {
		t.Errorf("no --replication: err %v, replication %q, synchronous_commit %q; want the single server", err,
			o.w.Replication, o.w.SynchronousCommit())
	}
}

// TestSmokeAllTargets is the short end-to-end run CI makes: a few
// thousand messages with retries through every target, and not one
// exactness violation.
func TestSmokeAllTargets(t *testing.T) {
	t.Parallel()
	// This run builds the gateway itself, as queenbench --self does without
	// --gateway-bin; after the shared build its own only links.
	gatewayBinary(t)
	out := filepath.Join(t.TempDir(), "report.json")
	var stdout, stderr bytes.Buffer
	err := run([]string{"--self", "--pg-url", pgtest.NewDB(t), "--scenario", "retries", "--compare", "all",
		"--rounds", "1", "--messages", "4000", "--producers", "8", "--batch", "50", "--partitions", "10",
		"--quiet", "--json", out}, &stdout, &stderr)
	if err != nil {
		t.Fatalf("queenbench: %v\nstdout:\n%s\nstderr:\n%s", err, stdout.String(), stderr.String())
	}
	r := readReport(t, out)
	if len(r.Results) != 4 {
		t.Fatalf("%d results, want one per target", len(r.Results))
	}
	for _, res := range r.Results {
		if res.Messages != 4000 || res.Failed != 0 {
			t.Errorf("%s: %d messages answered, %d failed", res.Target, res.Messages, res.Failed)
		}
		if !exactTargets[res.Target] {
			continue
		}
		if res.Violations != 0 || res.Queued != res.DistinctIDs {
			t.Errorf("%s: %d violations, %d queued for %d distinct ids", res.Target, res.Violations, res.Queued, res.DistinctIDs)
		}
		if res.Duplicate == 0 {
			t.Errorf("%s: no duplicates answered in a run with 20%% retries", res.Target)
		}
	}
	if len(r.Ratios) != 3 {
		t.Errorf("ratios %+v, want one per peer", r.Ratios)
	}
	if !strings.Contains(stdout.String(), "queengate") {
		t.Errorf("no table on stdout:\n%s", stdout.String())
	}
}

// TestWindow0TargetDisablesDeduplication: the window0 target is the same
// gateway with the window at 0, so repeats are stored again, and the
// report carries queengate ÷ window0.
func TestWindow0TargetDisablesDeduplication(t *testing.T) {
	t.Parallel()
	out := filepath.Join(t.TempDir(), "report.json")
	var stdout, stderr bytes.Buffer
	err := run([]string{"--self", "--gateway-bin", gatewayBinary(t), "--pg-url", pgtest.NewDB(t), "--scenario", "retries", "--compare", "queengate,window0",
		"--rounds", "1", "--messages", "3000", "--producers", "4", "--batch", "50", "--partitions", "5",
		"--quiet", "--json", out}, &stdout, &stderr)
	if err != nil {
		t.Fatalf("queenbench: %v\nstderr:\n%s", err, stderr.String())
	}
	r := readReport(t, out)
	byTarget := map[string]bench.Result{}
	for _, res := range r.Results {
		byTarget[res.Target] = res
	}
	if qg := byTarget["queengate"]; qg.Duplicate == 0 || qg.Violations != 0 {
		t.Errorf("queengate: %d duplicates, %d violations; want some duplicates and no violation", qg.Duplicate, qg.Violations)
	}
	if w0 := byTarget[window0]; w0.Messages != 3000 || w0.Queued != 3000 || w0.Duplicate != 0 {
		t.Errorf("window0: %d answered, %d queued, %d duplicate; want every message queued", w0.Messages, w0.Queued, w0.Duplicate)
	}
	if len(r.Ratios) != 1 || r.Ratios[0].Target != window0 {
		t.Errorf("ratios %+v, want queengate ÷ window0", r.Ratios)
	}
}

// TestPrefillIsNotTheMeasuredRun: the measured messages are new ids, not
// repeats of the prefill's.
func TestPrefillIsNotTheMeasuredRun(t *testing.T) {
	t.Parallel()
	out := filepath.Join(t.TempDir(), "report.json")
	err := run([]string{"--target", "naive", "--pg-url", pgtest.NewDB(t), "--scenario", "unique",
		"--prefill", "600", "--messages", "400", "--producers", "2", "--batch", "20", "--partitions", "3",
		"--quiet", "--json", out}, &bytes.Buffer{}, &bytes.Buffer{})
	if err != nil {
		t.Fatal(err)
	}
	r := readReport(t, out)
	if res := r.Results[0]; res.Queued != 400 || res.Duplicate != 0 || res.DistinctIDs != 1000 || res.Violations != 0 {
		t.Errorf("queued %d, duplicate %d, distinct %d (prefill included), violations %d; want 400, 0, 1000, 0",
			res.Queued, res.Duplicate, res.DistinctIDs, res.Violations)
	}
}

// TestFireAndForgetMatchesAcksToRequests drives queengate without reply
// subjects: every answer must come back on the ack subjects and be matched
// to its request, retries included.
func TestFireAndForgetMatchesAcksToRequests(t *testing.T) {
	t.Parallel()
	out := filepath.Join(t.TempDir(), "report.json")
	var stderr bytes.Buffer
	err := run([]string{"--self", "--gateway-bin", gatewayBinary(t), "--pg-url", pgtest.NewDB(t), "--scenario", "retries", "--fire-and-forget",
		"--messages", "3000", "--producers", "6", "--batch", "30", "--partitions", "4",
		"--quiet", "--json", out}, &bytes.Buffer{}, &stderr)
	if err != nil {
		t.Fatalf("queenbench: %v\n%s", err, stderr.String())
	}
	r := readReport(t, out)
	res := r.Results[0]
	if res.Messages != 3000 || res.Failed != 0 || res.Violations != 0 || res.Duplicate == 0 || res.Queued != res.DistinctIDs {
		t.Errorf("fire-and-forget run: %+v", res)
	}
}

// runSelf runs queenbench --self on a database of its own with args,
// quietly, and returns its report and the table it printed.
func runSelf(t *testing.T, args ...string) (bench.Report, string) {
	t.Helper()
	out := filepath.Join(t.TempDir(), "report.json")
	var stdout, stderr bytes.Buffer
	args = append([]string{"--self", "--gateway-bin", gatewayBinary(t), "--pg-url", pgtest.NewDB(t), "--quiet", "--json", out}, args...)
	if err := run(args, &stdout, &stderr); err != nil {
		t.Fatalf("queenbench: %v\nstdout:\n%s\nstderr:\n%s", err, stdout.String(), stderr.String())
	}
	return readReport(t, out), stdout.String()
}

func readReport(t *testing.T, path string) bench.Report {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var r bench.Report
	if err := json.Unmarshal(b, &r); err != nil {
		t.Fatal(err)
	}
	return r
}

// TestFleetComparison runs one gateway against a fleet of two in the same
// run: the fleet is resized between targets, its figures are summed over
// its gateways, and the ratio is the fleet's throughput over one gateway's.
func TestFleetComparison(t *testing.T) {
	t.Parallel()
	r, _ := runSelf(t, "--scenario", "unique", "--compare", "queengate,queengate@2",
		"--rounds", "1", "--messages", "6000", "--producers", "8", "--batch", "50", "--partitions", "20")
	if len(r.Results) != 2 || r.Results[1].Target != "queengate@2" {
		t.Fatalf("results %+v, want queengate then queengate@2", r.Results)
	}
	for _, res := range r.Results {
		if res.Messages != 6000 || res.Failed != 0 || res.Violations != 0 || res.Queued != 6000 {
			t.Errorf("%s: %d answered, %d queued, %d failed, %d violations", res.Target, res.Messages, res.Queued, res.Failed, res.Violations)
		}
		if res.MeanFrame <= 0 || res.Hydrations+res.Births < 20 {
			t.Errorf("%s: mean frame %v, %d hydrations and %d births; want frames and an entry read or born per partition",
				res.Target, res.MeanFrame, res.Hydrations, res.Births)
		}
	}
	if len(r.Ratios) != 1 || r.Ratios[0].Label != "queengate@2 ÷ queengate" {
		t.Errorf("ratios %+v, want one: queengate@2 ÷ queengate", r.Ratios)
	}
}

// TestFailoverShortProfile is the failover scenario, short: one of three
// gateways is killed outright halfway, producers resend what failed with
// the same ids, and PostgreSQL then holds every id once.
func TestFailoverShortProfile(t *testing.T) {
	t.Parallel()
	out := filepath.Join(t.TempDir(), "report.json")
	var stdout, stderr bytes.Buffer
	err := run([]string{"--self", "--gateway-bin", gatewayBinary(t), "--pg-url", pgtest.NewDB(t), "--scenario", "failover",
		"--messages", "20000", "--producers", "8", "--batch", "50", "--partitions", "20", "--retries", "0.2",
		"--quiet", "--json", out}, &stdout, &stderr)
	if err != nil {
		t.Fatalf("queenbench: %v\nstdout:\n%s\nstderr:\n%s", err, stdout.String(), stderr.String())
	}
	r := readReport(t, out)
	if len(r.Results) != 1 {
		t.Fatalf("%d results", len(r.Results))
	}
	res := r.Results[0]
	t.Logf("failover: %d retries, longest gap %v per producer, %v for all", res.Retries, res.MaxGap, res.FleetGap)
	if res.Killed != 1 {
		t.Errorf("%d gateways killed, want 1", res.Killed)
	}
	if res.Messages != 20000 || res.Failed != 0 || res.Violations != 0 || res.DistinctIDs == 0 {
		t.Errorf("%d answered, %d failed, %d violations over %d distinct ids; want all answered, none failed or violated",
			res.Messages, res.Failed, res.Violations, res.DistinctIDs)
	}
}

// runSideBySide runs a side-by-side scenario (read, consume) with --self
// on a database of its own, and gives its JSON report and what it printed.
func runSideBySide[R any](t *testing.T, args ...string) (R, string) {
	t.Helper()
	var rep R
	out := filepath.Join(t.TempDir(), "report.json")
	var stdout, stderr bytes.Buffer
	err := run(append([]string{"--self", "--gateway-bin", gatewayBinary(t), "--pg-url", pgtest.NewDB(t), "--quiet", "--json", out}, args...), &stdout, &stderr)
	if err != nil {
		t.Fatalf("queenbench: %v\n%s", err, stderr.String())
	}
	b, err := os.ReadFile(out)
	if err != nil || json.Unmarshal(b, &rep) != nil {
		t.Fatalf("report: %v %s", err, b)
	}
	return rep, stdout.String()
}

// TestReadScenarioShort runs the read scenario small: every message
// stored is read back from queengate and from JetStream, each round, and
// the reader in its own process reads beside the pushes.
func TestReadScenarioShort(t *testing.T) {
	t.Parallel()
	rep, stdout := runSideBySide[sidebyside.ReadReport](t, "--scenario", "read", "--messages", "6000", "--partitions", "3",
		"--rounds", "2", "--read-push-time", "2s") // 500 ms once ended before the reader, started on a loaded machine, had an answer
	if len(rep.Results) != 4 || rep.RatioMedian <= 0 || rep.PushP99Alone <= 0 || rep.PushP99WithReader <= 0 || rep.ReadBesidePushes <= 0 {
		t.Errorf("report %+v: want two rounds of both sides, a ratio, both latencies and the reader's rate beside the pushes", rep)
	}
	for _, r := range rep.Results {
		if r.Messages != 6000 {
			t.Errorf("%s round %d read %d messages, want 6000", r.Target, r.Round, r.Messages)
		}
	}
	if !strings.Contains(stdout, "queengate ÷ JetStream") {
		t.Errorf("no summary:\n%s", stdout)
	}
}

// TestConsumeScenarioShort runs the consume scenario small: every message
// is consumed and acknowledged exactly once on both sides (the scenario
// fails otherwise), and the latency and push figures are taken.
func TestConsumeScenarioShort(t *testing.T) {
	t.Parallel()
	rep, stdout := runSideBySide[sidebyside.ConsumeReport](t, "--scenario", "consume", "--messages", "6000", "--partitions", "3",
		"--rounds", "2", "--read-push-time", "2s") // 500 ms once ended before the reader, started on a loaded machine, had an answer
	if len(rep.Results) != 4 || rep.RatioMedian <= 0 || rep.LatencyP99 <= 0 || rep.JetStreamLatencyP99 <= 0 ||
		rep.PushAlone <= 0 || rep.PushWithConsumers <= 0 {
		t.Errorf("report %+v: want two rounds of both sides, a ratio, latencies and push rates", rep)
	}
	for _, r := range rep.Results {
		if r.Messages != 6000 || r.Duplicates != 0 || r.Redeliveries != 0 {
			t.Errorf("%s round %d: %+v, want 6000 consumed once each", r.Target, r.Round, r)
		}
	}
	// One batch size: the split, but no fit of a cycle's cost.
	if len(rep.Fits) != 0 || len(rep.Splits) != 2 || strings.Contains(stdout, "fixed cost per cycle b µs") || !strings.Contains(stdout, "No fit") {
		t.Errorf("fits %+v, %d splits from one batch size; want none and two, printed:\n%s", rep.Fits, len(rep.Splits), stdout)
	}
}

// TestConsumeShapesShort runs every shape of the consume scenario small:
// each batch size, many partitions and fan-out are consumed exactly once
// per group on both sides and summarised with a ratio and the CPU per
// message (PostgreSQL's included when its processes are on this machine,
// as pgtest's own cluster is), beside the fill's CPU per pushed message;
// the idle phase keeps its pollers waiting without an error or a
// delivery and reports PostgreSQL's statements and the gateway's CPU.
func TestConsumeShapesShort(t *testing.T) {
	t.Parallel()
	rep, stdout := runSideBySide[sidebyside.ConsumeReport](t, "--scenario", "consume", "--messages", "3000", "--partitions", "2",
		"--rounds", "1", "--consume-batch", "10,100", "--consume-partitions", "40", "--consume-fanout", "2",
		"--idle-pollers", "20", "--idle-time", "500ms", "--idle-settle", "200ms", "--read-push-time", "300ms", "--consume-pop-partitions", "4")
	want := []sidebyside.ShapeSummary{
		{Shape: "batch 100", Partitions: 2, Batch: 100, Groups: 1, Consumers: 2},
		{Shape: "batch 10", Partitions: 2, Batch: 10, Groups: 1, Consumers: 2},
		{Shape: "40 partitions by 4", Partitions: 40, Batch: 100, Groups: 1, Consumers: 2}, // each pop over up to 4
		{Shape: "fan-out 2", Partitions: 2, Batch: 100, Groups: 2, Consumers: 2},
	}
	if len(rep.Shapes) != len(want) || len(rep.Results) != 2*len(want) {
		t.Fatalf("%d shapes, %d results; want %d shapes of one round of each side", len(rep.Shapes), len(rep.Results), len(want))
	}
	for i, sh := range rep.Shapes {
		figures := []float64{sh.Queengate, sh.JetStream, sh.RatioMedian, sh.QueengateCPUMicros, sh.JetStreamCPUMicros}
		sh.Queengate, sh.JetStream, sh.RatioMedian, sh.QueengateCPUMicros, sh.JetStreamCPUMicros = 0, 0, 0, 0, 0
		if sh != want[i] || slices.Min(figures) <= 0 {
			t.Errorf("shape %d: %+v, figures %v; want %+v with every figure positive", i, sh, figures, want[i])
		}
	}
	for _, r := range rep.Results {
		if r.Messages != 3000*int64(r.Groups) || r.Duplicates != 0 || r.Redeliveries != 0 || r.CPUMicrosPerMessage <= 0 {
			t.Errorf("%s %s round %d: %+v, want 3000 consumed once per group and its CPU", r.Shape, r.Target, r.Round, r)
		}
	}
	if rep.Batch != 100 || rep.RatioMedian != rep.Shapes[0].RatioMedian || rep.PushCPUMicros <= 0 || rep.JetStreamPushCPUMicros <= 0 {
		t.Errorf("batch %d, ratio %v, push CPU %v and %v µs/msg: want the first shape's and the fill's CPU", rep.Batch, rep.RatioMedian,
			rep.PushCPUMicros, rep.JetStreamPushCPUMicros)
	}
	if os.Getenv(pgtest.EnvURL) == "" && !rep.PostgresCPUCounted {
		t.Errorf("PostgreSQL runs here (pgtest's cluster) but its CPU was not counted")
	}
	i := rep.Idle
	if i == nil || i.Pollers != 20 || i.Seconds != 0.5 || i.PollsAnswered != 0 || i.PollErrors != 0 || i.Delivered != 0 ||
		i.StatementsPerSecond < 0 || i.GatewayCPUPercent < 0 || (rep.PostgresCPUCounted && i.PostgresCPUPercent < 0) {
		t.Errorf("idle: %+v; want 20 pollers waiting through 0.5 s (none answered, none failed, nothing delivered), and the rates", i)
	}
	if !strings.Contains(stdout, "Idle, 20 long polls") || !strings.Contains(stdout, "| fan-out 2 |") {
		t.Errorf("no idle or shape summary:\n%s", stdout)
	}
	checkConsumeSplits(t, rep)
	checkConsumeFits(t, rep, stdout)
}

// checkConsumeSplits: every consume round is split by process (the load
// generator, then each serving process: queengate's gateway, NATS server
// and PostgreSQL when counted; JetStream's server), its serving
// processes' sum is its CPU per message, and its cycles are at least a
// request per batch.
func checkConsumeSplits(t *testing.T, rep sidebyside.ConsumeReport) {
	t.Helper()
	want := map[string][]string{"queengate": {"load generator", "gateway", "nats-server"}, "jetstream": {"load generator", "nats-server (JetStream)"}}
	if rep.PostgresCPUCounted {
		want["queengate"] = append(want["queengate"], "PostgreSQL")
	}
	for _, r := range rep.Results {
		var names []string
		serving := 0.0
		for _, p := range r.Split {
			names = append(names, p.Process)
			if p.Serving {
				serving += p.Seconds
			}
		}
		perMessage := serving / float64(r.Messages) * 1e6
		if !slices.Equal(names, want[r.Target]) || math.Abs(perMessage-r.CPUMicrosPerMessage) > 1e-6*perMessage ||
			(strings.HasPrefix(r.Shape, "batch ") && r.Cycles < r.Messages/int64(r.Batch)) {
			t.Errorf("%s %s: split %+v, %d cycles; want %v summing to %v µs/msg, a cycle or more per batch", r.Shape, r.Target, r.Split, r.Cycles,
				want[r.Target], r.CPUMicrosPerMessage)
		}
	}
	if len(rep.Splits) != 2*len(rep.Shapes) {
		t.Errorf("%d splits for %d shapes, want one per shape and side", len(rep.Splits), len(rep.Shapes))
	}
}

// checkConsumeFits: with batches of 10 and 100, each side's processes
// and totals are fitted over both, and printed.
func checkConsumeFits(t *testing.T, rep sidebyside.ConsumeReport, stdout string) {
	t.Helper()
	fitted := map[string]bool{}
	for _, f := range rep.Fits {
		if slices.Equal(f.Batches, []int{10, 100}) {
			fitted[f.Target+"/"+f.Process] = true
		}
	}
	for _, k := range []string{"queengate/gateway", "queengate/serving processes", "jetstream/load generator", "jetstream/all, with the load generator"} {
		if !fitted[k] {
			t.Errorf("fits %+v: none of %s over batches 10 and 100", rep.Fits, k)
		}
	}
	if !strings.Contains(stdout, "| target | process | fixed cost per cycle b µs | per message a µs |") ||
		!strings.Contains(stdout, "queengate, serving processes: fixed cost per cycle") {
		t.Errorf("no fit printed:\n%s", stdout)
	}
}

// TestGeneratorShapes: a prefill sweeps the partitions in turn, so one
// request per partition makes every partition exist; requests of varying
// size stay within their bounds and the run sends exactly its messages;
// the partitions touched are counted; no history is kept without retries.
func TestGeneratorShapes(t *testing.T) {
	t.Parallel()
	w := bench.Workload{Producers: 1, PerRequest: 10, Queues: 2, Partitions: 50, PayloadBytes: 10}
	pre := newGenerator(w, "pre", 1000)
	pre.sweep = true
	r := rand.New(rand.NewPCG(1, 2))
	seq, seen := 0, map[string]int{}
	for b := pre.next(r, 0, &seq); b != nil; b = pre.next(r, 0, &seq) {
		seen[b.Queue+"/"+b.Partition]++
	}
	if len(seen) != 100 || pre.partitionsTouched() != 100 {
		t.Errorf("prefill of 1000 in requests of 10 over 2×50 partitions: %d partitions sent to, %d counted; want every one once",
			len(seen), pre.partitionsTouched())
	}
	for k, n := range seen {
		if n != 1 {
			t.Errorf("%s sent %d requests, want 1", k, n)
		}
	}

	w.MinPerRequest = 3
	g := newGenerator(w, "run", 997)
	if g.history != nil {
		t.Error("history kept for a workload without retries")
	}
	total, sizes := 0, map[int]bool{}
	var last *bench.Batch
	for b := g.next(r, 0, &seq); b != nil; b = g.next(r, 0, &seq) {
		total += len(b.IDs)
		sizes[len(b.IDs)] = true
		if last != nil && (len(last.IDs) < 3 || len(last.IDs) > 10) {
			t.Errorf("a request of %d messages, want 3 to 10", len(last.IDs))
		}
		last = b
	}
	if total != 997 || len(sizes) < 5 {
		t.Errorf("sent %d messages in requests of %d sizes; want 997 and sizes varying from 3 to 10", total, len(sizes))
	}
	if n := g.partitionsTouched(); n < 50 || n > 100 {
		t.Errorf("%d partitions touched by ~150 random requests over 100, want between 50 and 100", n)
	}
}

// TestSessionsScenarioShort runs the many-partitions scenario small
// against JetStream: each round reports both sides' msg/s and the ratio,
// the gateway's CPU, cache, peak memory, the partitions touched, its
// hydrations and evictions, both sides' p99, and the budget checks. It
// asserts the report, not the performance.
func TestSessionsScenarioShort(t *testing.T) {
	t.Parallel()
	r, table := runSelf(t, "--scenario", "sessions1m", "--compare", "queengate,jetstream",
		"--rounds", "1", "--messages", "3000", "--partitions", "20000", "--producers", "16")
	if len(r.Results) != 2 || len(r.Ratios) != 1 || r.Ratios[0].Target != "jetstream" {
		t.Fatalf("results %+v, ratios %+v: want queengate and jetstream, and their ratio", r.Results, r.Ratios)
	}
	for _, res := range r.Results {
		if res.Messages != 3000 || res.Violations != 0 || res.Throughput <= 0 || res.P99 <= 0 {
			t.Errorf("%s: %d messages, %d violations, %v msg/s, p99 %v", res.Target, res.Messages, res.Violations, res.Throughput, res.P99)
		}
		if res.PartitionsTouched < 100 || res.PartitionsTouched > 3000 {
			t.Errorf("%s: %d partitions touched by 3000 messages in requests of 1-10", res.Target, res.PartitionsTouched)
		}
	}
	qg := r.Results[0]
	if qg.Target != "queengate" || qg.CPUSecondsPerMillion <= 0 || qg.CacheBytesPerHash <= 0 || qg.CacheBytesPerEntry <= 0 ||
		qg.GatewayPeakRSSBytes <= 0 || qg.Hydrations < 0 || qg.Births <= 0 || qg.Evictions < 0 || qg.Suppressed < 0 {
		t.Errorf("queengate's figures %+v: want CPU, cache bytes per hash and per entry, gateway RSS, hydrations, births (every partition is new), evictions and suppressed partitions", qg)
	}
	if len(r.Checks) != 2 {
		t.Fatalf("checks %+v, want the hydration and the memory check", r.Checks)
	}
	for _, c := range r.Checks {
		if c.Target != "queengate" || c.Round != 1 || c.Figures == "" {
			t.Errorf("check %+v", c)
		}
	}
	for _, want := range []string{report.PartitionRoundsTitle, "jetstream msg/s", "ratio", "gateway peak RSS MiB", "hydrations", "births", "evictions", "suppressed",
		"jetstream p99 ms", "check, queengate round 1: hydrations ≤ partitions touched + evictions",
		"check, queengate round 1: gateway peak RSS ≤ cache budget + 150 MiB", "1–10 msgs/request"} {
		if !strings.Contains(table, want) {
			t.Errorf("the table lacks %q:\n%s", want, table)
		}
	}
}
