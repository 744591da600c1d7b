package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/queengate/queengate/internal/bench"
	"github.com/queengate/queengate/internal/bench/proc"
	"github.com/queengate/queengate/internal/bench/report"
	"github.com/queengate/queengate/internal/bench/sidebyside"
	"github.com/queengate/queengate/internal/bench/target"
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
	targets, meter, cleanup, err := openTargets(ctx, o, logf)
	defer cleanup()
	if err != nil {
		return err
	}
	rep := &bench.Report{Machine: machine(), Command: "queenbench " + strings.Join(args, " "), Workload: o.w}
	if err := runRounds(ctx, o, targets, rep, logf, progress, meter); err != nil {
		return err
	}
	report.Summarise(rep, o.targets)
	if o.w.BudgetChecks {
		rep.Checks = report.BudgetChecks(rep.Results, o.w.CacheBudgetMB())
	}
	if err := writeOutputs(rep, o, stdout); err != nil {
		return err
	}
	return exactnessViolations(rep.Results)
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
	so := sidebyside.Options{W: o.w, Rounds: o.rounds, Prefix: o.prefix, PGURL: o.pgURL, GatewayBin: o.gatewayBin,
		JSONOut: o.jsonOut, PushTime: o.readPushTime, Consume: o.consume}
	if o.w.Scenario == "read" {
		return sidebyside.RunRead(ctx, so, stdout, logf)
	}
	return sidebyside.RunConsume(ctx, so, stdout, logf)
}

// runRounds runs every target o.rounds times, adding each run's result to
// rep.
func runRounds(ctx context.Context, o options, targets []bench.Target, rep *bench.Report, logf func(string, ...any), progress io.Writer, meter pgMeter) error {
	for round := 1; round <= o.rounds; round++ {
		// Alternate the order each round so that drift (a filling disk,
		// a warming cache) does not always favour the same target.
		order := make([]bench.Target, len(targets))
		for i := range targets {
			order[i] = targets[(i+round-1)%len(targets)]
		}
		for _, t := range order {
			logf("round %d/%d: %s, scenario %s", round, o.rounds, t.Name(), o.w.Scenario)
			res, err := runOnce(ctx, t, o.w, round, progress, meter)
			if err != nil {
				return fmt.Errorf("%s, round %d: %w", t.Name(), round, err)
			}
			rep.Results = append(rep.Results, res)
		}
	}
	return nil
}

// exactnessViolations is the violationError naming every run that broke
// exactness, or nil.
func exactnessViolations(results []bench.Result) error {
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

// pgMeter reads what queenbench sees of the PostgreSQL it runs, so far:
// the CPU its automatic vacuums and analyzes reported, and the CPU of
// the primary's processes and (with --replication) the standby's.
type pgMeter struct {
	autovac  func() (float64, bool)
	postgres func() (primary, standby float64, ok bool)
}

// openTargets starts or connects what the targets need; cleanup releases
// it (safe to call on error).
func openTargets(ctx context.Context, o options, logf func(string, ...any)) (targets []bench.Target, meter pgMeter, cleanup func(), err error) {
	var closers []func()
	meter = pgMeter{
		autovac:  func() (float64, bool) { return 0, false },
		postgres: func() (float64, float64, bool) { return 0, 0, false },
	}
	cleanup = func() {
		for i := len(closers) - 1; i >= 0; i-- {
			closers[i]()
		}
	}
	pgURL := o.pgURL
	natsURL, admin := o.natsURL, o.adminAddrs
	var fleet *proc.Self
	if o.self {
		env, err := proc.StartSelf(ctx, o.w, o.pgURL, o.gatewayBin, o.prefix, logf)
		if err != nil {
			return nil, meter, cleanup, err
		}
		closers = append(closers, env.Stop)
		meter = pgMeter{autovac: env.AutovacuumCPU, postgres: env.PostgresCPU}
		pgURL, natsURL, fleet = env.PGURL, env.NATSURL, env
	}
	for _, name := range o.targets {
		var (
			t   bench.Target
			err error
		)
		n, isFleet := bench.FleetSize(name)
		switch {
		case name == "queengate" || isFleet:
			if !isFleet {
				n = o.w.Gateways
			}
			t, err = target.NewQueengate(ctx, name, n, fleet, natsURL, o.prefix, pgURL, admin)
		case name == window0:
			var qt *target.Queengate
			if qt, err = target.NewQueengate(ctx, window0, o.w.Gateways, fleet, natsURL, o.prefix, pgURL, admin); err == nil {
				qt.NoWindow = true
				t = qt
			}
		case name == headers3:
			var qt *target.Queengate
			if qt, err = target.NewQueengate(ctx, headers3, o.w.Gateways, fleet, natsURL, o.prefix, pgURL, admin); err == nil {
				qt.Headers = 3
				t = qt
			}
		case name == "naive":
			t, err = target.NewNaive(ctx, pgURL)
		case name == "ceiling":
			t, err = target.NewCeiling(ctx, pgURL)
		case name == "jetstream":
			var dir string
			if dir, err = os.MkdirTemp("", "queenbench-js-"); err == nil {
				closers = append(closers, func() { _ = os.RemoveAll(dir) })
				t, err = target.NewJetStream(ctx, filepath.Join(dir, "store"))
			}
		}
		if err != nil {
			return nil, meter, cleanup, fmt.Errorf("%s: %w", name, err)
		}
		closers = append(closers, func() { _ = t.Close() })
		targets = append(targets, t)
	}
	return targets, meter, cleanup, nil
}

// runOnce is one measured run of one target: set up, prefill (untimed),
// run, and collect figures and the exactness verdict.
func runOnce(ctx context.Context, t bench.Target, w bench.Workload, round int, progress io.Writer, meter pgMeter) (bench.Result, error) {
	w.RunID = fmt.Sprintf("%x-%d", time.Now().UnixNano()&0xffffffffff, round)
	if err := t.Setup(ctx, w); err != nil {
		return bench.Result{}, fmt.Errorf("setup: %w", err)
	}
	g := newGenerator(w, w.RunID, w.Total)
	var prefillExact *exactness
	if w.Prefill > 0 {
		var err error
		if prefillExact, err = prefill(ctx, t, w, g, progress); err != nil {
			return bench.Result{}, err
		}
	}
	before, err := t.Figures(ctx)
	if err != nil {
		return bench.Result{}, fmt.Errorf("figures: %w", err)
	}
	avBefore, _ := meter.autovac()
	primaryBefore, standbyBefore, _ := meter.postgres()
	var deadline time.Time
	if w.Duration > 0 {
		deadline = time.Now().Add(w.Duration)
	}
	res, exact, err := drive(ctx, t, g, deadline, progress)
	if err != nil {
		return bench.Result{}, err
	}
	after, err := t.Figures(ctx)
	if err != nil {
		return bench.Result{}, fmt.Errorf("figures: %w", err)
	}
	res.Round = round
	res.PartitionsTouched = g.partitionsTouched()
	res.AutovacuumCPUPerMillion = -1
	if avAfter, ok := meter.autovac(); ok && res.Messages > 0 {
		res.AutovacuumCPUPerMillion = (avAfter - avBefore) / float64(res.Messages) * 1e6
	}
	res.PostgresCPUPerMillion = -1
	if primaryAfter, standbyAfter, ok := meter.postgres(); ok && res.Messages > 0 {
		res.PrimaryCPUPerMillion = (primaryAfter - primaryBefore) / float64(res.Messages) * 1e6
		res.StandbyCPUPerMillion = (standbyAfter - standbyBefore) / float64(res.Messages) * 1e6
		res.PostgresCPUPerMillion = res.PrimaryCPUPerMillion + res.StandbyCPUPerMillion
	}
	if prefillExact != nil {
		exact.merge(prefillExact)
	}
	if err := judgeExactness(ctx, t, w, &res, exact); err != nil {
		return bench.Result{}, err
	}
	if res.Messages > 0 {
		res.CPUSecondsPerMillion = (after.ServerCPUSeconds - before.ServerCPUSeconds) / float64(res.Messages) * 1e6
	}
	copyTargetFigures(&res, after)
	return res, nil
}

// prefill pushes w.Prefill unique messages, untimed, to the queues of the
// measured run's generator g, and returns what they were answered.
func prefill(ctx context.Context, t bench.Target, w bench.Workload, g *generator, progress io.Writer) (*exactness, error) {
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
	if m, ok := t.(interface{ MarkCounters(context.Context) error }); ok {
		if err := m.MarkCounters(ctx); err != nil {
			return nil, err
		}
	}
	return exact, nil
}

// judgeExactness sets res's distinct ids and exactness violations.
func judgeExactness(ctx context.Context, t bench.Target, w bench.Workload, res *bench.Result, exact *exactness) error {
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
	if !exactTargets[bench.BaseName(t.Name())] {
		res.Violations = 0 // no deduplication by definition: nothing to check
	}
	return nil
}

// copyTargetFigures copies into res what the target reported of itself
// after the run.
func copyTargetFigures(res *bench.Result, after bench.Figures) {
	res.PeakRSSBytes, res.GatewayPeakRSSBytes = after.PeakRSSBytes, after.GatewayPeakRSSBytes
	res.ProbeSkippedShare, res.ProbeNarrowedShare = after.ProbeSkippedShare, after.ProbeNarrowedShare
	res.UnrolledShare, res.CacheBytesPerHash = after.UnrolledShare, after.CacheBytesPerHash
	res.CacheBytesPerEntry = after.CacheBytesPerEntry
	res.MeanFrame, res.Hydrations, res.Fills = after.MeanFrame, after.Hydrations, after.Fills
	res.StoredBytesPerMessage = after.StoredBytesPerMessage
	res.Evictions, res.Suppressed, res.Births = after.Evictions, after.Suppressed, after.Births
}

// answersIncomplete reports whether some answer may be missing: retries
// of failed requests, failures, or a gateway killed on purpose.
func answersIncomplete(w bench.Workload, res bench.Result) bool {
	return w.RetryFailed || w.KillAt > 0 || res.Failed > 0 || res.Retries > 0
}

type storedIDser interface {
	StoredIDs(context.Context) (distinct, doubled int64, err error)
	CanSayWhatItStored() bool
}

// canSayWhatItStored: the target reads back its store (queengate with a
// PostgreSQL URL).
func canSayWhatItStored(t bench.Target) bool {
	s, ok := t.(storedIDser)
	return ok && s.CanSayWhatItStored()
}

// storedVerdict counts exactness violations when answers may have been
// lost: ids answered queued more than once, ids stored more than once, and
// ids answered (each was, in the end) but not stored.
func storedVerdict(ctx context.Context, t bench.Target, exact *exactness) (int64, error) {
	s, ok := t.(storedIDser)
	if !ok {
		return 0, fmt.Errorf("%s cannot say what it stored", t.Name())
	}
	stored, doubled, err := s.StoredIDs(ctx)
	if err != nil {
		return 0, err
	}
	answered, queuedTwice := exact.queuedTwice()
	return queuedTwice + doubled + max(answered-stored, 0), nil
}

func writeOutputs(r *bench.Report, o options, stdout io.Writer) error {
	if err := report.WriteTable(stdout, r); err != nil {
		return err
	}
	write := func(path string, f func(io.Writer, *bench.Report) error) error {
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
	return errors.Join(write(o.jsonOut, report.WriteJSON), write(o.mdOut, report.WriteMarkdown), write(o.chartOut, report.WriteChartSVG))
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
