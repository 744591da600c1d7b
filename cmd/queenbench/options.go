package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"

	queengate "github.com/queengate/queengate"
	"github.com/queengate/queengate/internal/bench"
	"github.com/queengate/queengate/internal/bench/sidebyside"
	"github.com/queengate/queengate/model"
)

var targetNames = []string{"queengate", "naive", "jetstream", "ceiling"}

// exactTargets deduplicate, so their runs are checked for exactness; the
// ceiling writes every message by definition.
var exactTargets = map[string]bool{"queengate": true, "naive": true, "jetstream": true}

// window0 is queengate itself with every queue's window set to 0: what
// deduplication costs, measured in the same run (not part of "all").
const window0 = "window0"

// headers3 is queengate itself with three small headers on every
// message: what headers cost, measured in the same run as queengate
// without (not part of "all").
const headers3 = "headers3"

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
	w          bench.Workload
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
	consume    sidebyside.ConsumeOptions
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
		scenario = fs.String("scenario", "unique", "preset workload: "+strings.Join(scenarioNames(), ", "))
		target   = fs.String("target", "queengate", "target to measure: "+strings.Join(targetNames, ", "))
		compare  = fs.String("compare", "", "comma-separated targets (or \"all\") to run back to back, alternating, and compare to queengate")
		admin    = fs.String("admin", "", "comma-separated admin HTTP addresses of the gateways (for their /metrics), with --nats-url")
		w        bench.Workload
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
	preset, ok := findScenario(*scenario)
	if !ok {
		return o, usageError{fmt.Errorf("--scenario %q: one of %s", *scenario, strings.Join(scenarioNames(), ", "))}
	}
	preset.Scenario = *scenario
	overridePreset(fs, &preset, w)
	preset.PayloadBytes, preset.FlushSize, preset.Linger = w.PayloadBytes, w.FlushSize, linger
	preset.FireAndForget, preset.Seed, preset.Duration = w.FireAndForget, w.Seed, duration
	preset.JSPublish, preset.Headers = w.JSPublish, w.Headers
	preset.CacheMB, preset.Replication = w.CacheMB, w.Replication
	preset.Gateways = max(preset.Gateways, 1)
	o.w = preset
	batches, err := parseConsumeBatches(*consumeBatches)
	if err != nil {
		return o, err
	}
	o.consume.Batches = batches
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
  queenbench --self --scenario unique --compare queengate,headers3,jetstream
                                     what three headers a message cost, beside JetStream
  queenbench --self --scenario sessions --compare queengate,jetstream --js-publish
                                     JetStream clients' publishes, into each
  queenbench --self --replication sync                push through a primary and a synchronous standby
  queenbench --self --scenario read --replication async   read from a standby, push to the primary
  queenbench --nats-url nats://host:4222 --admin host:6632 ...   a running gateway

Scenarios: %s. Targets: %s, %s (queengate with the window at 0) and %s
(queengate with three headers on every message).

`, strings.Join(scenarioNames(), ", "), strings.Join(targetNames, ", "), window0, headers3)
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
func defineWorkloadFlags(fs *flag.FlagSet, w *bench.Workload, linger, duration *time.Duration) {
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
	fs.StringVar(&w.Replication, "replication", "", "PostgreSQL replication (--self): "+strings.Join(bench.ReplicationModes, ", ")+
		"; each runs a primary with synchronous_commit on, and a standby on this machine but for none (the gateways read from it: --pg-read-url) (default: the single server, synchronous_commit off)")
	fs.IntVar(&w.CacheMB, "cache-mb", 0, "gateways' dedup cache budget in MiB (--self; default: QUEEN_DEDUP_CACHE_MB, else the gateway's default)")
	fs.Int64Var(&w.Prefill, "prefill", -1, "unique messages pushed before the measured run")
	fs.BoolVar(&w.FireAndForget, "fire-and-forget", false, "publish without reply subjects and read the ack subjects (queengate)")
	fs.BoolVar(&w.JSPublish, "js-publish", false, "queengate's producers publish as JetStream's do: each message with a JetStream client's PublishMsgAsync to <prefix>.jetstream.<queue>.<partition>")
	fs.IntVar(&w.Headers, "headers", 0, "small headers on every message (a push's \"headers\", a publish's NATS headers)")
	fs.Int64Var(&w.Seed, "seed", 1, "seed of the generated workload")
	fs.DurationVar(&w.RequestTimeout, "timeout", 0, "longest a producer waits for one answer (default: the scenario's, else 1m)")
	fs.BoolVar(&w.RetryFailed, "retry-failed", false, "resend a failed or timed-out request with the same ids until it is answered, as a careful producer does")
}

// defineReadConsumeFlags defines the flags of the read and consume
// scenarios; it returns --consume-batch, parsed by parseConsumeBatches.
func defineReadConsumeFlags(fs *flag.FlagSet, o *options) *string {
	fs.DurationVar(&o.readPushTime, "read-push-time", 10*time.Second, "read and consume scenarios: how long pushes are measured alone, then beside readers or consumers")
	consumeBatches := fs.String("consume-batch", "100", "consume scenario: comma-separated batch sizes (pop max, fetch size), each measured")
	fs.IntVar(&o.consume.Partitions, "consume-partitions", 0, "consume scenario: also consume the same messages stored over this many partitions (JetStream: subjects)")
	fs.IntVar(&o.consume.PopPartitions, "consume-pop-partitions", 10, "consume scenario: partitions each pop of the --consume-partitions shape may lease (a pop's \"partitions\"; 1: one, as before it existed)")
	fs.IntVar(&o.consume.Fanout, "consume-fanout", 0, "consume scenario: also this many groups (JetStream: durable consumers) each reading everything")
	fs.DurationVar(&o.consume.RoundTime, "consume-round-time", time.Minute, "consume scenario: longest a round may take; one cut short reports what it delivered until then")
	fs.IntVar(&o.consume.IdlePollers, "idle-pollers", 0, "consume scenario: long-polling consumers waiting while nothing arrives, for the idle figures (0: none)")
	fs.DurationVar(&o.consume.IdleTime, "idle-time", 10*time.Second, "consume scenario: each idle window measured, without pollers then with them")
	fs.DurationVar(&o.consume.IdleSettle, "idle-settle", 5*time.Second, "consume scenario: from starting the idle pollers to measuring (their first pops served)")
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
func overridePreset(fs *flag.FlagSet, preset *bench.Workload, w bench.Workload) {
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
	for _, t := range append(targetNames, window0, headers3) {
		known[t] = true
	}
	for _, t := range o.targets {
		if _, fleet := bench.FleetSize(t); fleet {
			if !o.self {
				bad("target %s runs a fleet of gateways: only with --self", t)
			}
			continue
		}
		if !known[t] {
			bad("target %q: one of %s, %s, %s, or queengate@N (N gateways, 1-16)", t, strings.Join(targetNames, ", "), window0, headers3)
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
	if c := o.consume; c.PopPartitions < 1 || c.PopPartitions > queengate.MaxPopPartitions {
		bad("--consume-pop-partitions %d: 1 to %d", c.PopPartitions, queengate.MaxPopPartitions)
	}
	if c := o.consume; c.Partitions < 0 || c.Fanout < 0 || c.IdlePollers < 0 || c.IdleTime <= 0 || c.IdleSettle < 0 || c.RoundTime <= 0 {
		bad("--consume-partitions %d, --consume-fanout %d, --idle-pollers %d: 0 (none) or more; --idle-time %v, --consume-round-time %v: positive; --idle-settle %v: 0 or more",
			c.Partitions, c.Fanout, c.IdlePollers, c.IdleTime, c.RoundTime, c.IdleSettle)
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
	if w.JSPublish && w.FireAndForget {
		bad("--js-publish waits for PubAcks as JetStream's producers do: not with --fire-and-forget")
	}
	if w.Headers < 0 || w.Headers > model.MaxHeaders {
		bad("--headers %d: from 0 to %d", w.Headers, model.MaxHeaders)
	}
	o.checkReplication(bad)
}

// checkReplication checks --replication: a known mode, and a PostgreSQL
// queenbench starts, for a scenario whose report says the mode (read
// says it, and reads from the standby; consume does not yet).
func (o options) checkReplication(bad func(string, ...any)) {
	mode := o.w.Replication
	if mode == "" {
		return
	}
	if !contains(bench.ReplicationModes, mode) {
		bad("--replication %q: one of %s", mode, strings.Join(bench.ReplicationModes, ", "))
	}
	if !o.self || o.pgURL != "" {
		bad("--replication starts its own PostgreSQL servers: give --self, without --pg-url (or QUEEN_PG_URL)")
	}
	if o.w.Scenario == "consume" {
		bad("--replication: not with --scenario %s", o.w.Scenario)
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
