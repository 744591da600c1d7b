package target

import (
	"context"
	"fmt"
	"slices"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/queengate/queengate/internal/bench"
	"github.com/queengate/queengate/model"
)

// Naive is what a user would build instead of queengate: one row per
// message in a table with a unique index on (partition, txn_id), so that
// PostgreSQL rejects a repeated transactionId. It deduplicates forever: the
// unique index has no window, so Workload.WindowSeconds is ignored.
type Naive struct {
	pgURL string
	// pool is replaced by Setup, sized for the workload's producers; Send
	// never runs concurrently with Setup.
	pool *pgxpool.Pool
}

var _ bench.Target = (*Naive)(nil)

// NewNaive connects to the PostgreSQL at pgURL. The schema is created
// by Setup.
func NewNaive(ctx context.Context, pgURL string) (*Naive, error) {
	pool, err := openPeerPool(ctx, pgURL, 1)
	if err != nil {
		return nil, fmt.Errorf("naive: %w", err)
	}
	return &Naive{pgURL: pgURL, pool: pool}, nil
}

// Name implements Target.
func (t *Naive) Name() string { return "naive" }

const naiveSchemaSQL = `
DROP SCHEMA IF EXISTS bench_naive CASCADE;
CREATE SCHEMA bench_naive;
CREATE TABLE bench_naive.messages (
    partition  text NOT NULL,
    txn_id     text NOT NULL,
    data       json NOT NULL,
    id         bigserial PRIMARY KEY,
    created_at timestamptz NOT NULL DEFAULT now()
);
CREATE UNIQUE INDEX messages_partition_txn_id ON bench_naive.messages (partition, txn_id);
`

// Setup implements Target: it recreates the schema, so every run starts
// from an empty table, and opens a pool with a connection per producer.
func (t *Naive) Setup(ctx context.Context, w bench.Workload) error {
	pool, err := openPeerPool(ctx, t.pgURL, w.Producers)
	if err != nil {
		return fmt.Errorf("naive: %w", err)
	}
	t.pool.Close()
	t.pool = pool
	if _, err := t.pool.Exec(ctx, naiveSchemaSQL); err != nil {
		return fmt.Errorf("naive: create schema: %w", err)
	}
	return nil
}

// naiveSendSQL inserts the batch and, for the rows that conflicted, reads the
// original's id, as queengate's answer carries it. The lookup only probes
// the conflicted ids. It runs on the statement's snapshot, so it cannot see
// an original committed by a concurrent transaction after the statement
// began (ON CONFLICT waited for that transaction, but the snapshot predates
// it): Send looks those up again with naiveLookupSQL.
const naiveSendSQL = `
WITH batch AS (
    SELECT b.txn_id, b.data::json AS data
    FROM unnest($2::text[], $3::text[]) WITH ORDINALITY AS b(txn_id, data, ord)
    ORDER BY b.ord
), ins AS (
    INSERT INTO bench_naive.messages (partition, txn_id, data)
    SELECT $1, txn_id, data FROM batch
    ON CONFLICT (partition, txn_id) DO NOTHING
    RETURNING txn_id, id
)
SELECT txn_id, id, true AS inserted FROM ins
UNION ALL
SELECT m.txn_id, m.id, false FROM bench_naive.messages m
WHERE m.partition = $1
  AND m.txn_id = ANY (ARRAY(SELECT txn_id FROM batch EXCEPT SELECT txn_id FROM ins))
`

// naiveLookupSQL reads originals that naiveSendSQL's snapshot could not see.
const naiveLookupSQL = `
SELECT txn_id, id FROM bench_naive.messages WHERE partition = $1 AND txn_id = ANY ($2::text[])
`

// Send implements Target in one round trip and one statement (a second
// round trip only for originals committed concurrently, see naiveSendSQL).
func (t *Naive) Send(ctx context.Context, _ int, b *bench.Batch) ([]model.Status, error) {
	statuses := make([]model.Status, len(b.IDs))
	first := firstOccurrences(b.IDs, statuses)
	// Insert in a fixed (sorted) order: two batches inserting the same ids in
	// different orders would each wait on the other's uncommitted index entry
	// and deadlock.
	ids := make([]string, 0, len(first))
	for id := range first {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	data := make([]string, len(ids))
	for k, id := range ids {
		data[k] = string(b.Data[first[id]])
	}
	partition := b.Queue + "/" + b.Partition

	answered, err := t.insert(ctx, partition, ids, data, first, statuses)
	if err != nil {
		return nil, err
	}
	if answered == len(ids) {
		return statuses, nil
	}
	found, err := t.lookUpOriginals(ctx, partition, ids, first, statuses)
	if err != nil {
		return nil, err
	}
	if answered += found; answered != len(ids) {
		// A conflict means the original exists; nothing deletes rows.
		return nil, fmt.Errorf("naive: %d originals not found in partition %q", len(ids)-answered, partition)
	}
	return statuses, nil
}

// firstOccurrences maps each id to its first index in ids and marks every
// later occurrence a duplicate in statuses: ON CONFLICT cannot see rows
// inserted by its own statement, so repeats within the batch are resolved
// here.
func firstOccurrences(ids []string, statuses []model.Status) map[string]int {
	first := make(map[string]int, len(ids))
	for i, id := range ids {
		if _, seen := first[id]; seen {
			statuses[i] = model.StatusDuplicate
			continue
		}
		first[id] = i
	}
	return first
}

// insert inserts the batch's distinct ids, setting the status of each id
// the statement answers; it returns how many it answered.
func (t *Naive) insert(ctx context.Context, partition string, ids, data []string, first map[string]int, statuses []model.Status) (int, error) {
	rows, err := t.pool.Query(ctx, naiveSendSQL, partition, ids, data)
	if err != nil {
		return 0, fmt.Errorf("naive: insert: %w", err)
	}
	answered := 0
	var (
		txnID    string
		msgID    int64
		inserted bool
	)
	for rows.Next() {
		if err := rows.Scan(&txnID, &msgID, &inserted); err != nil {
			rows.Close()
			return 0, fmt.Errorf("naive: insert: %w", err)
		}
		statuses[first[txnID]] = model.StatusDuplicate
		if inserted {
			statuses[first[txnID]] = model.StatusQueued
		}
		answered++
	}
	if err := rows.Err(); err != nil {
		return 0, fmt.Errorf("naive: insert: %w", err)
	}
	return answered, nil
}

// lookUpOriginals finds the ids insert left unanswered: originals
// committed by a concurrent batch after the statement's snapshot was
// taken. It marks them duplicates and returns how many it found.
func (t *Naive) lookUpOriginals(ctx context.Context, partition string, ids []string, first map[string]int, statuses []model.Status) (int, error) {
	var missing []string
	for _, id := range ids {
		if statuses[first[id]] == 0 {
			missing = append(missing, id)
		}
	}
	rows, err := t.pool.Query(ctx, naiveLookupSQL, partition, missing)
	if err != nil {
		return 0, fmt.Errorf("naive: look up originals: %w", err)
	}
	found := 0
	var (
		txnID string
		msgID int64
	)
	for rows.Next() {
		if err := rows.Scan(&txnID, &msgID); err != nil {
			rows.Close()
			return 0, fmt.Errorf("naive: look up originals: %w", err)
		}
		statuses[first[txnID]] = model.StatusDuplicate
		found++
	}
	if err := rows.Err(); err != nil {
		return 0, fmt.Errorf("naive: look up originals: %w", err)
	}
	return found, nil
}

// Figures implements Target. PostgreSQL is shared with the other targets
// and queenbench cannot tell this target's share, so CPU and memory are
// left unknown.
func (t *Naive) Figures(context.Context) (bench.Figures, error) {
	return bench.UnknownFigures(), nil
}

// Close implements Target; the schema is left for inspection.
func (t *Naive) Close() error {
	t.pool.Close()
	return nil
}

// openPeerPool opens a pool on pgURL with at least one connection per
// producer, and establishes that many connections now. Send holds a
// connection for its round trip, so a smaller pool would queue producers in
// the pool rather than in PostgreSQL; connecting up front keeps connection
// setup out of the measured run.
func openPeerPool(ctx context.Context, pgURL string, producers int) (*pgxpool.Pool, error) {
	cfg, err := pgxpool.ParseConfig(pgURL)
	if err != nil {
		return nil, fmt.Errorf("parse postgres url: %w", err)
	}
	producers = max(producers, 1)
	cfg.MaxConns = max(cfg.MaxConns, int32(producers))
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("open pool: %w", err)
	}
	// Holding every connection at once forces each one to be established.
	conns := make([]*pgxpool.Conn, 0, producers)
	for range producers {
		var c *pgxpool.Conn
		if c, err = pool.Acquire(ctx); err != nil {
			err = fmt.Errorf("connect: %w", err)
			break
		}
		conns = append(conns, c)
	}
	for _, c := range conns {
		c.Release()
	}
	if err != nil {
		// Close waits for acquired connections, so only after releasing.
		pool.Close()
		return nil, err
	}
	return pool, nil
}
