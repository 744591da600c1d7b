// Command queenchaos runs queengate under faults and checks that nothing
// acknowledged is lost, doubled or misplaced: three gateways built from
// this tree, a cluster of three NATS servers, PostgreSQL behind a TCP
// proxy that can freeze and cut, producers that retry like careful
// clients, consumers of three groups (one a consumer per partition,
// whose cycles the gateways serve from their tails), and a verifier that
// reads the log, the groups' cursors and the dead letters back with its
// own SQL. The gateway faults and the failovers strike right after a
// gateway's tail served a cycle (tail.go).
//
// Profiles: short (every fault kind once, back to back, ~1.5 minutes; in
// the test suite),
// long (10 minutes of faults), soak (10 minutes, no faults, throughput
// and memory over time), failover-sync and failover-async (a primary and
// a standby, failovers every 40 s; internal/chaos/world), failover-short (one
// failover; in the test suite). Exit status 1 when the verifier finds a
// violation, or the soak decays. `queenchaos pipeline` runs the
// ack-and-push pipeline under kill -9 instead (pipeline.go).
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	_ "net/http/pprof"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"
)

func main() {
	if isPipelineWorker() {
		os.Exit(pipelineWorkerMain())
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Stdout, os.Stderr); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return
		}
		fmt.Fprintln(os.Stderr, "queenchaos:", err)
		os.Exit(1)
	}
}

const profileNames = "short, long, soak, failover-sync, failover-async or failover-short"

type options struct {
	profile  profile
	bin      string
	dir      string
	jsonOut  string
	mdOut    string
	pprof    string
	minRatio float64
}

func parseOptions(args []string, stderr io.Writer) (options, error) {
	fs := flag.NewFlagSet("queenchaos", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var (
		o        options
		name     = fs.String("profile", "short", profileNames)
		duration = fs.Duration("duration", 0, "producing time (default: the profile's)")
		faults   = fs.String("faults", "", "comma-separated fault kinds, or all (default: the profile's): kill, term, pause, pg-crash, pg-stop, pg-freeze, pg-freeze-cut, nats-restart; with a standby (the failover profiles) failover-kill, failover-stop")
		rate     = fs.Int("rate", 0, "messages per second offered (default: the profile's)")
		seed     = fs.Uint64("seed", 0, "seed of the fault order and the workload (default: the profile's)")
	)
	fs.StringVar(&o.bin, "gateway-bin", "", "queengate binary (default: build it from this repository)")
	fs.StringVar(&o.dir, "dir", "", "folder for PostgreSQL's data and the gateways' logs (default: a temporary one, removed unless the run fails)")
	fs.StringVar(&o.jsonOut, "json", "", "write the figures as JSON to this file")
	fs.StringVar(&o.mdOut, "markdown", "", "write the figures as Markdown to this file")
	fs.StringVar(&o.pprof, "pprof", "", "serve queenchaos's own pprof on this address (to look into the load generator)")
	fs.Float64Var(&o.minRatio, "soak-min-ratio", 0.95, "soak: the last minute's throughput must be at least this share of the first's")
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	p, ok := profiles[*name]
	if !ok {
		return o, fmt.Errorf("--profile %q: %s", *name, profileNames)
	}
	if *duration > 0 {
		p.Duration = *duration
	}
	if *faults != "" {
		kinds, err := parseFaults(*faults)
		if err != nil {
			return o, err
		}
		p.Faults = kinds
	}
	if *rate > 0 {
		p.Load.Rate = *rate
	}
	if *seed > 0 {
		p.Seed = *seed
	}
	o.profile = p
	return o, nil
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) > 0 && args[0] == "pipeline" {
		return runPipelineCommand(ctx, args[1:], stdout, stderr)
	}
	o, err := parseOptions(args, stderr)
	if err != nil {
		return err
	}
	if o.pprof != "" {
		go func() { _ = http.ListenAndServe(o.pprof, nil) }()
	}
	log := func(format string, args ...any) {
		fmt.Fprintf(stderr, "%s queenchaos: %s\n", time.Now().Format("15:04:05.000"), fmt.Sprintf(format, args...))
	}
	dir := o.dir
	if dir == "" {
		if dir, err = os.MkdirTemp("", "queenchaos-"); err != nil {
			return err
		}
	} else if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	if o.bin == "" {
		o.bin = filepath.Join(dir, "queengate")
		log("building queengate")
		if out, err := exec.CommandContext(ctx, "go", "build", "-o", o.bin, "github.com/queengate/queengate/cmd/queengate").CombinedOutput(); err != nil {
			return fmt.Errorf("build queengate: %w\n%s", err, out)
		}
	}
	out, err := runProfile(ctx, o.profile, dir, o.bin, log)
	if err != nil {
		return fmt.Errorf("%w (data and logs kept in %s)", err, dir)
	}
	if err := write(o, out, stdout); err != nil {
		return err
	}
	if verdict := judge(o, out); verdict != nil {
		return fmt.Errorf("%w (data and logs kept in %s)", verdict, dir)
	}
	if o.dir == "" {
		_ = os.RemoveAll(dir)
	}
	return nil
}

// judge is the run's pass or fail: no violation, every fault done, and
// for the soak a flat line.
func judge(o options, out *outcome) error {
	var errs []error
	if n := out.Verifier.Violations(); n > 0 {
		errs = append(errs, fmt.Errorf("the verifier found %d violations: %s", n, strings.Join(out.Verifier.Examples, "; ")))
	}
	for _, f := range out.Faults {
		if len(f.Errors) > 0 {
			errs = append(errs, fmt.Errorf("%s could not be done: %s", f.Kind, strings.Join(f.Errors, "; ")))
		}
	}
	if o.profile.Name == "soak" {
		first, last, ok := soakEnds(o.profile, out)
		if !ok {
			errs = append(errs, errors.New("soak: fewer than two whole minutes measured"))
		} else if float64(last) < o.minRatio*float64(first) {
			errs = append(errs, fmt.Errorf("soak: last minute %d messages, first %d: %.2f×, want at least %.2f×", last, first, float64(last)/float64(first), o.minRatio))
		}
		if settled, last, ok := soakRSS(o.profile, out); ok && float64(last) > maxRSSGrowth*float64(settled) {
			errs = append(errs, fmt.Errorf("soak: gateways' RSS %d MiB at the end, %d MiB once the window had filled: it keeps growing", last>>20, settled>>20))
		}
	}
	return errors.Join(errs...)
}

// soakEnds are the messages of the first and last whole minutes of
// producing.
func soakEnds(p profile, out *outcome) (first, last int64, ok bool) {
	whole := int(p.Duration / time.Minute)
	if whole < 2 || len(out.Minutes) < whole {
		return 0, 0, false
	}
	return out.Minutes[0].Messages, out.Minutes[whole-1].Messages, true
}

// maxRSSGrowth is how much the gateways' memory may still grow between
// the minute after the window first filled and the end of the soak.
const maxRSSGrowth = 1.25

// soakRSS is the largest gateway RSS in the first minute after the window
// has filled (caches at their steady size) and at the last minute.
func soakRSS(p profile, out *outcome) (settled, last int64, ok bool) {
	whole := int(p.Duration / time.Minute)
	at := p.Window/60 + 1
	if at >= whole-1 || len(out.Minutes) < whole {
		return 0, 0, false
	}
	return slices.Max(out.Minutes[at].RSSBytes), slices.Max(out.Minutes[whole-1].RSSBytes), true
}

func write(o options, out *outcome, stdout io.Writer) error {
	md := markdown(o, out)
	fmt.Fprint(stdout, md)
	if o.mdOut != "" {
		if err := os.WriteFile(o.mdOut, []byte(md), 0o644); err != nil {
			return err
		}
	}
	if o.jsonOut != "" {
		return writeJSON(o.jsonOut, out)
	}
	return nil
}

func writeJSON(path string, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, append(b, '\n'), 0o644)
}

func markdown(o options, out *outcome) string {
	var b strings.Builder
	l := out.Load
	fmt.Fprintf(&b, "## queenchaos %s (%v)\n\n", out.Profile, out.Elapsed.Round(time.Second))
	fmt.Fprintf(&b, "%d gateways, %d NATS servers, %s; %d producers offering %d msg/s in requests of %d, %.0f%% repeats, %v request timeout.\n\n",
		o.profile.Gateways, o.profile.NATSNodes, o.profile.Replication, l.Producers, l.Rate, l.Batch, 100*l.RetryShare, l.Timeout)
	if len(out.Faults) > 0 {
		b.WriteString("| fault | count | longest gap, all producers | longest gap, one producer | median producer's longest gap | longest wait for an answer | failed: not stored | failed: unknown | definite | timeouts | refused | struck a tail that had served |\n")
		b.WriteString("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|\n")
		for _, f := range out.Faults {
			fmt.Fprintf(&b, "| %s | %d | %s | %s | %s | %s | %d | %d | %.0f%% | %d | %d | %s |\n", f.Kind, f.Count,
				seconds(f.LongestFleetGap), seconds(f.LongestProducerGap), seconds(f.MedianProducerGap), seconds(f.LongestWait),
				f.FailedNotStored, f.FailedUnknown, 100*f.DefiniteShare(), f.Timeouts, f.Refused, tailCell(f))
		}
		b.WriteString("\n")
		writeTails(&b, out)
	}
	v := out.Verifier
	fmt.Fprintf(&b, "Verifier: %d ids sent, %d answered as stored, %d stored (%d messages in the log); "+
		"lost %d, doubled %d, wrong offset %d, duplicate not naming the first %d, data mismatch %d, phantom %d, offset holes %d, "+
		"answered for an offset no failover cut and not in the log %d. "+
		"%d never answered as stored when the drain ended; %d retries.\n",
		v.Sent, v.Answered, v.Stored, v.Rows, v.Lost, v.Doubled, v.WrongOffset, v.DuplicateNotFirst, v.DataMismatch, v.Phantom, v.Holes,
		v.Vanished, out.Unanswered, out.Retries)
	writeFailovers(&b, out)
	if c := v.Consume; c != nil {
		fmt.Fprintf(&b, "\nConsumers: %v; %d pops failed.\n\n", o.profile.Consume, out.PopFailures)
		b.WriteString("| group | leases | deliveries | messages | redeliveries | dead letters | poison dead-lettered | unsettled at the end |\n" +
			"|---|---:|---:|---:|---:|---:|---:|---:|\n")
		for _, g := range c.Groups {
			fmt.Fprintf(&b, "| %s | %d | %d | %d | %d | %d | %d | %d |\n", g.Group, g.Leases, g.Deliveries, g.Messages, g.Redeliveries, g.DeadLetters,
				g.Poison, g.Unsettled)
		}
		fmt.Fprintf(&b, "\nConsumer verifier: unconsumed %d, undone %d, double-leased %d, dead-lettered twice %d, skipped %d, misdelivered %d, "+
			"poison not dead-lettered %d.\n",
			c.Unconsumed, c.Undone, c.DoubleLeased, c.DeadLetteredTwice, c.Skipped, c.Misdelivered, c.PoisonKept)
	}
	if len(out.Minutes) > 1 {
		b.WriteString("\n| minute | msg/s answered | gateways' RSS (MiB) |\n|---:|---:|---|\n")
		for i, m := range out.Minutes {
			rss := make([]string, len(m.RSSBytes))
			for j, r := range m.RSSBytes {
				rss[j] = fmt.Sprintf("%.0f", float64(r)/(1<<20))
			}
			fmt.Fprintf(&b, "| %d | %.0f | %s |\n", i+1, float64(m.Messages)/60, strings.Join(rss, ", "))
		}
	}
	if o.profile.Name == "soak" {
		if first, last, ok := soakEnds(o.profile, out); ok {
			fmt.Fprintf(&b, "\nLast whole minute ÷ first: %.2f×.", float64(last)/float64(first))
		}
		if settled, last, ok := soakRSS(o.profile, out); ok {
			fmt.Fprintf(&b, " Largest gateway RSS at the end ÷ the minute after the window filled: %.2f×.", float64(last)/float64(settled))
		}
		b.WriteString("\n")
	}
	return b.String()
}

func seconds(d time.Duration) string { return fmt.Sprintf("%.2f s", d.Seconds()) }
