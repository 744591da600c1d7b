package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"strconv"
	"strings"
	"syscall"
	"time"

	queengate "github.com/queengate/queengate"
)

// scenarios are the named presets; flags given explicitly override them.
// The main ones send 1.5M messages: on the reference machine a run of
// 300,000 took about a second, mostly ramp-up, so it measured how fast a
// target starts rather than how fast it runs.
var scenarios = map[string]Workload{
	"unique":      {Producers: 64, PerRequest: 100, Total: 1_500_000, Queues: 1, Partitions: 100, WindowSeconds: 3600},
	"retries":     {Producers: 64, PerRequest: 100, Total: 1_500_000, Queues: 1, Partitions: 100, WindowSeconds: 3600, RetryShare: 0.2, CrossShare: 0.5},
	"hot":         {Producers: 64, PerRequest: 100, Total: 1_500_000, Queues: 1, Partitions: 1, WindowSeconds: 3600},
	"wide":        {Producers: 64, PerRequest: 100, Total: 300_000, Queues: 1, Partitions: 10_000, WindowSeconds: 3600},
	"window":      {Producers: 64, PerRequest: 100, Total: 300_000, Queues: 1, Partitions: 100, WindowSeconds: 300, Prefill: 1_000_000},
	"twogateways": {Producers: 64, PerRequest: 100, Total: 1_500_000, Queues: 1, Partitions: 100, WindowSeconds: 3600, Gateways: 2},
	// failover kills one of three gateways (SIGKILL) halfway; producers
	// resend what failed or timed out, with the same ids, until answered.
	"failover": {Producers: 64, PerRequest: 100, Total: 1_500_000, Queues: 1, Partitions: 100, WindowSeconds: 3600, Gateways: 3,
		KillAt: 0.5, RetryFailed: true, RequestTimeout: time.Second},
	// read stores the messages in queengate and in JetStream, then reads
	// them back (readbench.go): a scenario of its own, with --self.
	"read":    {Producers: 8, PerRequest: 1000, Total: 1_000_000, Queues: 1, Partitions: 8, WindowSeconds: 3600},
	"consume": {Producers: 8, PerRequest: 1000, Total: 500_000, Queues: 1, Partitions: 8, WindowSeconds: 3600},
	// Many partitions: one ordered lane per entity (a session, a
	// customer), few messages per request. sessions meets most
	// partitions for the first time in the run; sessions-warm first
	// sends ten messages to every partition; sessions1m touches about
	// 420k of a million partitions with requests of 1 to 10 messages and
	// checks the cache keeps to its budget.
	"sessions":      {Producers: 256, PerRequest: 10, Total: 500_000, Queues: 1, Partitions: 100_000, WindowSeconds: 3600},
	"sessions-warm": {Producers: 256, PerRequest: 10, Total: 500_000, Queues: 1, Partitions: 100_000, WindowSeconds: 3600, Prefill: 1_000_000},
	"sessions1m": {Producers: 256, PerRequest: 10, MinPerRequest: 1, Total: 3_000_000, Queues: 1, Partitions: 1_000_000,
		WindowSeconds: 3600, BudgetChecks: true},
}

var scenarioNames = []string{"unique", "retries", "hot", "wide", "window", "twogateways", "failover", "read", "consume",
	"sessions", "sessions-warm", "sessions1m"}

var targetNames = []string{"queengate", "naive", "jetstream", "ceiling"}

// exactTargets deduplicate, so their runs are checked for exactness; the
// ceiling writes every message by definition.
var exactTargets = map[string]bool{"queengate": true, "naive": true, "jetstream": true}

// window0 is queengate itself with every queue's window set to 0: what
// deduplication costs, measured in the same run (not part of "all").
const window0 = "window0"

// fleetTarget parses queengate@N: queengate run as a fleet of N gateways
// (--self), to compare with one gateway in the same run.
func fleetTarget(name string) (n int, ok bool) {
	rest, found := strings.CutPrefix(name, "queengate@")
	if !found {
		return 0, false
	}
	n, err := strconv.Atoi(rest)
	return n, err == nil && n >= 1 && n <= 16
}

// usageError is a bad command line: exit status 2.
type usageError struct{ error }

// violationError is a run that broke exactness: exit status 3.
type violationError struct{ error }

func exitCode(err error) int {
	var u usageError
	var v violationError
	switch {
	case errors.Is(err, flag.ErrHelp):
		return 0 // asked for and printed
	case errors.As(err, &u):
		return 2
	case errors.As(err, &v):
		return 3
	}
	return 1
}

type options struct {
	w          Workload
	targets    []string
	rounds     int
	self       bool
	natsURL    string
	prefix     string
	adminAddrs []string
	pgURL      string
	gatewayBin string
	jsonOut    string
	mdOut      string
	chartOut   string
	quiet      bool
	cpuProfile string
	consume    consumeOptions
	// readPushTime is how long the read scenario measures push latency,
	// alone and then beside a reader.
	readPushTime time.Duration
}

func parseOptions(args []string, stderr io.Writer) (options, error) {
	fs := flag.NewFlagSet("queenbench", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() { printUsage(fs, stderr) }
	var (
		o        options
		scenario = fs.String("scenario", "unique", "preset workload: "+strings.Join(scenarioNames, ", "))
		target   = fs.String("target", "queengate", "target to measure: "+strings.Join(targetNames, ", "))
		compare  = fs.String("compare", "", "comma-separated targets (or \"all\") to run back to back, alternating, and compare to queengate")
		admin    = fs.String("admin", "", "comma-separated admin HTTP addresses of the gateways (for their /metrics), with --nats-url")
		w        Workload
		linger   time.Duration
		duration time.Duration
	)
	defineSetupFlags(fs, &o)
	defineWorkloadFlags(fs, &w, &linger, &duration)
	consumeBatches := defineReadConsumeFlags(fs, &o)
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	if fs.NArg() > 0 {
		return o, usageError{fmt.Errorf("unexpected arguments %q", fs.Args())}
	}
	preset, ok := scenarios[*scenario]
	if !ok {
		return o, usageError{fmt.Errorf("--scenario %q: one of %s", *scenario, strings.Join(scenarioNames, ", "))}
	}
	preset.Scenario = *scenario
	overridePreset(fs, &preset, w)
	preset.PayloadBytes, preset.FlushSize, preset.Linger = w.PayloadBytes, w.FlushSize, linger
	preset.FireAndForget, preset.Seed, preset.Duration = w.FireAndForget, w.Seed, duration
	preset.CacheMB = w.CacheMB
	preset.Gateways = max(preset.Gateways, 1)
	o.w = preset
	batches, err := parseConsumeBatches(*consumeBatches)
	if err != nil {
		return o, err
	}
	o.consume.batches = batches
	o.targets, o.rounds = chooseTargets(*target, *compare, o.rounds)
	if *admin != "" {
		o.adminAddrs = strings.Split(*admin, ",")
	}
	return o, o.validate(*compare != "")
}

func printUsage(fs *flag.FlagSet, stderr io.Writer) {
	fmt.Fprintf(stderr, `queenbench measures queengate and its alternatives with the same messages.

  queenbench --self --scenario unique                 queengate alone, started here
  queenbench --self --scenario retries --compare all  all targets, alternating, ratios
  queenbench --self --scenario window --compare queengate,window0
                                     what deduplication costs: the same gateway, window 0
  queenbench --nats-url nats://host:4222 --admin host:6632 ...   a running gateway

Scenarios: %s. Targets: %s, and %s (queengate with the window at 0).

`, strings.Join(scenarioNames, ", "), strings.Join(targetNames, ", "), window0)
	fs.PrintDefaults()
}

// defineSetupFlags defines the flags saying what runs where, how often,
// and where the report goes.
func defineSetupFlags(fs *flag.FlagSet, o *options) {
	fs.BoolVar(&o.self, "self", false, "start PostgreSQL (unless --pg-url) and queengate here")
	fs.StringVar(&o.natsURL, "nats-url", "", "NATS URL of running gateways (without --self)")
	fs.StringVar(&o.prefix, "prefix", "queen", "subject prefix of the gateways")
	fs.StringVar(&o.pgURL, "pg-url", os.Getenv("QUEEN_PG_URL"), "PostgreSQL URL: the gateways' database, and where naive and ceiling write")
	fs.StringVar(&o.gatewayBin, "gateway-bin", "", "queengate binary for --self (default: build it from this repository)")
	fs.IntVar(&o.rounds, "rounds", 0, "rounds per target (default 3 with --compare, else 1)")
	fs.StringVar(&o.jsonOut, "json", "", "write the report as JSON to this file (- for stdout)")
	fs.StringVar(&o.mdOut, "markdown", "", "write the report as Markdown to this file (- for stdout)")
	fs.StringVar(&o.chartOut, "chart", "", "write an SVG chart of throughput and latency to this file")
	fs.BoolVar(&o.quiet, "quiet", false, "no progress output")
	fs.StringVar(&o.cpuProfile, "cpuprofile", "", "write queenbench's own CPU profile (the load generator's) to this file")
}

// defineWorkloadFlags defines the flags shaping the messages sent. Those
// that override a scenario's preset start at a value no one gives (0 or
// -1); overridePreset copies only the ones given.
func defineWorkloadFlags(fs *flag.FlagSet, w *Workload, linger, duration *time.Duration) {
	fs.IntVar(&w.Producers, "producers", 0, "concurrent producers")
	fs.IntVar(&w.PerRequest, "batch", 0, "messages per request")
	fs.IntVar(&w.MinPerRequest, "batch-min", 0, "fewest messages per request: requests then vary uniformly up to --batch (0: all --batch)")
	fs.Int64Var(&w.Total, "messages", 0, "messages per run (0 with --duration: run for that long)")
	fs.DurationVar(duration, "duration", 0, "run length instead of --messages")
	fs.IntVar(&w.Queues, "queues", 0, "queues")
	fs.IntVar(&w.Partitions, "partitions", 0, "partitions per queue")
	fs.IntVar(&w.PayloadBytes, "payload", 100, "bytes of data per message")
	fs.Float64Var(&w.RetryShare, "retries", -1, "share of messages repeating an id already sent (0-1)")
	fs.Float64Var(&w.CrossShare, "cross", -1, "share of retries repeating another producer's id (0-1)")
	fs.IntVar(&w.WindowSeconds, "window", -1, "deduplication window in seconds (0 disables)")
	fs.IntVar(&w.FlushSize, "flush-size", 1000, "gateways' flush size (--self)")
	fs.DurationVar(linger, "linger", time.Millisecond, "gateways' flush linger (--self)")
	fs.IntVar(&w.Gateways, "gateways", 0, "queengate processes to start (--self)")
	fs.IntVar(&w.CacheMB, "cache-mb", 0, "gateways' dedup cache budget in MiB (--self; default: QUEEN_DEDUP_CACHE_MB, else the gateway's default)")
	fs.Int64Var(&w.Prefill, "prefill", -1, "unique messages pushed before the measured run")
	fs.BoolVar(&w.FireAndForget, "fire-and-forget", false, "publish without reply subjects and read the ack subjects (queengate)")
	fs.Int64Var(&w.Seed, "seed", 1, "seed of the generated workload")
	fs.DurationVar(&w.RequestTimeout, "timeout", 0, "longest a producer waits for one answer (default: the scenario's, else 1m)")
	fs.BoolVar(&w.RetryFailed, "retry-failed", false, "resend a failed or timed-out request with the same ids until it is answered, as a careful producer does")
}

// defineReadConsumeFlags defines the flags of the read and consume
// scenarios; it returns --consume-batch, parsed by parseConsumeBatches.
func defineReadConsumeFlags(fs *flag.FlagSet, o *options) *string {
	fs.DurationVar(&o.readPushTime, "read-push-time", 10*time.Second, "read and consume scenarios: how long pushes are measured alone, then beside readers or consumers")
	consumeBatches := fs.String("consume-batch", "100", "consume scenario: comma-separated batch sizes (pop max, fetch size), each measured")
	fs.IntVar(&o.consume.partitions, "consume-partitions", 0, "consume scenario: also consume the same messages stored over this many partitions (JetStream: subjects)")
	fs.IntVar(&o.consume.fanout, "consume-fanout", 0, "consume scenario: also this many groups (JetStream: durable consumers) each reading everything")
	fs.DurationVar(&o.consume.roundTime, "consume-round-time", time.Minute, "consume scenario: longest a round may take; one cut short reports what it delivered until then")
	fs.IntVar(&o.consume.idlePollers, "idle-pollers", 0, "consume scenario: long-polling consumers waiting while nothing arrives, for the idle figures (0: none)")
	fs.DurationVar(&o.consume.idleTime, "idle-time", 10*time.Second, "consume scenario: each idle window measured, without pollers then with them")
	fs.DurationVar(&o.consume.idleSettle, "idle-settle", 5*time.Second, "consume scenario: from starting the idle pollers to measuring (their first pops served)")
	return consumeBatches
}

// parseConsumeBatches reads --consume-batch: sizes a pop may ask for.
func parseConsumeBatches(list string) ([]int, error) {
	var batches []int
	for _, b := range strings.Split(list, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(b))
		if err != nil || n < 1 || n > queengate.MaxPopMax {
			return nil, usageError{fmt.Errorf("--consume-batch %q: comma-separated sizes of 1 to %d", list, queengate.MaxPopMax)}
		}
		batches = append(batches, n)
	}
	return batches, nil
}

// chooseTargets turns --target or --compare into the targets to run, and
// the rounds of each: by default 3 when comparing (to see the spread), else 1.
func chooseTargets(target, compare string, rounds int) ([]string, int) {
	var targets []string
	switch {
	case compare == "all":
		targets = targetNames
	case compare != "":
		targets = strings.Split(compare, ",")
	default:
		targets = []string{target}
	}
	if rounds == 0 {
		rounds = 1
		if compare != "" {
			rounds = 3
		}
	}
	return targets, rounds
}

// overridePreset sets on preset the workload flags given explicitly.
func overridePreset(fs *flag.FlagSet, preset *Workload, w Workload) {
	fs.Visit(func(f *flag.Flag) {
		switch f.Name {
		case "producers":
			preset.Producers = w.Producers
		case "batch":
			preset.PerRequest = w.PerRequest
		case "batch-min":
			preset.MinPerRequest = w.MinPerRequest
		case "messages":
			preset.Total = w.Total
		case "queues":
			preset.Queues = w.Queues
		case "partitions":
			preset.Partitions = w.Partitions
		case "retries":
			preset.RetryShare = w.RetryShare
		case "cross":
			preset.CrossShare = w.CrossShare
		case "window":
			preset.WindowSeconds = w.WindowSeconds
		case "gateways":
			preset.Gateways = w.Gateways
		case "prefill":
			preset.Prefill = w.Prefill
		case "duration":
			preset.Total = 0
		case "timeout":
			preset.RequestTimeout = w.RequestTimeout
		case "retry-failed":
			preset.RetryFailed = w.RetryFailed
		}
	})
}

// validate reports every problem of the command line at once, in the
// order the checks below give them.
func (o options) validate(comparing bool) error {
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	o.checkTargets(comparing, bad)
	o.checkWorkload(bad)
	o.checkDeployment(bad)
	if len(errs) > 0 {
		return usageError{errors.Join(errs...)}
	}
	return nil
}

// checkTargets checks the target names and how they combine.
func (o options) checkTargets(comparing bool, bad func(string, ...any)) {
	known := map[string]bool{}
	for _, t := range append(targetNames, window0) {
		known[t] = true
	}
	for _, t := range o.targets {
		if _, fleet := fleetTarget(t); fleet {
			if !o.self {
				bad("target %s runs a fleet of gateways: only with --self", t)
			}
			continue
		}
		if !known[t] {
			bad("target %q: one of %s, %s, or queengate@N (N gateways, 1-16)", t, strings.Join(targetNames, ", "), window0)
		}
	}
	if comparing && (len(o.targets) < 2 || o.targets[0] != "queengate") {
		bad("--compare needs queengate first and at least one other target, e.g. queengate,naive or queengate,queengate@3")
	}
	if o.w.KillAt > 0 && (!o.self || len(o.targets) != 1 || !strings.HasPrefix(o.targets[0], "queengate")) {
		bad("the failover scenario kills a gateway queenbench runs: --self, and queengate (or queengate@N) alone")
	}
}

// checkWorkload checks the figures of the workload and of the runs.
func (o options) checkWorkload(bad func(string, ...any)) {
	w := o.w
	if w.Producers < 1 {
		bad("--producers %d: at least 1", w.Producers)
	}
	if w.PerRequest < 1 || w.PerRequest > 1000 {
		bad("--batch %d: 1 to 1000 messages per request", w.PerRequest)
	}
	if w.MinPerRequest < 0 || w.MinPerRequest > w.PerRequest {
		bad("--batch-min %d: 0 (every request --batch) or 1 to --batch (%d)", w.MinPerRequest, w.PerRequest)
	}
	if w.CacheMB < 0 {
		bad("--cache-mb %d: 1 or more MiB (0: the gateways' own)", w.CacheMB)
	}
	if (w.Total <= 0) == (w.Duration <= 0) {
		bad("give exactly one of --messages (> 0) and --duration (> 0)")
	}
	if w.Queues < 1 || w.Partitions < 1 {
		bad("--queues %d, --partitions %d: at least 1 each", w.Queues, w.Partitions)
	}
	if w.PayloadBytes < 0 || w.PayloadBytes > 64<<10 {
		bad("--payload %d: 0 to 65536 bytes", w.PayloadBytes)
	}
	if w.RetryShare < 0 || w.RetryShare > 1 || w.CrossShare < 0 || w.CrossShare > 1 {
		bad("--retries %v, --cross %v: shares between 0 and 1", w.RetryShare, w.CrossShare)
	}
	if w.WindowSeconds < 0 {
		bad("--window %d: 0 (off) or more seconds", w.WindowSeconds)
	}
	if c := o.consume; c.partitions < 0 || c.fanout < 0 || c.idlePollers < 0 || c.idleTime <= 0 || c.idleSettle < 0 || c.roundTime <= 0 {
		bad("--consume-partitions %d, --consume-fanout %d, --idle-pollers %d: 0 (none) or more; --idle-time %v, --consume-round-time %v: positive; --idle-settle %v: 0 or more",
			c.partitions, c.fanout, c.idlePollers, c.idleTime, c.roundTime, c.idleSettle)
	}
	if w.Prefill < 0 {
		bad("--prefill %d: 0 or more", w.Prefill)
	}
	if w.FlushSize < 1 || w.Linger <= 0 {
		bad("--flush-size %d, --linger %v: positive", w.FlushSize, w.Linger)
	}
	if o.rounds < 1 {
		bad("--rounds %d: at least 1", o.rounds)
	}
}

// checkDeployment checks that what the targets need is started here
// (--self) or given (URLs).
func (o options) checkDeployment(bad func(string, ...any)) {
	w := o.w
	if contains(o.targets, window0) && !o.self && o.pgURL == "" {
		bad("%s sets the queues' window in PostgreSQL: give --pg-url, or --self", window0)
	}
	if !o.self && o.natsURL == "" && contains(o.targets, "queengate") {
		bad("queengate target: give --self, or --nats-url of running gateways")
	}
	if o.self && o.natsURL != "" {
		bad("--self starts its own gateways: drop --nats-url")
	}
	if !o.self && o.pgURL == "" && (contains(o.targets, "naive") || contains(o.targets, "ceiling")) {
		bad("naive and ceiling write to PostgreSQL: give --pg-url, or --self")
	}
	if !o.self && w.Gateways > 1 {
		bad("--gateways %d: only with --self", w.Gateways)
	}
	if w.Gateways > 16 {
		bad("--gateways %d: at most 16", w.Gateways)
	}
	if w.FireAndForget && len(o.targets) > 1 {
		bad("--fire-and-forget applies to queengate alone, not to --compare")
	}
}

func contains(xs []string, x string) bool {
	for _, y := range xs {
		if y == x {
			return true
		}
	}
	return false
}

func run(args []string, stdout, stderr io.Writer) error {
	o, err := parseOptions(args, stderr)
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if o.cpuProfile != "" {
		stopProfile, err := startCPUProfile(o.cpuProfile)
		if err != nil {
			return err
		}
		defer stopProfile()
	}
	logf := func(format string, a ...any) {
		if !o.quiet {
			fmt.Fprintf(stderr, "queenbench: "+format+"\n", a...)
		}
	}
	progress := stderr
	if o.quiet {
		progress = nil
	}

	if o.w.Scenario == "read" || o.w.Scenario == "consume" {
		return runOwnScenario(ctx, o, stdout, logf)
	}
	targets, autovac, cleanup, err := openTargets(ctx, o, logf)
	defer cleanup()
	if err != nil {
		return err
	}
	report := &Report{Machine: machine(), Command: "queenbench " + strings.Join(args, " "), Workload: o.w}
	if err := runRounds(ctx, o, targets, report, logf, progress, autovac); err != nil {
		return err
	}
	summarise(report, o.targets)
	if o.w.BudgetChecks {
		report.Checks = budgetChecks(report.Results, o.w.cacheBudgetMB())
	}
	if err := writeOutputs(report, o, stdout); err != nil {
		return err
	}
	return exactnessViolations(report.Results)
}

// startCPUProfile profiles queenbench itself into path until the returned
// stop is called.
func startCPUProfile(path string) (stop func(), err error) {
	f, err := os.Create(path)
	if err != nil {
		return nil, err
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return nil, err
	}
	return func() {
		pprof.StopCPUProfile()
		f.Close()
	}, nil
}

// runOwnScenario runs the read or the consume scenario: each starts and
// measures its own gateway and JetStream server, so it needs --self.
func runOwnScenario(ctx context.Context, o options, stdout io.Writer, logf func(string, ...any)) error {
	if !o.self {
		return usageError{fmt.Errorf("--scenario %s needs --self: it runs its own gateway and JetStream server", o.w.Scenario)}
	}
	if o.w.Scenario == "read" {
		return runReadBench(ctx, o, stdout, logf)
	}
	return runConsumeBench(ctx, o, stdout, logf)
}

// runRounds runs every target o.rounds times, adding each run's result to
// report.
func runRounds(ctx context.Context, o options, targets []Target, report *Report, logf func(string, ...any), progress io.Writer, autovac func() (float64, bool)) error {
	for round := 1; round <= o.rounds; round++ {
		// Alternate the order each round so that drift (a filling disk,
		// a warming cache) does not always favour the same target.
		order := make([]Target, len(targets))
		for i := range targets {
			order[i] = targets[(i+round-1)%len(targets)]
		}
		for _, t := range order {
			logf("round %d/%d: %s, scenario %s", round, o.rounds, t.Name(), o.w.Scenario)
			res, err := runOnce(ctx, t, o.w, round, progress, autovac)
			if err != nil {
				return fmt.Errorf("%s, round %d: %w", t.Name(), round, err)
			}
			report.Results = append(report.Results, res)
		}
	}
	return nil
}

// exactnessViolations is the violationError naming every run that broke
// exactness, or nil.
func exactnessViolations(results []Result) error {
	var violations []string
	for _, r := range results {
		if r.Violations > 0 {
			violations = append(violations, fmt.Sprintf("%s round %d: %d", r.Target, r.Round, r.Violations))
		}
	}
	if len(violations) > 0 {
		return violationError{fmt.Errorf("exactness violated: %s", strings.Join(violations, "; "))}
	}
	return nil
}

// openTargets starts or connects what the targets need; cleanup releases
// it (safe to call on error). autovac, when queenbench runs PostgreSQL,
// reads the CPU its automatic vacuums and analyzes have used so far.
func openTargets(ctx context.Context, o options, logf func(string, ...any)) (targets []Target, autovac func() (float64, bool), cleanup func(), err error) {
	var closers []func()
	autovac = func() (float64, bool) { return 0, false }
	cleanup = func() {
		for i := len(closers) - 1; i >= 0; i-- {
			closers[i]()
		}
	}
	pgURL := o.pgURL
	natsURL, admin := o.natsURL, o.adminAddrs
	var fleet *selfEnv
	if o.self {
		env, err := startSelf(ctx, o.w, o.pgURL, o.gatewayBin, o.prefix, logf)
		if err != nil {
			return nil, autovac, cleanup, err
		}
		closers = append(closers, env.Stop)
		autovac = env.autovacuumCPU
		pgURL, natsURL, fleet = env.pgURL, env.natsURL, env
	}
	for _, name := range o.targets {
		var (
			t   Target
			err error
		)
		n, isFleet := fleetTarget(name)
		switch {
		case name == "queengate" || isFleet:
			if !isFleet {
				n = o.w.Gateways
			}
			t, err = newQueengateTarget(ctx, name, n, fleet, natsURL, o.prefix, pgURL, admin)
		case name == window0:
			var qt *queengateTarget
			if qt, err = newQueengateTarget(ctx, window0, o.w.Gateways, fleet, natsURL, o.prefix, pgURL, admin); err == nil {
				qt.noWindow = true
				t = qt
			}
		case name == "naive":
			t, err = newNaiveTarget(ctx, pgURL)
		case name == "ceiling":
			t, err = newCeilingTarget(ctx, pgURL)
		case name == "jetstream":
			var dir string
			if dir, err = os.MkdirTemp("", "queenbench-js-"); err == nil {
				closers = append(closers, func() { _ = os.RemoveAll(dir) })
				t, err = newJetStreamTarget(ctx, filepath.Join(dir, "store"))
			}
		}
		if err != nil {
			return nil, autovac, cleanup, fmt.Errorf("%s: %w", name, err)
		}
		closers = append(closers, func() { _ = t.Close() })
		targets = append(targets, t)
	}
	return targets, autovac, cleanup, nil
}

// runOnce is one measured run of one target: set up, prefill (untimed),
// run, and collect figures and the exactness verdict.
func runOnce(ctx context.Context, t Target, w Workload, round int, progress io.Writer, autovac func() (float64, bool)) (Result, error) {
	w.RunID = fmt.Sprintf("%x-%d", time.Now().UnixNano()&0xffffffffff, round)
	if err := t.Setup(ctx, w); err != nil {
		return Result{}, fmt.Errorf("setup: %w", err)
	}
	g := newGenerator(w, w.RunID, w.Total)
	var prefillExact *exactness
	if w.Prefill > 0 {
		var err error
		if prefillExact, err = prefill(ctx, t, w, g, progress); err != nil {
			return Result{}, err
		}
	}
	before, err := t.Figures(ctx)
	if err != nil {
		return Result{}, fmt.Errorf("figures: %w", err)
	}
	avBefore, _ := autovac()
	var deadline time.Time
	if w.Duration > 0 {
		deadline = time.Now().Add(w.Duration)
	}
	res, exact, err := drive(ctx, t, g, deadline, progress)
	if err != nil {
		return Result{}, err
	}
	after, err := t.Figures(ctx)
	if err != nil {
		return Result{}, fmt.Errorf("figures: %w", err)
	}
	res.Round = round
	res.PartitionsTouched = g.partitionsTouched()
	res.AutovacuumCPUPerMillion = -1
	if avAfter, ok := autovac(); ok && res.Messages > 0 {
		res.AutovacuumCPUPerMillion = (avAfter - avBefore) / float64(res.Messages) * 1e6
	}
	if prefillExact != nil {
		exact.merge(prefillExact)
	}
	if err := judgeExactness(ctx, t, w, &res, exact); err != nil {
		return Result{}, err
	}
	if res.Messages > 0 {
		res.CPUSecondsPerMillion = (after.ServerCPUSeconds - before.ServerCPUSeconds) / float64(res.Messages) * 1e6
	}
	copyTargetFigures(&res, after)
	return res, nil
}

// prefill pushes w.Prefill unique messages, untimed, to the queues of the
// measured run's generator g, and returns what they were answered.
func prefill(ctx context.Context, t Target, w Workload, g *generator, progress io.Writer) (*exactness, error) {
	pw := w
	pw.RetryShare = 0
	// Its own id namespace ("-pre"), the run's queues: the measured
	// messages must not repeat the prefill's ids by accident.
	pg := newGenerator(pw, w.RunID+"-pre", w.Prefill)
	pg.queues, pg.sweep = g.queues, true
	res, exact, err := drive(ctx, t, pg, time.Time{}, progress)
	if err != nil {
		return nil, fmt.Errorf("prefill: %w", err)
	}
	if res.Failed > 0 {
		return nil, fmt.Errorf("prefill: %d messages failed", res.Failed)
	}
	if m, ok := t.(interface{ markCounters(context.Context) error }); ok {
		if err := m.markCounters(ctx); err != nil {
			return nil, err
		}
	}
	return exact, nil
}

// judgeExactness sets res's distinct ids and exactness violations.
func judgeExactness(ctx context.Context, t Target, w Workload, res *Result, exact *exactness) error {
	if answersIncomplete(w, *res) && canSayWhatItStored(t) {
		// An answer lost to a timeout or a killed gateway leaves its ids
		// answered only as duplicates by the retry, or not at all: what
		// PostgreSQL stores is the verdict.
		var err error
		if res.Violations, err = storedVerdict(ctx, t, exact); err != nil {
			return err
		}
		res.DistinctIDs = exact.distinct()
	} else {
		res.DistinctIDs, res.Violations = exact.verdict()
	}
	if !exactTargets[baseName(t.Name())] {
		res.Violations = 0 // no deduplication by definition: nothing to check
	}
	return nil
}

// copyTargetFigures copies into res what the target reported of itself
// after the run.
func copyTargetFigures(res *Result, after Figures) {
	res.PeakRSSBytes, res.GatewayPeakRSSBytes = after.PeakRSSBytes, after.GatewayPeakRSSBytes
	res.ProbeSkippedShare, res.ProbeNarrowedShare = after.ProbeSkippedShare, after.ProbeNarrowedShare
	res.UnrolledShare, res.CacheBytesPerHash = after.UnrolledShare, after.CacheBytesPerHash
	res.CacheBytesPerEntry = after.CacheBytesPerEntry
	res.MeanFrame, res.Hydrations, res.Fills = after.MeanFrame, after.Hydrations, after.Fills
	res.Evictions, res.Suppressed, res.Births = after.Evictions, after.Suppressed, after.Births
}

// baseName is a target's kind: queengate@3 is queengate.
func baseName(target string) string {
	if _, ok := fleetTarget(target); ok {
		return "queengate"
	}
	return target
}

// answersIncomplete reports whether some answer may be missing: retries
// of failed requests, failures, or a gateway killed on purpose.
func answersIncomplete(w Workload, res Result) bool {
	return w.RetryFailed || w.KillAt > 0 || res.Failed > 0 || res.Retries > 0
}

type storedIDser interface {
	storedIDs(context.Context) (distinct, doubled int64, err error)
	canSayWhatItStored() bool
}

// canSayWhatItStored: the target reads back its store (queengate with a
// PostgreSQL URL).
func canSayWhatItStored(t Target) bool {
	s, ok := t.(storedIDser)
	return ok && s.canSayWhatItStored()
}

// storedVerdict counts exactness violations when answers may have been
// lost: ids answered queued more than once, ids stored more than once, and
// ids answered (each was, in the end) but not stored.
func storedVerdict(ctx context.Context, t Target, exact *exactness) (int64, error) {
	s, ok := t.(storedIDser)
	if !ok {
		return 0, fmt.Errorf("%s cannot say what it stored", t.Name())
	}
	stored, doubled, err := s.storedIDs(ctx)
	if err != nil {
		return 0, err
	}
	answered, queuedTwice := exact.queuedTwice()
	return queuedTwice + doubled + max(answered-stored, 0), nil
}

// summarise fills the per-target medians and, for several targets, the
// per-round ratios of queengate's throughput to each other target's.
func summarise(r *Report, targets []string) {
	byTarget := map[string][]Result{}
	for _, res := range r.Results {
		byTarget[res.Target] = append(byTarget[res.Target], res)
	}
	r.Medians = nil
	for _, name := range targets {
		if rs := byTarget[name]; len(rs) > 0 {
			r.Medians = append(r.Medians, medianResult(rs))
		}
	}
	r.Ratios = nil
	qg := byTarget["queengate"]
	for _, name := range targets {
		if name == "queengate" || len(qg) == 0 {
			continue
		}
		if ratio, ok := throughputRatio(name, byTarget[name], qg); ok {
			r.Ratios = append(r.Ratios, ratio)
		}
	}
}

// medianResult is one target's rounds rs in one: the median of each
// figure, and the counts summed.
func medianResult(rs []Result) Result {
	med := rs[0]
	med.Round = 0
	pick := func(f func(Result) float64) float64 {
		xs := make([]float64, len(rs))
		for i, x := range rs {
			xs[i] = f(x)
		}
		return medianFloat(xs)
	}
	med.Throughput = pick(func(x Result) float64 { return x.Throughput })
	med.P50 = time.Duration(pick(func(x Result) float64 { return float64(x.P50) }))
	med.P90 = time.Duration(pick(func(x Result) float64 { return float64(x.P90) }))
	med.P99 = time.Duration(pick(func(x Result) float64 { return float64(x.P99) }))
	med.Max = time.Duration(pick(func(x Result) float64 { return float64(x.Max) }))
	med.Elapsed = time.Duration(pick(func(x Result) float64 { return float64(x.Elapsed) }))
	med.CPUSecondsPerMillion = pick(func(x Result) float64 { return x.CPUSecondsPerMillion })
	med.AutovacuumCPUPerMillion = pick(func(x Result) float64 { return x.AutovacuumCPUPerMillion })
	med.PeakRSSBytes = int64(pick(func(x Result) float64 { return float64(x.PeakRSSBytes) }))
	med.ProbeSkippedShare = pick(func(x Result) float64 { return x.ProbeSkippedShare })
	med.ProbeNarrowedShare = pick(func(x Result) float64 { return x.ProbeNarrowedShare })
	med.UnrolledShare = pick(func(x Result) float64 { return x.UnrolledShare })
	med.CacheBytesPerHash = pick(func(x Result) float64 { return x.CacheBytesPerHash })
	med.CacheBytesPerEntry = pick(func(x Result) float64 { return x.CacheBytesPerEntry })
	med.GatewayPeakRSSBytes = int64(pick(func(x Result) float64 { return float64(x.GatewayPeakRSSBytes) }))
	med.PartitionsTouched = int64(pick(func(x Result) float64 { return float64(x.PartitionsTouched) }))
	med.Evictions = int64(pick(func(x Result) float64 { return float64(x.Evictions) }))
	med.Suppressed = int64(pick(func(x Result) float64 { return float64(x.Suppressed) }))
	med.MeanFrame = pick(func(x Result) float64 { return x.MeanFrame })
	med.Hydrations = int64(pick(func(x Result) float64 { return float64(x.Hydrations) }))
	med.Births = int64(pick(func(x Result) float64 { return float64(x.Births) }))
	med.Fills = int64(pick(func(x Result) float64 { return float64(x.Fills) }))
	med.MaxGap = time.Duration(pick(func(x Result) float64 { return float64(x.MaxGap) }))
	med.FleetGap = time.Duration(pick(func(x Result) float64 { return float64(x.FleetGap) }))
	med.Retries = int64(pick(func(x Result) float64 { return float64(x.Retries) }))
	med.Queued, med.Duplicate, med.Failed, med.Violations, med.Messages, med.Requests, med.DistinctIDs = 0, 0, 0, 0, 0, 0, 0
	for _, x := range rs {
		med.Queued += x.Queued
		med.Duplicate += x.Duplicate
		med.Failed += x.Failed
		med.Violations += x.Violations
		med.Messages += x.Messages
		med.Requests += x.Requests
		med.DistinctIDs += x.DistinctIDs
	}
	return med
}

// throughputRatio compares target name's rounds rs with queengate's qg,
// round by round: queengate ÷ the other, or for a fleet (queengate@N)
// the fleet ÷ queengate, so that above 1 always reads "faster". ok is
// false when no round has both throughputs.
func throughputRatio(name string, rs, qg []Result) (ratio Ratio, ok bool) {
	_, isFleet := fleetTarget(name)
	var ratios []float64
	for _, x := range rs {
		for _, q := range qg {
			switch {
			case q.Round != x.Round || x.Throughput <= 0 || q.Throughput <= 0:
			case isFleet:
				ratios = append(ratios, x.Throughput/q.Throughput)
			default:
				ratios = append(ratios, q.Throughput/x.Throughput)
			}
		}
	}
	if len(ratios) == 0 {
		return Ratio{}, false
	}
	lo, hi := math.Inf(1), math.Inf(-1)
	for _, v := range ratios {
		lo, hi = math.Min(lo, v), math.Max(hi, v)
	}
	label := "queengate ÷ " + name
	if isFleet {
		label = name + " ÷ queengate"
	}
	return Ratio{Target: name, Label: label, Min: lo, Median: medianFloat(ratios), Max: hi}, true
}

// rssAllowanceBytes is what a gateway may hold beyond its cache budget
// (the runtime, buffers, connections) in the budget check.
const rssAllowanceBytes = 150 << 20

// budgetChecks holds each gateway round of a run with many partitions to
// the cache's promises: it does not thrash (every hydration is a
// partition's first in the run, or one evicted before) and the gateway's
// memory stays within the budget plus rssAllowanceBytes.
func budgetChecks(results []Result, budgetMB int) []Check {
	var checks []Check
	for _, r := range results {
		if baseName(r.Target) != "queengate" {
			continue
		}
		if r.Hydrations >= 0 && r.Evictions >= 0 {
			checks = append(checks, Check{Target: r.Target, Round: r.Round,
				Name: "hydrations ≤ partitions touched + evictions",
				Figures: fmt.Sprintf("%s ≤ %s + %s", formatCount(r.Hydrations), formatCount(r.PartitionsTouched),
					formatCount(r.Evictions)),
				Met: r.Hydrations <= r.PartitionsTouched+r.Evictions})
		}
		if r.GatewayPeakRSSBytes > 0 {
			limit := int64(budgetMB)<<20 + rssAllowanceBytes
			checks = append(checks, Check{Target: r.Target, Round: r.Round,
				Name: fmt.Sprintf("gateway peak RSS ≤ cache budget + %d MiB", rssAllowanceBytes>>20),
				Figures: fmt.Sprintf("%s MiB ≤ %d + %d MiB", formatMiB(r.GatewayPeakRSSBytes), budgetMB,
					rssAllowanceBytes>>20),
				Met: r.GatewayPeakRSSBytes <= limit})
		}
	}
	return checks
}

func writeOutputs(r *Report, o options, stdout io.Writer) error {
	if err := writeTable(stdout, r); err != nil {
		return err
	}
	write := func(path string, f func(io.Writer, *Report) error) error {
		if path == "" {
			return nil
		}
		if path == "-" {
			return f(stdout, r)
		}
		file, err := os.Create(path)
		if err != nil {
			return err
		}
		if err := f(file, r); err != nil {
			file.Close()
			return err
		}
		return file.Close()
	}
	return errors.Join(write(o.jsonOut, writeJSON), write(o.mdOut, writeMarkdown), write(o.chartOut, writeChartSVG))
}

// machine describes this machine in one line.
func machine() string {
	mem := ""
	if b, err := os.ReadFile("/proc/meminfo"); err == nil {
		for _, line := range strings.Split(string(b), "\n") {
			if rest, ok := strings.CutPrefix(line, "MemTotal:"); ok {
				if kb, err := strconv.ParseInt(strings.Fields(rest)[0], 10, 64); err == nil {
					mem = fmt.Sprintf(", %d GiB", (kb+(1<<19))>>20)
				}
			}
		}
	}
	cpu := ""
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, line := range strings.Split(string(b), "\n") {
			if rest, ok := strings.CutPrefix(line, "model name"); ok {
				cpu = ", " + strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(rest), ":"))
				break
			}
		}
	}
	return fmt.Sprintf("%d cores%s%s, %s/%s, %s", runtime.NumCPU(), cpu, mem, runtime.GOOS, runtime.GOARCH, runtime.Version())
}
