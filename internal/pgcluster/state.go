package pgcluster

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
)

// LSN is a position in the WAL, as PostgreSQL's pg_lsn ("16/B374D848").
type LSN uint64

// ParseLSN reads the text form of a pg_lsn.
func ParseLSN(s string) (LSN, error) {
	hi, lo, ok := strings.Cut(s, "/")
	if !ok {
		return 0, fmt.Errorf("pgcluster: LSN %q: no /", s)
	}
	h, err := strconv.ParseUint(hi, 16, 32)
	if err != nil {
		return 0, fmt.Errorf("pgcluster: LSN %q: %w", s, err)
	}
	l, err := strconv.ParseUint(lo, 16, 32)
	if err != nil {
		return 0, fmt.Errorf("pgcluster: LSN %q: %w", s, err)
	}
	return LSN(h<<32 | l), nil
}

func (l LSN) String() string { return fmt.Sprintf("%X/%X", uint64(l)>>32, uint32(l)) }

// CurrentLSN is how far a primary has written its WAL
// (pg_current_wal_lsn()): every commit that has returned with
// synchronous_commit on is below it. It fails on a standby.
func (c *Cluster) CurrentLSN(ctx context.Context) (LSN, error) {
	return c.lsn(ctx, "SELECT pg_current_wal_lsn()::text")
}

// ReplayLSN is how far a standby has replayed the WAL
// (pg_last_wal_replay_lsn()): what its queries see. It fails on a server
// that never was a standby.
func (c *Cluster) ReplayLSN(ctx context.Context) (LSN, error) {
	return c.lsn(ctx, "SELECT pg_last_wal_replay_lsn()::text")
}

func (c *Cluster) lsn(ctx context.Context, query string) (LSN, error) {
	var text *string
	if err := c.queryRow(ctx, query, nil, &text); err != nil {
		return 0, err
	}
	if text == nil {
		return 0, errors.New("pgcluster: no LSN (" + query + ")")
	}
	return ParseLSN(*text)
}

// WaitReplayed waits until the standby has replayed the WAL up to lsn, or
// ctx is done.
func (c *Cluster) WaitReplayed(ctx context.Context, lsn LSN) error {
	err := poll(ctx, func(ctx context.Context) error {
		replayed, err := c.ReplayLSN(ctx)
		if err != nil {
			return err
		}
		if replayed < lsn {
			return fmt.Errorf("replayed %v of %v", replayed, lsn)
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("pgcluster: %s: wait for replay: %w", c.name, err)
	}
	return nil
}

// WaitCaughtUp waits until the standby has replayed all the WAL primary
// has written when it is called.
func (c *Cluster) WaitCaughtUp(ctx context.Context, primary *Cluster) error {
	lsn, err := primary.CurrentLSN(ctx)
	if err != nil {
		return err
	}
	return c.WaitReplayed(ctx, lsn)
}

// WaitStreaming waits until the primary sees the named standby streaming
// (pg_stat_replication), past its catch-up.
func (c *Cluster) WaitStreaming(ctx context.Context, standby string) error {
	err := poll(ctx, func(ctx context.Context) error {
		var state string
		err := c.queryRow(ctx, "SELECT state FROM pg_stat_replication WHERE application_name = $1",
			[]any{standby}, &state)
		if errors.Is(err, pgx.ErrNoRows) {
			return errors.New("not connected")
		}
		if err != nil {
			return err
		}
		if state != "streaming" {
			return errors.New("state " + state)
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("pgcluster: %s: wait for standby %s: %w", c.name, standby, err)
	}
	return nil
}

// InRecovery says whether the server is a standby (pg_is_in_recovery()).
func (c *Cluster) InRecovery(ctx context.Context) (bool, error) {
	var recovering bool
	err := c.queryRow(ctx, "SELECT pg_is_in_recovery()", nil, &recovering)
	return recovering, err
}

// SystemID is the database system identifier (pg_control_system()): made
// by initdb, the same on every base backup and promotion of it, so it
// tells one replicated set from another.
func (c *Cluster) SystemID(ctx context.Context) (uint64, error) {
	var id int64
	err := c.queryRow(ctx, "SELECT system_identifier FROM pg_control_system()", nil, &id)
	return uint64(id), err
}

// Timeline is the server's current timeline, which every promotion
// raises by one. Where it can be read differs:
//   - on a primary, from the name of the current WAL file
//     (pg_walfile_name(pg_current_wal_lsn())): right once promotion
//     ends. pg_control_checkpoint() still names the old timeline until
//     the first checkpoint after the promotion ends, and PostgreSQL 15
//     runs that one spread out in the background: with a few thousand
//     dirty buffers, over 10 seconds after the promoted server took
//     writes.
//   - on a standby that streams, received_tli of pg_stat_wal_receiver:
//     the timeline of the WAL it receives (pg_walfile_name fails during
//     recovery).
//   - on a standby that does not stream (its primary is gone), only the
//     timeline of its last restartpoint (pg_control_checkpoint()), which
//     can be older than what it replays.
func (c *Cluster) Timeline(ctx context.Context) (uint32, error) {
	recovering, err := c.InRecovery(ctx)
	if err != nil {
		return 0, err
	}
	var tli int64
	if !recovering {
		var walFile string
		if err := c.queryRow(ctx, "SELECT pg_walfile_name(pg_current_wal_lsn())", nil, &walFile); err != nil {
			return 0, err
		}
		tli, err = strconv.ParseInt(walFile[:8], 16, 64)
		return uint32(tli), err
	}
	err = c.queryRow(ctx, `SELECT coalesce((SELECT received_tli FROM pg_stat_wal_receiver WHERE received_tli > 0),
		(SELECT timeline_id FROM pg_control_checkpoint()))`, nil, &tli)
	return uint32(tli), err
}

// queryRow runs a one-row query on a connection of its own, so it works
// across restarts of the server.
func (c *Cluster) queryRow(ctx context.Context, query string, args []any, dest ...any) error {
	conn, err := pgx.Connect(ctx, c.URL("postgres"))
	if err != nil {
		return err
	}
	defer conn.Close(ctx)
	return conn.QueryRow(ctx, query, args...).Scan(dest...)
}

func (c *Cluster) exec(ctx context.Context, stmt string) error {
	conn, err := pgx.Connect(ctx, c.URL("postgres"))
	if err != nil {
		return err
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, stmt); err != nil {
		return fmt.Errorf("pgcluster: %s: %w", stmt, err)
	}
	return nil
}

// pollEvery is how often poll tries again.
const pollEvery = 20 * time.Millisecond

// poll calls f until it returns nil; when ctx is done it returns ctx's
// error with f's last one, which says what state the wait was left in.
func poll(ctx context.Context, f func(ctx context.Context) error) error {
	for {
		err := f(ctx)
		if err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%w (last: %v)", ctx.Err(), err)
		case <-time.After(pollEvery):
		}
	}
}
