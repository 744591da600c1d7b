package pgstore

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"time"

	"github.com/queengate/queengate/model"
	"github.com/queengate/queengate/pgstore/consumer"
	"github.com/queengate/queengate/pgstore/internal/pgwire"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
)

// sqlstatePartitionNotFound is raised by queen.log_push_bundle for an
// unknown partition id.
const sqlstatePartitionNotFound = "QG404"

// Store is the PostgreSQL log. It is safe for concurrent use.
type Store struct {
	// groupStore serves the consumer groups (package consumer): pops,
	// acks, leases, dead letters and redrives, group positions.
	*groupStore
	pool          *pgxpool.Pool
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

// groupStore names the embedded consumer.Store, so that its field is
// unexported and its methods are Store's.
type groupStore = consumer.Store

// Open connects a pool to connString (a PostgreSQL URL or DSN, with pgx's
// pool_* parameters). Close releases it.
func Open(ctx context.Context, connString string) (*Store, error) {
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
	return OpenConfig(ctx, cfg)
}

// OpenConfig connects a pool built from cfg. It chains its own AfterConnect
// hook (binary codecs for the push arrays) before cfg's, and turns JIT
// compilation off unless cfg sets it: the push's statements are planned
// with generic row estimates that reach jit_above_cost, and compiling
// them took ~60 ms of a push that runs in under one.
func OpenConfig(ctx context.Context, cfg *pgxpool.Config) (*Store, error) {
	if _, set := cfg.ConnConfig.RuntimeParams["jit"]; !set {
		cfg.ConnConfig.RuntimeParams["jit"] = "off"
	}
	s := &Store{settleTimeout: defaultSettleTimeout, undeliverable: newUndeliverableCounter()}
	after := cfg.AfterConnect
	cfg.AfterConnect = func(ctx context.Context, conn *pgx.Conn) error {
		if err := pgwire.RegisterCodecs(ctx, conn); err != nil {
			return err
		}
		if err := s.rememberServer(ctx, conn); err != nil {
			return err
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
	s.pool = pool
	s.groupStore = consumer.New(pool, s, s.maxData, s.undeliverable)
	return s, nil
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

// Close closes the pool.
func (s *Store) Close() {
	s.hb.close()
	s.pool.Close()
}

// Pool is the underlying connection pool.
func (s *Store) Pool() *pgxpool.Pool { return s.pool }

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
