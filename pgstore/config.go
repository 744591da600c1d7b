package pgstore

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/queengate/queengate/model"
	"github.com/queengate/queengate/pgstore/internal/readpool"
)

const queueColumns = "id, name, dedup_window_seconds, retention_seconds, on_conflict, max_attempts, retain_until, created_at, updated_at, " +
	"retry_delay_ms, retry_backoff_ms, max_ack_pending, group_idle_seconds, max_unheard_deliveries"

// configureSQL creates or updates a queue in one statement, so concurrent
// configures of one queue serialize on its row and each answers the state
// it wrote. Each option is a pair, the value given (or NULL) and its
// default_; @replace returns an omitted option to its default. updated_at
// moves only when something changed. xmax = 0 tells an inserted row from
// an updated one.
const configureSQL = `
INSERT INTO queen.queues AS q (name, dedup_window_seconds, retention_seconds, on_conflict, max_attempts, retain_until,
                               retry_delay_ms, retry_backoff_ms, max_ack_pending, group_idle_seconds, max_unheard_deliveries)
VALUES (@name, coalesce(@dedup_window_seconds::integer, @default_dedup_window_seconds::integer),
        coalesce(@retention_seconds::integer, @default_retention_seconds::integer),
        coalesce(@on_conflict::text, @default_on_conflict::text),
        coalesce(@max_attempts::integer, @default_max_attempts::integer),
        coalesce(@retain_until::text, @default_retain_until::text),
        coalesce(@retry_delay_ms::bigint, @default_retry_delay_ms::bigint),
        coalesce(@retry_backoff_ms::bigint[], @default_retry_backoff_ms::bigint[]), coalesce(@max_ack_pending::integer, 0),
        coalesce(@group_idle_seconds::integer, 0),
        coalesce(@max_unheard_deliveries::integer, @default_max_unheard_deliveries::integer))
ON CONFLICT (name) DO UPDATE SET
    dedup_window_seconds = coalesce(@dedup_window_seconds, CASE WHEN @replace::boolean THEN @default_dedup_window_seconds ELSE q.dedup_window_seconds END),
    retention_seconds    = coalesce(@retention_seconds, CASE WHEN @replace THEN @default_retention_seconds ELSE q.retention_seconds END),
    on_conflict          = coalesce(@on_conflict, CASE WHEN @replace THEN @default_on_conflict ELSE q.on_conflict END),
    max_attempts         = coalesce(@max_attempts, CASE WHEN @replace THEN @default_max_attempts ELSE q.max_attempts END),
    retain_until         = coalesce(@retain_until, CASE WHEN @replace THEN @default_retain_until ELSE q.retain_until END),
    retry_delay_ms       = coalesce(@retry_delay_ms, CASE WHEN @replace THEN @default_retry_delay_ms ELSE q.retry_delay_ms END),
    retry_backoff_ms     = coalesce(@retry_backoff_ms, CASE WHEN @replace THEN @default_retry_backoff_ms ELSE q.retry_backoff_ms END),
    max_ack_pending      = coalesce(@max_ack_pending, CASE WHEN @replace THEN 0 ELSE q.max_ack_pending END),
    group_idle_seconds   = coalesce(@group_idle_seconds, CASE WHEN @replace THEN 0 ELSE q.group_idle_seconds END),
    max_unheard_deliveries = coalesce(@max_unheard_deliveries,
                                      CASE WHEN @replace THEN @default_max_unheard_deliveries ELSE q.max_unheard_deliveries END),
    updated_at = CASE
        WHEN (coalesce(@dedup_window_seconds, CASE WHEN @replace THEN @default_dedup_window_seconds ELSE q.dedup_window_seconds END),
              coalesce(@retention_seconds, CASE WHEN @replace THEN @default_retention_seconds ELSE q.retention_seconds END),
              coalesce(@on_conflict, CASE WHEN @replace THEN @default_on_conflict ELSE q.on_conflict END),
              coalesce(@max_attempts, CASE WHEN @replace THEN @default_max_attempts ELSE q.max_attempts END),
              coalesce(@retain_until, CASE WHEN @replace THEN @default_retain_until ELSE q.retain_until END),
              coalesce(@retry_delay_ms, CASE WHEN @replace THEN @default_retry_delay_ms ELSE q.retry_delay_ms END),
              coalesce(@retry_backoff_ms, CASE WHEN @replace THEN @default_retry_backoff_ms ELSE q.retry_backoff_ms END),
              coalesce(@max_ack_pending, CASE WHEN @replace THEN 0 ELSE q.max_ack_pending END),
              coalesce(@group_idle_seconds, CASE WHEN @replace THEN 0 ELSE q.group_idle_seconds END),
              coalesce(@max_unheard_deliveries, CASE WHEN @replace THEN @default_max_unheard_deliveries ELSE q.max_unheard_deliveries END))
             IS DISTINCT FROM (q.dedup_window_seconds, q.retention_seconds, q.on_conflict, q.max_attempts, q.retain_until,
                               q.retry_delay_ms, q.retry_backoff_ms, q.max_ack_pending, q.group_idle_seconds, q.max_unheard_deliveries)
        THEN now() ELSE q.updated_at END
RETURNING ` + queueColumns + `, (xmax = 0) AS created`

// configured is configureSQL's row: the queue and whether it was created.
type configured struct {
	model.QueueConfig
	Created bool
}

// Configure creates or changes a queue: merge (replace false) keeps what
// the patch omits, replace returns it to its default, and a create starts
// from the defaults either way. It returns the whole configuration after
// the change and whether the queue was created. The caller validates the
// name (ErrInvalidOption covers values only).
func (s *Store) Configure(ctx context.Context, queue string, patch model.OptionsPatch, replace bool) (model.QueueConfig, bool, error) {
	if err := patch.Validate(); err != nil {
		return model.QueueConfig{}, false, err
	}
	rows, err := s.pool.Query(ctx, configureSQL, pgx.NamedArgs{"name": queue, "replace": replace,
		"dedup_window_seconds": patch.DedupWindowSeconds, "default_dedup_window_seconds": model.DefaultDedupWindowSeconds,
		"retention_seconds": patch.RetentionSeconds, "default_retention_seconds": model.DefaultRetentionSeconds,
		"on_conflict": patch.OnConflict, "default_on_conflict": model.ConflictIgnore,
		"max_attempts": patch.MaxAttempts, "default_max_attempts": model.DefaultMaxAttempts,
		"retain_until": patch.RetainUntil, "default_retain_until": model.RetainByAge,
		"retry_delay_ms": patch.RetryDelayMs, "default_retry_delay_ms": 0,
		"retry_backoff_ms": patch.RetryBackoffMs, "default_retry_backoff_ms": []int{},
		"max_ack_pending": patch.MaxAckPending, "group_idle_seconds": patch.GroupIdleSeconds,
		"max_unheard_deliveries": patch.MaxUnheardDeliveries, "default_max_unheard_deliveries": model.DefaultMaxUnheardDeliveries})
	var c configured
	if err == nil {
		c, err = pgx.CollectExactlyOneRow(rows, pgx.RowToStructByName[configured])
	}
	if err != nil {
		return model.QueueConfig{}, false, fmt.Errorf("pgstore: configure queue %s: %w", queue, err)
	}
	return c.QueueConfig, c.Created, nil
}

// QueueConfig reads a queue's configuration; ErrQueueNotFound if there is
// no such queue.
func (s *Store) QueueConfig(ctx context.Context, queue string) (model.QueueConfig, error) {
	rows, err := s.pool.Query(ctx, "SELECT "+queueColumns+" FROM queen.queues WHERE name = $1", queue)
	var c model.QueueConfig
	if err == nil {
		c, err = pgx.CollectExactlyOneRow(rows, pgx.RowToStructByName[model.QueueConfig])
	}
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
	out, err := pgx.CollectRows(rows, pgx.RowToStructByName[model.QueueConfig])
	if err != nil {
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

// Partitions lists a queue's partitions, by name, on the read pool.
func (s *Store) Partitions(ctx context.Context, queueID int64) ([]model.PartitionInfo, error) {
	return readpool.List(ctx, s.reads, func(ctx context.Context, q readpool.Querier) ([]model.PartitionInfo, error) {
		return partitions(ctx, q, queueID)
	})
}

func partitions(ctx context.Context, q readpool.Querier, queueID int64) ([]model.PartitionInfo, error) {
	rows, err := q.Query(ctx, partitionsSQL, queueID)
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
