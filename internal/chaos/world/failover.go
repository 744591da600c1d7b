package world

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/queengate/queengate/internal/chaos/verify"
	"github.com/queengate/queengate/internal/pgcluster"
)

// Replication is the PostgreSQL a profile runs: one server behind the
// proxy, or a primary and a streaming standby that the failover faults
// swap, the gateways following with a multi-host read-write URL.
type Replication struct {
	Standby bool
	// Sync makes the primary commit synchronously with the standby, with
	// synchronous_commit Commit (on or remote_apply).
	Sync   bool
	Commit string
}

func (r Replication) String() string {
	switch {
	case !r.Standby:
		return "one PostgreSQL behind a proxy"
	case r.Sync:
		return fmt.Sprintf("a PostgreSQL primary and a synchronous standby (synchronous_commit %s)", r.Commit)
	default:
		return "a PostgreSQL primary and an asynchronous standby"
	}
}

// Failover is one failover, done as a failover manager does it.
type Failover struct {
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

// Failovers are the failovers done so far, in order.
func (w *World) Failovers() []Failover { return w.failovers }

// startReplicated starts a primary and a standby streaming from it.
func (w *World) startReplicated(ctx context.Context) error {
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

// Failover stops the primary (clean: a fast shutdown; otherwise kill -9
// of all its processes), promotes the standby, and re-attaches the old
// primary as the new standby with pg_rewind (a new base backup when that
// fails), naming it the synchronous standby with synchronous
// replication. The world's primary is the promoted one after it.
func (w *World) Failover(ctx context.Context, clean bool) error {
	rec := Failover{Clean: clean, Stopping: time.Now()}
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
		if rec.Kept, err = verify.LogEnds(ctx, next.URL("postgres"), w.Queue); err != nil {
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

// GatewayCounters sums the named counters over the gateways' /metrics
// (every label set); a counter no gateway exposes is absent.
func (w *World) GatewayCounters(ctx context.Context, names []string) map[string]float64 {
	out := map[string]float64{}
	for _, g := range w.gateways {
		counters, err := g.Counters(ctx, names)
		if err != nil {
			w.log("gateway %d metrics: %v", g.index, err)
			continue
		}
		for name, v := range counters {
			out[name] += v
		}
	}
	return out
}

// Counters reads the named counters from the gateway's /metrics, each
// summed over its label sets; a counter it does not expose is absent.
func (g *Gateway) Counters(ctx context.Context, names []string) (map[string]float64, error) {
	g.mu.Lock()
	admin := g.admin
	g.mu.Unlock()
	body, err := httpGet(ctx, "http://"+admin+"/metrics")
	if err != nil {
		return nil, err
	}
	out := map[string]float64{}
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
	return out, nil
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
