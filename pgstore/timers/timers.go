// Package timers is the timers' part of the PostgreSQL store: scheduling,
// cancelling and listing pending timers, firing due ones in one
// transaction each (queen.timer_fire), and the LISTEN that wakes the fire
// loops. pgstore.Store embeds its Store.
package timers

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/queengate/queengate/model"
)

// Store is the timers' part of the store, over the pool of the
// pgstore.Store that embeds it. It is safe for concurrent use.
type Store struct {
	pool *pgxpool.Pool
	// acquire takes a connection and its store epoch (a cache learns a
	// fire only under the epoch it read).
	acquire func(ctx context.Context) (*pgxpool.Conn, uint64, error)
	// classify names the store's errors (an unknown partition).
	classify func(error) error
}

// New is the timers' store over pool, taking its fire connections with
// acquire and naming errors with classify.
func New(pool *pgxpool.Pool, acquire func(ctx context.Context) (*pgxpool.Conn, uint64, error), classify func(error) error) *Store {
	return &Store{pool: pool, acquire: acquire, classify: classify}
}

// TimerNotifyChannel is the LISTEN channel a schedule notifies when its
// timer is due within model.TimerNotifyHorizon: fire loops sleeping
// longer wake up and look again.
const TimerNotifyChannel = "queen_timers"

// scheduleSQL inserts a timer, or finds the pending one of the same
// transactionId in the partition. A timer due within the notify horizon
// notifies the fire loops (delivered on commit).
const scheduleSQL = `
WITH ins AS (
	INSERT INTO queen.timers (partition_id, fire_at, txn_id, hash, data, data_bytes, meta)
	VALUES (@partition_id, @fire_at, @txn_id, @hash, @data::text::json, octet_length(@data), @meta::text)
	ON CONFLICT (partition_id, hash) DO NOTHING
	RETURNING id, fire_at
), notify AS (
	SELECT pg_notify('` + TimerNotifyChannel + `', (extract(epoch FROM ins.fire_at) * 1000)::bigint::text) FROM ins
	 WHERE ins.fire_at < now() + make_interval(secs => @notify_horizon_seconds)
)
SELECT id::text, fire_at, false, (SELECT count(*) FROM notify) FROM ins
UNION ALL
SELECT t.id::text, t.fire_at, true, 0 FROM queen.timers t
 WHERE t.partition_id = @partition_id AND t.hash = @hash AND NOT EXISTS (SELECT 1 FROM ins)`

// ScheduleTimer stores a pending timer whose transactionId is fixed here,
// or answers the one already pending for that transactionId in the
// partition (so a retried schedule makes no second timer).
func (s *Store) ScheduleTimer(ctx context.Context, partitionID int64, txnID string, data, meta []byte, fireAt time.Time) (model.ScheduledTimer, error) {
	h := model.HashTxnID(txnID)
	data = model.StoredData(data)
	// The pending row a conflict names may have committed after this
	// statement's snapshot: then neither branch returns it, and a second
	// try sees it.
	for range 3 {
		t := model.ScheduledTimer{PartitionID: partitionID, TxnID: txnID}
		var notified int64
		err := s.pool.QueryRow(ctx, scheduleSQL, pgx.NamedArgs{"partition_id": partitionID, "fire_at": fireAt, "txn_id": txnID,
			"hash": h[:], "data": string(data), "notify_horizon_seconds": model.TimerNotifyHorizon.Seconds(), "meta": nullText(meta)}).Scan(&t.ID, &t.FireAt, &t.Existing, &notified)
		if errors.Is(err, pgx.ErrNoRows) {
			continue
		}
		if err != nil {
			return model.ScheduledTimer{}, fmt.Errorf("pgstore: schedule timer: %w", s.classify(err))
		}
		return t, nil
	}
	return model.ScheduledTimer{}, fmt.Errorf("pgstore: schedule timer: %s keeps changing under concurrent schedules and fires", txnID)
}

// nullText is b as a text parameter, NULL for nil.
func nullText(b []byte) *string {
	if b == nil {
		return nil
	}
	t := string(b)
	return &t
}

// CancelTimer deletes a pending timer: true if it was pending. A timer
// being fired at that moment is waited for: if the fire commits, the
// answer is false (no longer pending); if it rolls back, the cancel wins.
func (s *Store) CancelTimer(ctx context.Context, id string) (bool, error) {
	tag, err := s.pool.Exec(ctx, "DELETE FROM queen.timers WHERE id = $1::uuid", id)
	if err != nil {
		return false, fmt.Errorf("pgstore: cancel timer: %w", err)
	}
	return tag.RowsAffected() == 1, nil
}

// ListTimers lists pending timers, due first (by fire time, then id),
// from the position from on (nil: the first); queue "" lists all queues.
func (s *Store) ListTimers(ctx context.Context, queue string, limit int, from *model.TimerKey) ([]model.TimerInfo, error) {
	var fromAt *time.Time
	fromID := "00000000-0000-0000-0000-000000000000"
	if from != nil {
		fromAt, fromID = &from.FireAt, from.ID
	}
	rows, err := s.pool.Query(ctx, `
		SELECT t.id::text, q.name, p.name, t.txn_id, t.fire_at, t.created_at
		  FROM queen.timers t
		  JOIN queen.log_partitions p ON p.id = t.partition_id
		  JOIN queen.queues q ON q.id = p.queue_id
		 WHERE (@queue = '' OR q.name = @queue)
		   AND (@from_at::timestamptz IS NULL OR (t.fire_at, t.id) >= (@from_at::timestamptz, @from_id::uuid))
		 ORDER BY t.fire_at, t.id
		 LIMIT @limit`, pgx.NamedArgs{"queue": queue, "limit": limit, "from_at": fromAt, "from_id": fromID})
	if err != nil {
		return nil, fmt.Errorf("pgstore: list timers: %w", err)
	}
	return pgx.CollectRows(rows, func(row pgx.CollectableRow) (model.TimerInfo, error) {
		var t model.TimerInfo
		err := row.Scan(&t.ID, &t.Queue, &t.Partition, &t.TxnID, &t.FireAt, &t.CreatedAt)
		return t, err
	})
}

// MaxFireBytes bounds the data one fire transaction takes (at least one
// timer whatever its size).
const MaxFireBytes = 64 << 20

// FireDue fires up to limit due timers, and about MaxFireBytes of their
// data, in one transaction (queen.timer_fire). beforeCommit, when not nil, runs after the fire and
// before COMMIT: an error from it rolls everything back (tests inject
// faults there). On any error nothing was fired.
func (s *Store) FireDue(ctx context.Context, limit int, beforeCommit func([]model.FiredTimer) error) ([]model.FiredTimer, error) {
	// A cache learns a fire only under the epoch it read (Epoch).
	conn, n, err := s.acquire(ctx)
	if err != nil {
		return nil, fmt.Errorf("pgstore: fire timers: %w", err)
	}
	defer conn.Release()
	tx, err := conn.Begin(ctx)
	if err != nil {
		return nil, fmt.Errorf("pgstore: fire timers: %w", err)
	}
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()
	rows, err := tx.Query(ctx,
		"SELECT timer_id::text, partition_id, msg_offset, txn_id, fire_at, fired_at FROM queen.timer_fire($1, $2)",
		limit, MaxFireBytes)
	if err != nil {
		return nil, fmt.Errorf("pgstore: fire timers: %w", err)
	}
	fired, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (model.FiredTimer, error) {
		var f model.FiredTimer
		err := row.Scan(&f.ID, &f.PartitionID, &f.Offset, &f.TxnID, &f.FireAt, &f.FiredAt)
		f.Epoch = n
		return f, err
	})
	if err != nil {
		return nil, fmt.Errorf("pgstore: fire timers: %w", err)
	}
	if beforeCommit != nil {
		if err := beforeCommit(fired); err != nil {
			return nil, err
		}
	}
	if err := tx.Commit(ctx); err != nil {
		return nil, fmt.Errorf("pgstore: fire timers: commit: %w", err)
	}
	return fired, nil
}

// NextTimerDue is how long until the earliest pending timer is due, by
// PostgreSQL's clock (0 if one is due already), and its fireAt in Unix
// milliseconds; ok is false when none is pending.
func (s *Store) NextTimerDue(ctx context.Context) (wait time.Duration, atMs int64, ok bool, err error) {
	var at *time.Time
	var ms *float64
	err = s.pool.QueryRow(ctx, `
		SELECT n.at, extract(epoch FROM n.at - clock_timestamp()) * 1000
		  FROM (SELECT min(fire_at) AS at FROM queen.timers) AS n`).Scan(&at, &ms)
	if err != nil {
		return 0, 0, false, fmt.Errorf("pgstore: next timer: %w", err)
	}
	if at == nil || ms == nil {
		return 0, 0, false, nil
	}
	return max(0, time.Duration(*ms*float64(time.Millisecond))), at.UnixMilli(), true, nil
}

// PendingTimers counts pending timers.
func (s *Store) PendingTimers(ctx context.Context) (int64, error) {
	var n int64
	if err := s.pool.QueryRow(ctx, "SELECT count(*) FROM queen.timers").Scan(&n); err != nil {
		return 0, fmt.Errorf("pgstore: count timers: %w", err)
	}
	return n, nil
}

// TimerListener receives schedule notifications on its own connection.
type TimerListener struct {
	conn *pgxpool.Conn
}

// ListenTimers takes a connection from the pool for LISTEN. Close it to
// give the connection back.
func (s *Store) ListenTimers(ctx context.Context) (model.TimerListener, error) {
	conn, err := s.pool.Acquire(ctx)
	if err != nil {
		return nil, fmt.Errorf("pgstore: listen timers: %w", err)
	}
	if _, err := conn.Exec(ctx, "LISTEN "+TimerNotifyChannel); err != nil {
		conn.Release()
		return nil, fmt.Errorf("pgstore: listen timers: %w", err)
	}
	return &TimerListener{conn: conn}, nil
}

// Wait blocks until a schedule notifies or ctx ends, and returns the
// scheduled timer's fireAt in Unix milliseconds (0 if unreadable: treat
// as "look now").
func (l *TimerListener) Wait(ctx context.Context) (int64, error) {
	n, err := l.conn.Conn().WaitForNotification(ctx)
	if err != nil {
		return 0, err
	}
	at, _ := strconv.ParseInt(n.Payload, 10, 64)
	return at, nil
}

// Close ends the listener; its connection is closed rather than reused,
// since it may be mid-wait or still subscribed.
func (l *TimerListener) Close() {
	_ = l.conn.Conn().Close(context.Background())
	l.conn.Release()
}
