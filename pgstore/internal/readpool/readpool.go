// Package readpool serves reads from a second pool, on standbys
// (--pg-read-url), without ever answering with less than a caller has
// been told was stored (docs/design.md, "Reading from standbys").
package readpool

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/queengate/queengate/model"
)

// DefaultWait is how long a read waits by default for a standby to
// replay what the primary had when the read found its answer short.
const DefaultWait = 100 * time.Millisecond

// Paths a read meant for the read pool takes, the label values of the
// counter.
const (
	// Standby: the read pool's server answered at once.
	Standby = "standby"
	// StandbyAfterWait: it answered after its replay caught up.
	StandbyAfterWait = "standby_after_wait"
	// PrimaryStandbyBehind: it had not caught up within the wait.
	PrimaryStandbyBehind = "primary_standby_behind"
	// PrimaryStandbyFailed: it could not be reached or the read failed
	// there (a query cancelled by a recovery conflict, say).
	PrimaryStandbyFailed = "primary_standby_failed"
)

// Querier is what a read needs of a connection or a pool.
type Querier interface {
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// ReadFunc runs a read on q. complete says its answer holds all that was
// asked (a full page, a message found): such an answer cannot be short,
// whatever the server's lag. A not-found error (model's sentinels) is an
// answer, and a short one; the function may run more than once, and each
// run replaces what an earlier one found.
type ReadFunc func(ctx context.Context, q Querier) (complete bool, err error)

// Router runs reads on the read pool, or on the primary's pool when
// there is no read pool or the read pool cannot answer fresh enough. It
// is safe for concurrent use; a nil *Router is not.
type Router struct {
	primary, reads *pgxpool.Pool
	wait           time.Duration
	paths          *prometheus.CounterVec
}

// New routes reads to reads (nil: every read runs on primary), waiting
// up to wait for a lagging standby (0: none; fall back at once).
func New(primary, reads *pgxpool.Pool, wait time.Duration) *Router {
	r := &Router{primary: primary, reads: reads, wait: wait,
		paths: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "queengate_pg_read_pool_reads_total",
			Help: "Reads meant for the read pool (--pg-read-url: reads, explain, message gets, listings), by who answered: " +
				"standby (the read pool's server at once), standby_after_wait (after its replay reached what the primary had), " +
				"primary_standby_behind (it had not within --pg-read-wait), primary_standby_failed (unreachable, or the read failed there)."},
			[]string{"path"})}
	if reads != nil {
		for _, p := range []string{Standby, StandbyAfterWait, PrimaryStandbyBehind, PrimaryStandbyFailed} {
			r.paths.WithLabelValues(p)
		}
	}
	return r
}

// Collector is the counter of the paths reads took.
func (r *Router) Collector() prometheus.Collector { return r.paths }

// Pool is the read pool; nil when there is none.
func (r *Router) Pool() *pgxpool.Pool { return r.reads }

// Close closes the read pool.
func (r *Router) Close() {
	if r.reads != nil {
		r.reads.Close()
	}
}

// Read runs read on a connection of the read pool and keeps its answer
// when it is complete, or when that server had replayed, before the read
// began, all the WAL the primary had inserted once the answer was found:
// every commit a caller was told of before it asked is below that
// position, so the answer holds it. Otherwise it waits (up to the
// Router's wait) for the server's replay to get there and reads again,
// and failing that reads on the primary. Without a read pool it reads on
// the primary.
func (r *Router) Read(ctx context.Context, read ReadFunc) error {
	if r.reads == nil {
		_, err := read(ctx, r.primary)
		return err
	}
	conn, err := r.reads.Acquire(ctx)
	if err != nil {
		return r.onPrimary(ctx, read, PrimaryStandbyFailed, err)
	}
	defer conn.Release()
	// Before the read: each of its statements then sees at least this.
	replayed, err := position(ctx, conn)
	if err != nil {
		return r.onPrimary(ctx, read, PrimaryStandbyFailed, err)
	}
	complete, err := read(ctx, conn)
	switch {
	case failed(err):
		return r.onPrimary(ctx, read, PrimaryStandbyFailed, err)
	case complete:
		r.paths.WithLabelValues(Standby).Inc()
		return err
	}
	// After the request came: above every commit answered before it.
	var stored int64
	if err := r.primary.QueryRow(ctx, "SELECT pg_wal_lsn_diff(pg_current_wal_insert_lsn(), '0/0')::bigint").Scan(&stored); err != nil {
		return fmt.Errorf("pgstore: the primary's WAL position, to check a standby's read: %w", err)
	}
	if replayed >= stored {
		r.paths.WithLabelValues(Standby).Inc()
		return err
	}
	if !r.awaitReplay(ctx, conn, stored) {
		return r.onPrimary(ctx, read, PrimaryStandbyBehind, nil)
	}
	if _, err = read(ctx, conn); failed(err) {
		return r.onPrimary(ctx, read, PrimaryStandbyFailed, err)
	}
	r.paths.WithLabelValues(StandbyAfterWait).Inc()
	return err
}

// onPrimary reads on the primary, counted under path. When the
// caller's context ended it does not: the standby's error cause, or the
// context's, is the answer.
func (r *Router) onPrimary(ctx context.Context, read ReadFunc, path string, cause error) error {
	if err := ctx.Err(); err != nil {
		if cause != nil {
			return cause
		}
		return err
	}
	r.paths.WithLabelValues(path).Inc()
	_, err := read(ctx, r.primary)
	return err
}

// failed says err is a failure rather than an answer (not found).
func failed(err error) bool {
	return err != nil && !errors.Is(err, model.ErrNotFound) && !errors.Is(err, model.ErrQueueNotFound) &&
		!errors.Is(err, model.ErrGroupNotFound) && !errors.Is(err, model.ErrPartitionNotFound)
}

// positionSQL is how far q's server's snapshots see, in bytes of WAL: a
// standby's replay, or a primary's inserted WAL (the read pool's server
// is a primary under prefer-standby when no standby answers, or once
// promoted; a promoted server's replay position is its old one).
const positionSQL = `SELECT pg_wal_lsn_diff(CASE WHEN pg_is_in_recovery() THEN pg_last_wal_replay_lsn()
	ELSE pg_current_wal_insert_lsn() END, '0/0')::bigint`

func position(ctx context.Context, q Querier) (int64, error) {
	var lsn *int64
	if err := q.QueryRow(ctx, positionSQL).Scan(&lsn); err != nil {
		return 0, err
	}
	if lsn == nil {
		return 0, errors.New("pgstore: the read pool's server has no replay position")
	}
	return *lsn, nil
}

// replayPollEvery is how often a read waiting for a standby's replay
// looks at it: PostgreSQL has no notification of replay progress.
const replayPollEvery = 2 * time.Millisecond

// awaitReplay waits until q's server has replayed the WAL up to lsn,
// for at most the Router's wait; false when it has not, or it failed.
func (r *Router) awaitReplay(ctx context.Context, q Querier, lsn int64) bool {
	if r.wait <= 0 {
		return false
	}
	deadline := time.NewTimer(r.wait)
	defer deadline.Stop()
	tick := time.NewTicker(replayPollEvery)
	defer tick.Stop()
	for {
		select {
		case <-deadline.C:
			return false
		case <-ctx.Done():
			return false
		case <-tick.C:
		}
		replayed, err := position(ctx, q)
		if err != nil {
			return false
		}
		if replayed >= lsn {
			return true
		}
	}
}

// Get runs read through r (as [Router.Read]) and returns what the run
// that answered read.
func Get[T any](ctx context.Context, r *Router, read func(ctx context.Context, q Querier) (v T, complete bool, err error)) (T, error) {
	var v T
	err := r.Read(ctx, func(ctx context.Context, q Querier) (bool, error) {
		var (
			complete bool
			err      error
		)
		v, complete, err = read(ctx, q)
		return complete, err
	})
	return v, err
}

// List is Get for an answer never complete: a listing, which names no
// offset that would say it holds all there is, or a look-up whose answer
// depends on more than stored offsets.
func List[T any](ctx context.Context, r *Router, list func(ctx context.Context, q Querier) (T, error)) (T, error) {
	return Get(ctx, r, func(ctx context.Context, q Querier) (T, bool, error) {
		v, err := list(ctx, q)
		return v, false, err
	})
}
