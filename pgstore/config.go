package pgstore

import (
	"context"
	"errors"
	"fmt"
	"github.com/queengate/queengate/model"
	"time"

	"github.com/jackc/pgx/v5"
)

const queueColumns = "id, name, dedup_window_seconds, retention_seconds, on_conflict, max_attempts, retain_until, created_at, updated_at, " +
	"retry_delay_ms, retry_backoff_ms"

func scanQueue(row pgx.Row, c *model.QueueConfig, extra ...any) error {
	return row.Scan(append([]any{&c.ID, &c.Name, &c.DedupWindowSeconds, &c.RetentionSeconds, &c.OnConflict,
		&c.MaxAttempts, &c.RetainUntil, &c.CreatedAt, &c.UpdatedAt, &c.RetryDelayMs, &c.RetryBackoffMs}, extra...)...)
}

// configureSQL creates or updates a queue in one statement, so concurrent
// configures of one queue serialize on its row and each answers the state
// it wrote. $4 is replace; each option is a pair, the value given (or
// NULL) and its default. updated_at moves only when something changed.
// xmax = 0 tells an inserted row from an updated one.
const configureSQL = `
INSERT INTO queen.queues AS q (name, dedup_window_seconds, retention_seconds, on_conflict, max_attempts, retain_until,
                               retry_delay_ms, retry_backoff_ms)
VALUES ($1, coalesce($2::integer, $5::integer), coalesce($3::integer, $6::integer), coalesce($7::text, $8::text),
        coalesce($9::integer, $10::integer), coalesce($11::text, $12::text),
        coalesce($13::bigint, $14::bigint), coalesce($15::bigint[], $16::bigint[]))
ON CONFLICT (name) DO UPDATE SET
    dedup_window_seconds = coalesce($2, CASE WHEN $4::boolean THEN $5 ELSE q.dedup_window_seconds END),
    retention_seconds    = coalesce($3, CASE WHEN $4 THEN $6 ELSE q.retention_seconds END),
    on_conflict          = coalesce($7, CASE WHEN $4 THEN $8 ELSE q.on_conflict END),
    max_attempts         = coalesce($9, CASE WHEN $4 THEN $10 ELSE q.max_attempts END),
    retain_until         = coalesce($11, CASE WHEN $4 THEN $12 ELSE q.retain_until END),
    retry_delay_ms       = coalesce($13, CASE WHEN $4 THEN $14 ELSE q.retry_delay_ms END),
    retry_backoff_ms     = coalesce($15, CASE WHEN $4 THEN $16 ELSE q.retry_backoff_ms END),
    updated_at = CASE
        WHEN (coalesce($2, CASE WHEN $4 THEN $5 ELSE q.dedup_window_seconds END),
              coalesce($3, CASE WHEN $4 THEN $6 ELSE q.retention_seconds END),
              coalesce($7, CASE WHEN $4 THEN $8 ELSE q.on_conflict END),
              coalesce($9, CASE WHEN $4 THEN $10 ELSE q.max_attempts END),
              coalesce($11, CASE WHEN $4 THEN $12 ELSE q.retain_until END),
              coalesce($13, CASE WHEN $4 THEN $14 ELSE q.retry_delay_ms END),
              coalesce($15, CASE WHEN $4 THEN $16 ELSE q.retry_backoff_ms END))
             IS DISTINCT FROM (q.dedup_window_seconds, q.retention_seconds, q.on_conflict, q.max_attempts, q.retain_until,
                               q.retry_delay_ms, q.retry_backoff_ms)
        THEN now() ELSE q.updated_at END
RETURNING ` + queueColumns + `, (xmax = 0) AS created`

// Configure creates or changes a queue: merge (replace false) keeps what
// the patch omits, replace returns it to its default, and a create starts
// from the defaults either way. It returns the whole configuration after
// the change and whether the queue was created. The caller validates the
// name (ErrInvalidOption covers values only).
func (s *Store) Configure(ctx context.Context, queue string, patch model.OptionsPatch, replace bool) (model.QueueConfig, bool, error) {
	if err := patch.Validate(); err != nil {
		return model.QueueConfig{}, false, err
	}
	var (
		c       model.QueueConfig
		created bool
	)
	err := scanQueue(s.pool.QueryRow(ctx, configureSQL, queue, patch.DedupWindowSeconds, patch.RetentionSeconds,
		replace, model.DefaultDedupWindowSeconds, model.DefaultRetentionSeconds, patch.OnConflict,
		model.ConflictIgnore, patch.MaxAttempts, model.DefaultMaxAttempts, patch.RetainUntil, model.RetainByAge,
		patch.RetryDelayMs, 0, patch.RetryBackoffMs, []int{}), &c, &created)
	if err != nil {
		return model.QueueConfig{}, false, fmt.Errorf("pgstore: configure queue %s: %w", queue, err)
	}
	return c, created, nil
}

// QueueConfig reads a queue's configuration; ErrQueueNotFound if there is
// no such queue.
func (s *Store) QueueConfig(ctx context.Context, queue string) (model.QueueConfig, error) {
	var c model.QueueConfig
	err := scanQueue(s.pool.QueryRow(ctx, "SELECT "+queueColumns+" FROM queen.queues WHERE name = $1", queue), &c)
	if errors.Is(err, pgx.ErrNoRows) {
		return model.QueueConfig{}, fmt.Errorf("%w: %s", model.ErrQueueNotFound, queue)
	}
	if err != nil {
		return model.QueueConfig{}, fmt.Errorf("pgstore: read queue %s: %w", queue, err)
	}
	return c, nil
}

// Queues lists every queue's configuration, by name.
func (s *Store) Queues(ctx context.Context) ([]model.QueueConfig, error) {
	rows, err := s.pool.Query(ctx, "SELECT "+queueColumns+" FROM queen.queues ORDER BY name")
	if err != nil {
		return nil, fmt.Errorf("pgstore: list queues: %w", err)
	}
	defer rows.Close()
	var out []model.QueueConfig
	for rows.Next() {
		var c model.QueueConfig
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
func (s *Store) Partitions(ctx context.Context, queueID int64) ([]model.PartitionInfo, error) {
	rows, err := s.pool.Query(ctx, partitionsSQL, queueID)
	if err != nil {
		return nil, fmt.Errorf("pgstore: list partitions: %w", err)
	}
	return pgx.CollectRows(rows, func(row pgx.CollectableRow) (model.PartitionInfo, error) {
		var (
			p              model.PartitionInfo
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
