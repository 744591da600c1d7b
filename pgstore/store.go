package pgstore

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/queengate/queengate/model"
	"github.com/queengate/queengate/pgstore/groups"
	"github.com/queengate/queengate/pgstore/internal/pgwire"
	"github.com/queengate/queengate/pgstore/internal/readpool"
	"github.com/queengate/queengate/pgstore/storemetrics"
	"github.com/queengate/queengate/pgstore/timers"
)

// sqlstatePartitionNotFound is raised by queen.log_push_bundle for an
// unknown partition id.
const sqlstatePartitionNotFound = "QG404"

// Store is the PostgreSQL log. It is safe for concurrent use.
type Store struct {
	// groupStore serves the consumer groups (package groups): pops,
	// acks, leases, dead letters and redrives, group positions.
	*groupStore
	// timerStore serves the timers (package timers).
	*timerStore
	pool *pgxpool.Pool
	// reads runs reads, explain, message gets and listings on the read
	// pool (Option ReadURL), or on pool.
	reads         *readpool.Router
	settleTimeout time.Duration
	hb            heartbeat
	// dataLimit is the most data a message may carry; see SetMaxData.
	dataLimit func() int64
	// undeliverable counts messages dead-lettered by pops because they
	// were too large to deliver, per queue and group.
	undeliverable *prometheus.CounterVec
	// epochs numbers the server identities the connections met.
	epochs epochs
}

// groupStore names the embedded groups.Store, so that its field is
// unexported and its methods are Store's.
type groupStore = groups.Store

// timerStore names the embedded timers.Store likewise.
type timerStore = timers.Store

// Open connects a pool to connString (a PostgreSQL URL or DSN, with pgx's
// pool_* parameters), and a read pool when an option names one. Close
// releases them.
func Open(ctx context.Context, connString string, opts ...Option) (*Store, error) {
	cfg, err := parsePoolConfig(connString)
	if err != nil {
		return nil, err
	}
	return OpenConfig(ctx, cfg, opts...)
}

// parsePoolConfig parses a pool's connection string, with more
// connections than pgx's default unless it says how many.
func parsePoolConfig(connString string) (*pgxpool.Config, error) {
	cfg, err := pgxpool.ParseConfig(connString)
	if err != nil {
		return nil, fmt.Errorf("pgstore: parse connection string: %w", err)
	}
	if !strings.Contains(connString, "pool_max_conns") {
		// pgx's default (max(4, CPUs)) is too few beside the pushes' one
		// connection per shard: the timers' LISTEN holds one for good, and
		// fires, retention, hydrations and operator requests come and go.
		cfg.MaxConns = int32(max(8, 2*runtime.NumCPU()+4))
	}
	return cfg, nil
}

// Option is an option of Open and OpenConfig.
type Option func(*options)

type options struct {
	readURL  string
	readWait time.Duration
}

// ReadURL gives the store a second pool, for reads, explain, message gets
// and the listings of groups, partitions, dead letters and figures:
// usually standbys (a multi-host URL with target_session_attrs=standby
// or prefer-standby). Pops, acks, leases and every write stay on the
// primary; a read the standby could answer short waits for its replay or
// runs on the primary (docs/design.md, "Reading from standbys"). Empty:
// reads use the primary's pool.
func ReadURL(url string) Option { return func(o *options) { o.readURL = url } }

// DefaultReadWait is ReadWait's default.
const DefaultReadWait = readpool.DefaultWait

// ReadWait is the longest a read waits for a lagging standby before it
// reads on the primary (default DefaultReadWait; 0: it does not wait).
func ReadWait(d time.Duration) Option { return func(o *options) { o.readWait = d } }

// OpenConfig connects a pool built from cfg. It chains its own AfterConnect
// hook (binary codecs for the push arrays) before cfg's, and turns JIT
// compilation off unless cfg sets it: the push's statements are planned
// with generic row estimates that reach jit_above_cost, and compiling
// them took ~60 ms of a push that runs in under one.
func OpenConfig(ctx context.Context, cfg *pgxpool.Config, opts ...Option) (*Store, error) {
	o := options{readWait: DefaultReadWait}
	for _, opt := range opts {
		opt(&o)
	}
	s := &Store{settleTimeout: defaultSettleTimeout, undeliverable: storemetrics.NewUndeliverableCounter()}
	// Only the primary's connections tell the server's identity: the
	// epochs are of the server that decides verdicts.
	pool, err := connect(ctx, cfg, s.rememberServer)
	if err != nil {
		return nil, err
	}
	var reads *pgxpool.Pool
	if o.readURL != "" {
		if reads, err = openReadPool(ctx, o.readURL); err != nil {
			pool.Close()
			return nil, err
		}
	}
	s.pool, s.reads = pool, readpool.New(pool, reads, o.readWait)
	s.groupStore = groups.New(pool, s.reads, s, s.maxData, s.undeliverable)
	s.timerStore = timers.New(pool, s.acquire, classify)
	return s, nil
}

// openReadPool connects the read pool. Its connections are made as the
// primary's: the same codecs, JIT off.
func openReadPool(ctx context.Context, url string) (*pgxpool.Pool, error) {
	cfg, err := parsePoolConfig(url)
	if err != nil {
		return nil, fmt.Errorf("read pool: %w", err)
	}
	pool, err := connect(ctx, cfg, nil)
	if err != nil {
		return nil, fmt.Errorf("read pool: %w", err)
	}
	return pool, nil
}

// connect makes a pool of cfg with this package's connection hook, and
// onConnect, when not nil, run on each new connection after it.
func connect(ctx context.Context, cfg *pgxpool.Config, onConnect func(context.Context, *pgx.Conn) error) (*pgxpool.Pool, error) {
	if _, set := cfg.ConnConfig.RuntimeParams["jit"]; !set {
		cfg.ConnConfig.RuntimeParams["jit"] = "off"
	}
	after := cfg.AfterConnect
	cfg.AfterConnect = func(ctx context.Context, conn *pgx.Conn) error {
		if err := pgwire.RegisterCodecs(ctx, conn); err != nil {
			return err
		}
		if onConnect != nil {
			if err := onConnect(ctx, conn); err != nil {
				return err
			}
		}
		if after != nil {
			return after(ctx, conn)
		}
		return nil
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("pgstore: connect: %w", err)
	}
	return pool, nil
}

// SetMaxData gives the store the most data a message may carry: the
// limit pushes are held to (queengate.MaxDataBytes of the NATS max
// payload; a func, as the max payload may change with the server). Dead
// letters are held to it too, so that they can be delivered. Until set,
// or while it is not above 0 (NATS not connected yet), the limit is
// defaultMaxData. Call it before use.
func (s *Store) SetMaxData(limit func() int64) { s.dataLimit = limit }

// defaultMaxData is queengate.MaxDataBytes of NATS's default max payload
// (1 MiB), which pgstore, speaking model only, does not import.
const defaultMaxData = 1<<20 - 32<<10

// maxData is the most data a dead letter may carry.
func (s *Store) maxData() int {
	if s.dataLimit != nil {
		if n := s.dataLimit(); n > 0 {
			return int(n)
		}
	}
	return defaultMaxData
}

// Close closes the pools.
func (s *Store) Close() {
	s.hb.close()
	s.reads.Close()
	s.pool.Close()
}

// Pool is the underlying connection pool, the primary's.
func (s *Store) Pool() *pgxpool.Pool { return s.pool }

// ReadPool is the read pool (Option ReadURL); nil when there is none.
func (s *Store) ReadPool() *pgxpool.Pool { return s.reads.Pool() }

// Migrate brings the schema up to date; see [Migrate].
func (s *Store) Migrate(ctx context.Context) ([]int, error) {
	conn, err := s.pool.Acquire(ctx)
	if err != nil {
		return nil, fmt.Errorf("pgstore: acquire: %w", err)
	}
	defer conn.Release()
	return Migrate(ctx, conn.Conn())
}

// SchemaVersion is the highest applied migration, 0 when none is.
func (s *Store) SchemaVersion(ctx context.Context) (int, error) {
	return schemaVersion(ctx, s.pool)
}

// Ping checks that PostgreSQL answers.
func (s *Store) Ping(ctx context.Context) error { return s.pool.Ping(ctx) }

// EnsurePartition returns the partition named (queue, partition), creating
// the queue with the default configuration and the partition if either does
// not exist. Any number of connections may race to create the same one.
func (s *Store) EnsurePartition(ctx context.Context, queue, partition string) (model.Partition, error) {
	var p model.Partition
	err := s.pool.QueryRow(ctx,
		"SELECT partition_id, queue_id, dedup_window_seconds, last_offset, on_conflict FROM queen.ensure_partition($1, $2)",
		queue, partition).Scan(&p.ID, &p.QueueID, &p.WindowSeconds, &p.LastOffset, &p.OnConflict)
	if err != nil {
		return model.Partition{}, fmt.Errorf("pgstore: ensure partition %s/%s: %w", queue, partition, err)
	}
	return p, nil
}

// EnsurePartitions is EnsurePartition for many partitions in one round
// trip: partition (queues[i], partitions[i]) is parts[i], and created[i]
// says this very call created it (it then holds no message yet: of racing
// callers exactly one sees it created). A name the schema refuses leaves
// parts[i] zero (ID 0) without failing the others. It reads on a
// connection of the latest epoch (Epoch) only.
func (s *Store) EnsurePartitions(ctx context.Context, queues, partitions []string) (parts []model.Partition, created []bool, err error) {
	if len(queues) != len(partitions) {
		return nil, nil, fmt.Errorf("pgstore: ensure partitions: %d queues for %d partitions", len(queues), len(partitions))
	}
	// Never on a straggler of a server failed over from: ids read there
	// may name other partitions on the latest one.
	conn, _, err := s.acquire(ctx)
	if err != nil {
		return nil, nil, fmt.Errorf("pgstore: ensure %d partitions: %w", len(queues), err)
	}
	defer conn.Release()
	rows, err := conn.Query(ctx,
		"SELECT idx, partition_id, queue_id, dedup_window_seconds, last_offset, on_conflict, created FROM queen.ensure_partitions($1, $2)",
		queues, partitions)
	if err != nil {
		return nil, nil, fmt.Errorf("pgstore: ensure %d partitions: %w", len(queues), err)
	}
	defer rows.Close()
	parts, created = make([]model.Partition, len(queues)), make([]bool, len(queues))
	for rows.Next() {
		var (
			i     int32
			p     model.Partition
			isNew bool
		)
		if err := rows.Scan(&i, &p.ID, &p.QueueID, &p.WindowSeconds, &p.LastOffset, &p.OnConflict, &isNew); err != nil {
			return nil, nil, fmt.Errorf("pgstore: ensure %d partitions: %w", len(queues), err)
		}
		if i < 1 || int(i) > len(queues) {
			return nil, nil, fmt.Errorf("pgstore: ensure %d partitions: row for index %d", len(queues), i)
		}
		parts[i-1], created[i-1] = p, isNew
	}
	if err := rows.Err(); err != nil {
		return nil, nil, fmt.Errorf("pgstore: ensure %d partitions: %w", len(queues), err)
	}
	return parts, created, nil
}

// classify turns SQLSTATEs this package raises into its sentinels.
func classify(err error) error {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && pgErr.Code == sqlstatePartitionNotFound {
		return fmt.Errorf("%w: %s", model.ErrPartitionNotFound, pgErr.Message)
	}
	return err
}

// Collector exports the store's metrics, read when scraped
// (package storemetrics).
func (s *Store) Collector() prometheus.Collector {
	return storemetrics.New(storemetrics.Sources{Pool: s.pool, Reads: s.reads, Figures: s.QueueFigures, Undeliverable: s.undeliverable})
}
