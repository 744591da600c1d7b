package main

import (
	"context"
	"errors"
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
)

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
