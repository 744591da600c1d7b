package pgstore

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/queengate/queengate/model"
)

// Identity names the history of the server a connection reached: the
// cluster (its system identifier, made by initdb and kept by base backups
// and standbys), the WAL timeline (a promotion starts a new one), when
// its postmaster started (a restart, a restored backup, or another server
// of the same cluster), and when its statistics were last reset: crash
// recovery discards them, also after a backend's crash that the
// postmaster survives, which keeps its start time but may lose commits
// acknowledged with synchronous_commit off. Within one identity the log
// only grows: what a commit stored stays. Across identities it may not: a promoted
// asynchronous standby lacks the old primary's last commits, and other
// writers may then store other messages at the offsets they had.
type Identity struct {
	SystemID int64
	// Timeline is 0 on a standby (in recovery): it has none of its own
	// until promoted.
	Timeline  int32
	StartedAt time.Time
	// StatsReset is pg_stat_bgwriter's stats_reset. An operator's
	// pg_stat_reset_shared('bgwriter') changes it too: a new identity
	// then costs a rehydration, nothing else.
	StatsReset time.Time
}

func (id Identity) String() string {
	return fmt.Sprintf("system %d timeline %d started %s statistics reset %s", id.SystemID, id.Timeline,
		id.StartedAt.UTC().Format(time.RFC3339Nano), id.StatsReset.UTC().Format(time.RFC3339Nano))
}

// epochs numbers the identities the pool's connections met, in the order
// met. Epoch 0 is no epoch: a connection whose identity is not the
// latest one's (a straggler of a server failed over from) is in none, and
// is closed when acquired (acquire).
type epochs struct {
	mu     sync.Mutex // serializes changes; latest is read without it
	latest atomic.Pointer[epoch]
}

type epoch struct {
	n  uint64
	id Identity
}

// meet records the identity of a new connection: a new latest one if it
// differs.
func (e *epochs) meet(id Identity) {
	e.mu.Lock()
	defer e.mu.Unlock()
	cur := e.latest.Load()
	if cur != nil && cur.id == id {
		return
	}
	n := uint64(1)
	if cur != nil {
		n = cur.n + 1
	}
	e.latest.Store(&epoch{n: n, id: id})
}

// of is the epoch of a connection of identity id: the latest one's, or 0.
func (e *epochs) of(id Identity) uint64 {
	if cur := e.latest.Load(); cur != nil && cur.id == id {
		return cur.n
	}
	return 0
}

// distrust starts a new epoch for the same identity when n is the latest:
// the log was found shorter than a commit of epoch n had left it, so
// nothing learned under n may be trusted any more.
func (e *epochs) distrust(n uint64) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if cur := e.latest.Load(); cur != nil && cur.n == n {
		e.latest.Store(&epoch{n: n + 1, id: cur.id})
	}
}

const identityKey = "queengate.identity"

// rememberServer reads, once per connection, its backend's start time
// (see backend) and its server's identity, which it registers.
func (s *Store) rememberServer(ctx context.Context, conn *pgx.Conn) error {
	var (
		start      time.Time
		id         Identity
		statsReset *time.Time
	)
	// pg_walfile_name names the timeline a primary writes; it cannot run
	// during recovery.
	err := conn.QueryRow(ctx, `
		SELECT a.backend_start, c.system_identifier,
		       CASE WHEN pg_is_in_recovery() THEN 0
		            ELSE ('x' || substr(pg_walfile_name(pg_current_wal_lsn()), 1, 8))::bit(32)::int END,
		       pg_postmaster_start_time(), (SELECT stats_reset FROM pg_stat_bgwriter)
		  FROM pg_stat_activity a, pg_control_system() c
		 WHERE a.pid = pg_backend_pid()`).Scan(&start, &id.SystemID, &id.Timeline, &id.StartedAt, &statsReset)
	if err != nil {
		return fmt.Errorf("pgstore: read the server's identity: %w", err)
	}
	if statsReset != nil {
		id.StatsReset = *statsReset
	}
	// Identities are compared with ==, which sees a time's location:
	// read in one, two connections' equal times compare equal.
	id.StartedAt, id.StatsReset = id.StartedAt.UTC(), id.StatsReset.UTC()
	conn.PgConn().CustomData()[backendStartKey] = start
	conn.PgConn().CustomData()[identityKey] = id
	s.epochs.meet(id)
	return nil
}

// acquire is a pooled connection of the latest epoch, and that epoch. A
// connection of an older identity (a straggler of a server failed over
// from, still up) is closed rather than handed out: released unused, the
// pool would hand it out again and again, and nothing done on it counts.
// A new connection always has the latest identity: it makes it so.
func (s *Store) acquire(ctx context.Context) (*pgxpool.Conn, uint64, error) {
	for {
		conn, err := s.pool.Acquire(ctx)
		if err != nil {
			return nil, 0, err
		}
		if n := s.epochOf(conn.Conn()); n != 0 {
			return conn, n, nil
		}
		closeCtx, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
		_ = conn.Conn().Close(closeCtx) // the pool destroys a closed connection
		cancel()
		conn.Release()
	}
}

// epochOf is conn's epoch: the store's latest if conn reached the latest
// identity, else 0.
func (s *Store) epochOf(conn *pgx.Conn) uint64 {
	id, ok := conn.PgConn().CustomData()[identityKey].(Identity)
	if !ok {
		return 0
	}
	return s.epochs.of(id)
}

// Epoch is the latest epoch and its server's identity: a number that
// changes whenever a new connection reaches a server of another identity
// (a failover, a restart, a restored backup), or Distrust is called.
// Before the pool's first connection it makes one; 0 if it cannot.
func (s *Store) Epoch(ctx context.Context) (uint64, string) {
	cur := s.epochs.latest.Load()
	if cur == nil {
		if conn, err := s.pool.Acquire(ctx); err == nil {
			conn.Release()
		}
		if cur = s.epochs.latest.Load(); cur == nil {
			return 0, "none"
		}
	}
	return cur.n, cur.id.String()
}

// Distrust starts a new epoch if n is the latest: a caller found the log
// shorter than its own commits under n had left it (an allocator below
// what a push of n returned), which no identity change explained. Every
// connection then counts in the new epoch, and whatever was learned under
// n is relearned.
func (s *Store) Distrust(n uint64) { s.epochs.distrust(n) }

// ServerIdentity reads the identity of the server a connection of the
// pool reaches now, and its epoch.
func (s *Store) ServerIdentity(ctx context.Context) (Identity, uint64, error) {
	conn, n, err := s.acquire(ctx)
	if err != nil {
		return Identity{}, 0, err
	}
	defer conn.Release()
	id, _ := conn.Conn().PgConn().CustomData()[identityKey].(Identity)
	return id, n, nil
}

// Lacks tells, for each message k said stored at offsets[k] of partition
// pids[k] with hash hashes[k], whether the server lacks it: no stored
// frame holds that hash at that offset (queen.log_hash_frame). An offset retention has purged
// (below txns_start, at or below the allocator) cannot be told and counts
// as held; a partition the server does not have lacks everything. It
// returns the epoch of the connection it read on: what it says is about
// that server.
func (s *Store) Lacks(ctx context.Context, pids, offsets []int64, hashes []model.Hash) ([]bool, uint64, error) {
	if len(pids) != len(offsets) || len(pids) != len(hashes) {
		return nil, 0, fmt.Errorf("pgstore: lacks: %d partitions, %d offsets, %d hashes", len(pids), len(offsets), len(hashes))
	}
	conn, n, err := s.acquire(ctx)
	if err != nil {
		return nil, 0, fmt.Errorf("pgstore: lacks: %w", err)
	}
	defer conn.Release()
	rows, err := conn.Query(ctx, `
		SELECT a.k FROM unnest($1::bigint[], $2::bigint[], $3::uuid[]) WITH ORDINALITY AS a(pid, off, h, k)
		  LEFT JOIN queen.log_partitions p ON p.id = a.pid
		  LEFT JOIN LATERAL queen.log_hash_frame(a.pid, a.off, p.txns_start, p.txns_end) AS t ON true
		 WHERE NOT coalesce(a.off < p.txns_start AND a.off <= p.last_offset, false)
		   AND NOT coalesce(t.hashes[a.off - t.base_offset + 1] = a.h, false)`,
		pids, offsets, hashes)
	if err != nil {
		return nil, n, fmt.Errorf("pgstore: lacks: %w", err)
	}
	lacking := make([]bool, len(pids))
	ks, err := pgx.CollectRows(rows, pgx.RowTo[int64])
	if err != nil {
		return nil, n, fmt.Errorf("pgstore: lacks: %w", err)
	}
	for _, k := range ks {
		lacking[k-1] = true
	}
	return lacking, n, nil
}
