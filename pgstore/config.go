package pgstore

import (
	"context"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/jackc/pgx/v5"
)

// Queue option defaults (docs/admin-api.md, "Configure").
const (
	DefaultDedupWindowSeconds = 3600
	DefaultRetentionSeconds   = 0
	// MaxOptionSeconds is the largest value an option takes (the column
	// is an integer).
	MaxOptionSeconds = math.MaxInt32
)

// ErrInvalidOption is returned for an option value out of range.
var ErrInvalidOption = errors.New("pgstore: invalid queue option")

// QueueOptions is a queue's whole configuration.
type QueueOptions struct {
	// DedupWindowSeconds is the deduplication window; 0 disables the probe
	// (log_txns is still written).
	DedupWindowSeconds int
	// RetentionSeconds deletes segments older than this; 0 keeps them.
	RetentionSeconds int
}

// DefaultQueueOptions is what a created queue starts from, and what an
// omitted option returns to under replace.
func DefaultQueueOptions() QueueOptions {
	return QueueOptions{DedupWindowSeconds: DefaultDedupWindowSeconds, RetentionSeconds: DefaultRetentionSeconds}
}

// OptionsPatch names the options a configure request sets; nil is an
// omitted option.
type OptionsPatch struct {
	DedupWindowSeconds *int
	RetentionSeconds   *int
}

// Apply returns o with the patch applied: merge keeps what the patch
// omits, replace starts from the defaults.
func (p OptionsPatch) Apply(o QueueOptions, replace bool) QueueOptions {
	if replace {
		o = DefaultQueueOptions()
	}
	if p.DedupWindowSeconds != nil {
		o.DedupWindowSeconds = *p.DedupWindowSeconds
	}
	if p.RetentionSeconds != nil {
		o.RetentionSeconds = *p.RetentionSeconds
	}
	return o
}

func (p OptionsPatch) validate() error {
	var errs []error
	check := func(name string, v *int) {
		if v != nil && (*v < 0 || *v > MaxOptionSeconds) {
			errs = append(errs, fmt.Errorf("%w: %s %d: 0 to %d", ErrInvalidOption, name, *v, MaxOptionSeconds))
		}
	}
	check("dedupWindowSeconds", p.DedupWindowSeconds)
	check("retentionSeconds", p.RetentionSeconds)
	return errors.Join(errs...)
}

// QueueConfig is a queue's configuration row.
type QueueConfig struct {
	ID   int64
	Name string
	QueueOptions
	CreatedAt time.Time
	UpdatedAt time.Time
}

const queueColumns = "id, name, dedup_window_seconds, retention_seconds, created_at, updated_at"

func scanQueue(row pgx.Row, c *QueueConfig, extra ...any) error {
	return row.Scan(append([]any{&c.ID, &c.Name, &c.DedupWindowSeconds, &c.RetentionSeconds, &c.CreatedAt, &c.UpdatedAt}, extra...)...)
}

// configureSQL creates or updates a queue in one statement, so concurrent
// configures of one queue serialize on its row and each answers the state
// it wrote. $4 is replace. updated_at moves only when something changed.
// xmax = 0 tells an inserted row from an updated one.
const configureSQL = `
INSERT INTO queen.queues AS q (name, dedup_window_seconds, retention_seconds)
VALUES ($1, coalesce($2::integer, $5::integer), coalesce($3::integer, $6::integer))
ON CONFLICT (name) DO UPDATE SET
    dedup_window_seconds = coalesce($2, CASE WHEN $4::boolean THEN $5 ELSE q.dedup_window_seconds END),
    retention_seconds    = coalesce($3, CASE WHEN $4 THEN $6 ELSE q.retention_seconds END),
    updated_at = CASE
        WHEN (coalesce($2, CASE WHEN $4 THEN $5 ELSE q.dedup_window_seconds END),
              coalesce($3, CASE WHEN $4 THEN $6 ELSE q.retention_seconds END))
             IS DISTINCT FROM (q.dedup_window_seconds, q.retention_seconds)
        THEN now() ELSE q.updated_at END
RETURNING ` + queueColumns + `, (xmax = 0) AS created`

// Configure creates or changes a queue: merge (replace false) keeps what
// the patch omits, replace returns it to its default, and a create starts
// from the defaults either way. It returns the whole configuration after
// the change and whether the queue was created. The caller validates the
// name (ErrInvalidOption covers values only).
func (s *Store) Configure(ctx context.Context, queue string, patch OptionsPatch, replace bool) (QueueConfig, bool, error) {
	if err := patch.validate(); err != nil {
		return QueueConfig{}, false, err
	}
	var (
		c       QueueConfig
		created bool
	)
	err := scanQueue(s.pool.QueryRow(ctx, configureSQL, queue, patch.DedupWindowSeconds, patch.RetentionSeconds,
		replace, DefaultDedupWindowSeconds, DefaultRetentionSeconds), &c, &created)
	if err != nil {
		return QueueConfig{}, false, fmt.Errorf("pgstore: configure queue %s: %w", queue, err)
	}
	return c, created, nil
}

// QueueConfig reads a queue's configuration; ErrQueueNotFound if there is
// no such queue.
func (s *Store) QueueConfig(ctx context.Context, queue string) (QueueConfig, error) {
	var c QueueConfig
	err := scanQueue(s.pool.QueryRow(ctx, "SELECT "+queueColumns+" FROM queen.queues WHERE name = $1", queue), &c)
	if errors.Is(err, pgx.ErrNoRows) {
		return QueueConfig{}, fmt.Errorf("%w: %s", ErrQueueNotFound, queue)
	}
	if err != nil {
		return QueueConfig{}, fmt.Errorf("pgstore: read queue %s: %w", queue, err)
	}
	return c, nil
}

// Queues lists every queue's configuration, by name.
func (s *Store) Queues(ctx context.Context) ([]QueueConfig, error) {
	rows, err := s.pool.Query(ctx, "SELECT "+queueColumns+" FROM queen.queues ORDER BY name")
	if err != nil {
		return nil, fmt.Errorf("pgstore: list queues: %w", err)
	}
	defer rows.Close()
	var out []QueueConfig
	for rows.Next() {
		var c QueueConfig
		if err := scanQueue(rows, &c); err != nil {
			return nil, fmt.Errorf("pgstore: list queues: %w", err)
		}
		out = append(out, c)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("pgstore: list queues: %w", err)
	}
	return out, nil
}

// PartitionInfo is a partition's row and what it holds.
type PartitionInfo struct {
	ID         int64
	Name       string
	LastOffset int64 // the allocator; -1 before the first message
	TxnsStart  int64 // purge watermark: log_txns rows below it are gone
	CreatedAt  time.Time
	// FirstOffset is the first offset still stored (segment retention
	// deletes a prefix): LastOffset+1 when nothing is.
	FirstOffset int64
	// StoredBytes is the data of the stored messages, as sent.
	StoredBytes int64
	// OldestAt and NewestAt are when the first and the last stored
	// message were written; zero when nothing is stored.
	OldestAt, NewestAt time.Time
}

// StoredMessages is the number of messages the partition holds: offsets
// are contiguous and retention deletes a prefix.
func (p PartitionInfo) StoredMessages() int64 { return p.LastOffset - p.FirstOffset + 1 }

// partitionsSQL reads a queue's partitions with what each holds: the
// first and last stored frames through the primary key, two index probes
// per partition, and the byte count kept under the partition's lock.
const partitionsSQL = `
SELECT p.id, p.name, p.last_offset, p.txns_start, p.created_at, p.stored_bytes,
       coalesce(f.base_offset, p.last_offset + 1), f.created_at, l.created_at
  FROM queen.log_partitions p
  LEFT JOIN LATERAL (SELECT s.base_offset, s.created_at FROM queen.log_segments s
                      WHERE s.partition_id = p.id ORDER BY s.base_offset LIMIT 1) f ON true
  LEFT JOIN LATERAL (SELECT s.created_at FROM queen.log_segments s
                      WHERE s.partition_id = p.id ORDER BY s.base_offset DESC LIMIT 1) l ON true
 WHERE p.queue_id = $1
 ORDER BY p.name`

// Partitions lists a queue's partitions, by name.
func (s *Store) Partitions(ctx context.Context, queueID int64) ([]PartitionInfo, error) {
	rows, err := s.pool.Query(ctx, partitionsSQL, queueID)
	if err != nil {
		return nil, fmt.Errorf("pgstore: list partitions: %w", err)
	}
	return pgx.CollectRows(rows, func(row pgx.CollectableRow) (PartitionInfo, error) {
		var (
			p              PartitionInfo
			oldest, newest *time.Time
		)
		err := row.Scan(&p.ID, &p.Name, &p.LastOffset, &p.TxnsStart, &p.CreatedAt, &p.StoredBytes,
			&p.FirstOffset, &oldest, &newest)
		if oldest != nil && newest != nil {
			p.OldestAt, p.NewestAt = *oldest, *newest
		}
		return p, err
	})
}
