package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/queengate/queengate/internal/chaos/verify"
	"github.com/queengate/queengate/internal/pgcluster"
)

// replication is the PostgreSQL a profile runs: one server behind the
// proxy, or a primary and a streaming standby that the failover faults
// swap, the gateways following with a multi-host read-write URL.
type replication struct {
	Standby bool
	// Sync makes the primary commit synchronously with the standby, with
	// synchronous_commit Commit (on or remote_apply).
	Sync   bool
	Commit string
}

func (r replication) String() string {
	switch {
	case !r.Standby:
		return "one PostgreSQL behind a proxy"
	case r.Sync:
		return fmt.Sprintf("a PostgreSQL primary and a synchronous standby (synchronous_commit %s)", r.Commit)
	default:
		return "a PostgreSQL primary and an asynchronous standby"
	}
}

// failoverRec is one failover, done as a failover manager does it.
type failoverRec struct {
	Clean    bool      `json:"clean"`    // the primary was shut down (fast), not killed -9
	Stopping time.Time `json:"stopping"` // the primary was told to stop, or killed
	Stopped  time.Time `json:"stopped"`  // it had exited
	Promoted time.Time `json:"promoted"` // the standby took writes
	Attached time.Time `json:"attached"` // the old primary streamed again, as the standby
	Rewound  bool      `json:"rewound"`  // with pg_rewind; false: a new base backup
	// Kept is what the standby held at promotion (asynchronous
	// replication only): the queue's log end by partition.
	Kept map[string]int64 `json:"-"`
}

// startReplicated starts a primary and a standby streaming from it.
func (w *world) startReplicated(ctx context.Context) error {
	opts := pgcluster.Options{Dir: filepath.Join(w.dir, "pg-a"), Name: "node_a", Settings: map[string]string{"max_connections": "200"}}
	var err error
	if w.pg, err = pgcluster.StartPrimary(ctx, opts); err != nil {
		return err
	}
	w.standby, err = pgcluster.StartStandby(ctx, w.pg, pgcluster.StandbyOptions{Dir: filepath.Join(w.dir, "pg-b"), Name: "node_b",
		Sync: w.repl.Sync, Commit: w.repl.Commit})
	if err != nil {
		return err
	}
	w.pgURL = w.pg.URL("postgres")
	// The hosts in a fixed order: pgx tries each and keeps the one that
	// takes writes, wherever the primary is now.
	w.gatewayPG = pgcluster.MultiHostURL("postgres", "read-write", w.pg, w.standby)
	return nil
}

// failover stops the primary (clean: a fast shutdown; otherwise kill -9
// of all its processes), promotes the standby, and re-attaches the old
// primary as the new standby with pg_rewind (a new base backup when that
// fails), naming it the synchronous standby with synchronous
// replication. The world's primary is the promoted one after it.
func (w *world) failover(ctx context.Context, clean bool) error {
	rec := failoverRec{Clean: clean, Stopping: time.Now()}
	old, next := w.pg, w.standby
	if clean {
		old.Stop()
	} else {
		old.Kill()
	}
	rec.Stopped = time.Now()
	if !w.repl.Sync {
		// What the standby received is what survives: it replays all of
		// it before it takes writes.
		if err := waitReplayedReceived(ctx, next); err != nil {
			return err
		}
		var err error
		if rec.Kept, err = verify.LogEnds(ctx, next.URL("postgres"), w.queue); err != nil {
			return err
		}
	}
	if err := next.Promote(ctx); err != nil {
		return err
	}
	rec.Promoted = time.Now()
	w.pg, w.standby, w.pgURL = next, old, next.URL("postgres")
	defer func() { w.failovers = append(w.failovers, rec) }()
	var err error
	if rec.Rewound, err = old.Rewind(ctx, next); err != nil {
		return fmt.Errorf("re-attach the old primary: %w", err)
	}
	if w.repl.Sync {
		if err := next.SetSync(ctx, w.repl.Commit, old.Name()); err != nil {
			return err
		}
	}
	rec.Attached = time.Now()
	w.log("failover: primary %s, promoted %v after the old one was stopped, old one re-attached (rewound %v) %v later",
		next.Name(), rec.Promoted.Sub(rec.Stopping).Round(time.Millisecond), rec.Rewound, rec.Attached.Sub(rec.Promoted).Round(time.Millisecond))
	return nil
}

// waitReplayedReceived waits until a standby whose primary is gone has
// replayed all the WAL it received.
func waitReplayedReceived(ctx context.Context, c *pgcluster.Cluster) error {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	conn, err := pgx.Connect(ctx, c.URL("postgres"))
	if err != nil {
		return err
	}
	defer conn.Close(ctx)
	for {
		var done bool
		err := conn.QueryRow(ctx, `SELECT coalesce(pg_last_wal_replay_lsn() >= pg_last_wal_receive_lsn(), true)`).Scan(&done)
		if err != nil || done {
			return err
		}
		select {
		case <-ctx.Done():
			return errors.New("the standby did not replay what it received")
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// verifierFailovers are the failovers as the verifier reads them, under
// asynchronous replication; nil with synchronous replication, where a
// failover must lose nothing and the verifier is the strict one.
func (w *world) verifierFailovers() []verify.Failover {
	if w.repl.Sync {
		return nil
	}
	out := make([]verify.Failover, len(w.failovers))
	for i, f := range w.failovers {
		out[i] = verify.Failover{Stopping: f.Stopping, Stopped: f.Stopped, Promoted: f.Promoted, Kept: f.Kept}
	}
	return out
}

// gatewayJournal is the gateways' journal of acknowledged messages
// (ingest.Config.Journal's default: the suite leaves it).
const gatewayJournal = 1 << 18

// reportedLost reads what the gateways reported lost to failovers from
// their logs; nil with synchronous replication, where the strict
// verifier finds any loss.
func (w *world) reportedLost() (*verify.ReportedLost, error) {
	if w.repl.Sync || len(w.failovers) == 0 {
		return nil, nil
	}
	var logs []io.Reader
	for _, g := range w.gateways {
		f, err := os.Open(filepath.Join(w.dir, fmt.Sprintf("gateway-%d.log", g.index))) // gatewayProc.start's
		if err != nil {
			return nil, err
		}
		defer f.Close()
		logs = append(logs, f)
	}
	return verify.ReadReportedLost(gatewayJournal, logs...)
}

// failoverFigures are what producers saw across one failover.
type failoverFigures struct {
	failoverRec
	// Promotion is from the old primary's stop to the new one's first
	// writes: what the failover manager took.
	Promotion time.Duration `json:"promotionNs"`
	// LongestFleetGap is the longest time without a successful answer to
	// any producer from the stop until afterFault past the re-attachment;
	// LongestProducerGap the longest one producer went without.
	LongestFleetGap    time.Duration `json:"longestFleetGapNs"`
	LongestProducerGap time.Duration `json:"longestProducerGapNs"`
}

func figuresByFailover(failovers []failoverRec, events []event, producers int) []failoverFigures {
	out := make([]failoverFigures, len(failovers))
	for i, f := range failovers {
		to := f.Attached
		if to.IsZero() {
			to = f.Promoted
		}
		fleet, perProducer := gaps(events, producers, f.Stopping, to.Add(afterFault))
		out[i] = failoverFigures{failoverRec: f, Promotion: f.Promoted.Sub(f.Stopping), LongestFleetGap: fleet}
		for _, g := range perProducer {
			out[i].LongestProducerGap = max(out[i].LongestProducerGap, g)
		}
	}
	return out
}

// failoverCounters are the gateways' counters the failover figures
// report: the cache's full hydrations and rebuilds (a gateway that sees a
// changed primary rehydrates), and the messages a gateway reports lost
// to a failover, once the gateway has that counter.
var failoverCounters = []string{"queengate_dedup_hydrations_total", "queengate_dedup_rebuilds_total", lostCounter}

const lostCounter = "queengate_failover_lost_messages_total"

// gatewayCounters sums the named counters over the gateways' /metrics
// (every label set); a counter no gateway exposes is absent.
func (w *world) gatewayCounters(ctx context.Context, names []string) map[string]float64 {
	out := map[string]float64{}
	for _, g := range w.gateways {
		g.mu.Lock()
		admin := g.admin
		g.mu.Unlock()
		body, err := httpGet(ctx, "http://"+admin+"/metrics")
		if err != nil {
			w.log("gateway %d metrics: %v", g.index, err)
			continue
		}
		for _, line := range strings.Split(body, "\n") {
			name, rest, ok := strings.Cut(line, " ")
			if !ok || strings.HasPrefix(line, "#") {
				continue
			}
			name, _, _ = strings.Cut(name, "{")
			if v, err := strconv.ParseFloat(strings.TrimSpace(rest), 64); err == nil && slices.Contains(names, name) {
				out[name] += v
			}
		}
	}
	return out
}

func httpGet(ctx context.Context, url string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return "", err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	return string(b), err
}

// writeFailovers adds the failovers' figures to the report: each
// failover's promotion and longest time without answers, what the
// failovers lost (asynchronous replication), the gateways' counters.
func writeFailovers(b *strings.Builder, out *outcome) {
	if len(out.Failovers) > 0 {
		b.WriteString("\n| failover | how | promotion (stop → writes) | longest gap, all producers | longest gap, one producer | re-attached | re-attach time |\n")
		b.WriteString("|---:|---|---:|---:|---:|---|---:|\n")
		for i, f := range out.Failovers {
			how, attach := "kill -9", "pg_rewind"
			if f.Clean {
				how = "fast shutdown"
			}
			if !f.Rewound {
				attach = "base backup"
			}
			attachTime := "failed"
			if !f.Attached.IsZero() {
				attachTime = seconds(f.Attached.Sub(f.Promoted))
			}
			fmt.Fprintf(b, "| %d | %s | %s | %s | %s | %s | %s |\n", i+1, how, seconds(f.Promotion),
				seconds(f.LongestFleetGap), seconds(f.LongestProducerGap), attach, attachTime)
		}
	}
	if l := out.Verifier.Failover; l != nil {
		fmt.Fprintf(b, "\nLost to asynchronous replication over %d failovers (counted, not violations): %d ids answered as stored and absent from the log, "+
			"%d answers naming an offset a failover cut, %d of them an offset now holding another message; %d deliveries of a cut offset, %d acks, %d leases, %d dead-letter moves.\n",
			l.Failovers, l.Lost, l.LostAnswers, l.Reused, l.LostDeliveries, l.LostAcks, l.LostLeases, l.LostMoves)
		fmt.Fprintf(b, "\nReported by the gateways' logs: %d messages lost, %d distinct messageIds named; the verifier finds %d distinct messageIds answered at an offset a failover cut that does not hold them now: "+
			"%d no gateway reported (violations), %d older than the gateways' journal, %d possibly in reports naming only their first 1000; %d reports the gateways could not make.\n",
			l.Reported, l.ReportedIDs, l.LostIDs, out.Verifier.Unreported, l.BeyondJournal, l.InUnnamedReports, l.Unchecked)
	}
	if len(out.Counters) > 0 {
		reported := "not exposed by these gateways"
		if n, ok := out.Counters[lostCounter]; ok {
			reported = strconv.FormatFloat(n, 'f', 0, 64)
		}
		fmt.Fprintf(b, "\nGateways' counters at the end: %.0f cache hydrations, %.0f rebuilds; messages reported lost to a failover (%s): %s.\n",
			out.Counters["queengate_dedup_hydrations_total"], out.Counters["queengate_dedup_rebuilds_total"], lostCounter, reported)
	}
}
