package target

import (
	"context"
	"fmt"
	"sync/atomic"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/queengate/queengate/internal/bench"
	"github.com/queengate/queengate/model"
)

// Ceiling writes the same rows straight into PostgreSQL as fast as it
// can, with no deduplication: the physical limit that queengate's cost is
// measured against. Each batch becomes one row in queengate's frame layout
// (see pgstore's log_segments), so the difference to queengate is the
// deduplication and the offset allocation, not the storage format.
type Ceiling struct {
	pgURL string
	// pool is replaced by Setup, sized for the workload's producers; Send
	// never runs concurrently with Setup.
	pool *pgxpool.Pool
	// nextOffset hands out base offsets. One in-process counter for all
	// partitions: the ceiling has no allocator row to lock, and no
	// constraint needs the offsets to be dense per partition.
	nextOffset atomic.Int64
}

var _ bench.Target = (*Ceiling)(nil)

// NewCeiling connects to the PostgreSQL at pgURL. The schema is
// created by Setup.
func NewCeiling(ctx context.Context, pgURL string) (*Ceiling, error) {
	pool, err := openPeerPool(ctx, pgURL, 1)
	if err != nil {
		return nil, fmt.Errorf("ceiling: %w", err)
	}
	return &Ceiling{pgURL: pgURL, pool: pool}, nil
}

// Name implements Target.
func (t *Ceiling) Name() string { return "ceiling" }

// ceilingSchemaSQL mirrors queen.log_segments without its key, foreign key
// and end_offset: nothing is checked on write.
const ceilingSchemaSQL = `
DROP SCHEMA IF EXISTS bench_ceiling CASCADE;
CREATE SCHEMA bench_ceiling;
CREATE TABLE bench_ceiling.frames (
    partition   text NOT NULL,
    base_offset bigint NOT NULL,
    created_at  timestamptz NOT NULL,
    txn_ids     text[] COMPRESSION lz4 NOT NULL,
    data        json[] COMPRESSION lz4 NOT NULL
);
`

// Setup implements Target: it recreates the schema, so every run starts
// from an empty table, and opens a pool with a connection per producer.
// The ceiling does not deduplicate, so Workload.WindowSeconds is ignored.
func (t *Ceiling) Setup(ctx context.Context, w bench.Workload) error {
	pool, err := openPeerPool(ctx, t.pgURL, w.Producers)
	if err != nil {
		return fmt.Errorf("ceiling: %w", err)
	}
	t.pool.Close()
	t.pool = pool
	if _, err := t.pool.Exec(ctx, ceilingSchemaSQL); err != nil {
		return fmt.Errorf("ceiling: create schema: %w", err)
	}
	t.nextOffset.Store(0)
	return nil
}

// ceilingInsertSQL writes one frame. The data travels as text[] and is cast
// to json[], so PostgreSQL validates each message as queengate's frame
// insert does.
const ceilingInsertSQL = `
INSERT INTO bench_ceiling.frames (partition, base_offset, created_at, txn_ids, data)
VALUES ($1, $2, now(), $3::text[], $4::text[]::json[])
`

// Send implements Target with one INSERT of one row; every message is
// answered queued, repeats included.
func (t *Ceiling) Send(ctx context.Context, _ int, b *bench.Batch) ([]model.Status, error) {
	data := make([]string, len(b.Data))
	for i, d := range b.Data {
		data[i] = string(d)
	}
	n := int64(len(b.IDs))
	base := t.nextOffset.Add(n) - n
	partition := b.Queue + "/" + b.Partition
	if _, err := t.pool.Exec(ctx, ceilingInsertSQL, partition, base, b.IDs, data); err != nil {
		return nil, fmt.Errorf("ceiling: insert frame: %w", err)
	}
	statuses := make([]model.Status, len(b.IDs))
	for i := range statuses {
		statuses[i] = model.StatusQueued
	}
	return statuses, nil
}

// Figures implements Target. PostgreSQL is shared with the other targets
// and queenbench cannot tell this target's share, so CPU and memory are
// left unknown.
func (t *Ceiling) Figures(context.Context) (bench.Figures, error) {
	return bench.UnknownFigures(), nil
}

// Close implements Target; the schema is left for inspection.
func (t *Ceiling) Close() error {
	t.pool.Close()
	return nil
}
