package pgstore

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/queengate/queengate/model"
	"github.com/queengate/queengate/pgstore/internal/pgwire"
)

// tailCycleSQL is queen.consumer_cycle's usual case as one plain
// statement, for a gateway that decided the ack and holds the next
// messages itself (docs/design.md, "The tail"): when the cursor is
// exactly the lease the gateway remembers and every condition of
// consumer_cycle's ack holds, the cursor row moves past the acked lease,
// and takes the next one, To+1..Hi, when every condition of its pop
// holds too (popping); else the ack alone is settled, as consumer_cycle
// settles it, and the caller pops the usual way (another partition's
// turn, most often: least recently leased first). No row: nothing
// changed.
//
// Beside consumer_cycle's conditions, two columns stand in for what it
// reads of the log: txns_start at or below From keeps the hashes
// consumer_ack_is_whole_lease would compare the ack with, and
// segments_start at or below To+1 keeps the frames consumer_pop_slice
// would read (retention and purges raise both as they delete).
//
// Lock order (LOCKS.md): the cursor row only, as an ack; the others are
// read without a lock.
const tailCycleSQL = `WITH clock AS MATERIALIZED (SELECT clock_timestamp() AS now),
cur AS MATERIALIZED (
SELECT cc.group_id, cc.partition_id, p.name, q.retry_delay_ms, q.retry_backoff_ms,
       -- the pop, as consumer_cycle takes it
       least(p.last_offset, @to::bigint + @max::bigint) = @hi::bigint AND @to + 1 <= @hi AND p.segments_start <= @to + 1
       AND p.queue_id = @queue_id AND coalesce(q.max_ack_pending, 0) <= 0 AND NOT cc.parked AND cc.leased_at IS NOT NULL
       AND coalesce(@named::bigint = @partition_id,
                -- consumer_wake_due
                -- (the newest frame's pushed_by, not an EXISTS of a frame at or
                -- above woken_to: the index's last entry whatever the plan,
                -- where the EXISTS, planned generic while the log was small,
                -- scanned the whole log)
                NOT (EXISTS (SELECT 1 FROM queen.consumer_cursors pc WHERE pc.group_id = @group_id AND pc.parked)
                     AND coalesce((SELECT max(s.pushed_by) FROM queen.log_segments s)
                                  >= (SELECT g.woken_to FROM queen.consumer_groups g WHERE g.id = @group_id), false))
                AND NOT EXISTS (
                    SELECT 1 FROM queen.consumer_cursors o JOIN queen.log_partitions op ON op.id = o.partition_id
                     WHERE o.group_id = @group_id AND NOT o.parked AND o.leased_at IS NULL
                       AND queen.consumer_free(o.lease_id, o.lease_until, o.lease_heard, o.lease_delay, o.delayed_until, clock.now)
                       AND o.next_offset <= op.last_offset)
                AND NOT EXISTS (
                    SELECT 1 FROM queen.consumer_cursors o JOIN queen.log_partitions op ON op.id = o.partition_id
                     WHERE o.group_id = @group_id AND NOT o.parked AND (o.leased_at, o.partition_id) < (cc.leased_at, @partition_id)
                       AND queen.consumer_free(o.lease_id, o.lease_until, o.lease_heard, o.lease_delay, o.delayed_until, clock.now)
                       AND o.next_offset <= op.last_offset)) AS popping
  FROM clock, queen.consumer_cursors cc JOIN queen.log_partitions p ON p.id = cc.partition_id JOIN queen.queues q ON q.id = p.queue_id
 WHERE cc.group_id = @group_id AND cc.partition_id = @partition_id
   -- the ack, as consumer_cycle takes it
   AND cc.lease_id = @lease AND cc.lease_from = @from AND cc.lease_to = @to AND cc.lease_until > clock.now
   AND cc.next_offset = cc.lease_from AND cc.delivered_to = cc.lease_to AND NOT cc.lease_counted
   AND (cc.delayed_until IS NULL OR cc.delayed_until <= clock.now)
   AND NOT EXISTS (SELECT 1 FROM queen.consumer_marks m WHERE m.group_id = @group_id AND m.partition_id = @partition_id)
   AND p.txns_start <= @from
   FOR UPDATE OF cc)
UPDATE queen.consumer_cursors cc
   SET next_offset = @to + 1, lease_heard = false, lease_counted = false,
       lease_id = CASE WHEN cur.popping THEN gen_random_uuid() END,
       lease_from = CASE WHEN cur.popping THEN @to + 1 END,
       lease_to = CASE WHEN cur.popping THEN @hi END,
       lease_until = CASE WHEN cur.popping THEN clock.now + make_interval(secs => @lease_seconds) END,
       lease_consumer = CASE WHEN cur.popping THEN @consumer ELSE cc.lease_consumer END,
       delivered_to = CASE WHEN cur.popping THEN @hi ELSE cc.delivered_to END,
       leased_at = CASE WHEN cur.popping THEN clock.now ELSE cc.leased_at END,
       lease_delivered_before = CASE WHEN cur.popping THEN cc.delivered_to ELSE cc.lease_delivered_before END,
       lease_delay = CASE WHEN NOT cur.popping THEN cc.lease_delay
                          WHEN cur.retry_delay_ms > 0 OR cardinality(cur.retry_backoff_ms) > 0
                          THEN queen.consumer_retry_delay(cur.retry_delay_ms, cur.retry_backoff_ms, 1) END,
       delayed_until = CASE WHEN cur.popping THEN NULL ELSE cc.delayed_until END
  FROM clock, cur
 WHERE cc.group_id = cur.group_id AND cc.partition_id = cur.partition_id
RETURNING cur.name, cur.popping, cc.lease_id, cc.lease_until`

// TailCycle runs the cycle c in one statement on a connection of store
// epoch c.Epoch: the ack settled, and the next lease taken when popped.
// ok false when it changed nothing (the cursor, the partition or the
// queue not as c needs them, or PostgreSQL changed since the gateway's
// memory was filled): the caller takes the usual path.
func (s *Store) TailCycle(ctx context.Context, c model.TailCycle) (lease model.TailLease, popped, ok bool, err error) {
	conn, n, err := s.acquire(ctx)
	if err != nil {
		return model.TailLease{}, false, false, fmt.Errorf("pgstore: pop %s/%s: %w", c.Pop.Group.Queue, c.Pop.Group.Name, err)
	}
	defer conn.Release()
	var acked pgtype.UUID
	if n != c.Epoch || acked.Scan(c.LeaseID) != nil {
		return model.TailLease{}, false, false, nil
	}
	var (
		taken pgtype.UUID
		until *time.Time
	)
	err = conn.QueryRow(ctx, tailCycleSQL, pgx.NamedArgs{"group_id": c.Pop.Group.ID, "partition_id": c.PartitionID,
		"lease": acked, "from": c.From, "to": c.To, "hi": c.Hi, "max": int64(c.Pop.Max), "queue_id": c.Pop.Group.QueueID,
		"named": c.Pop.NamedPartition(), "consumer": c.Pop.Consumer, "lease_seconds": c.Pop.Lease.Seconds()}).
		Scan(&lease.Partition, &popped, &taken, &until)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return model.TailLease{}, false, false, nil
	case err != nil:
		return model.TailLease{}, false, false, fmt.Errorf("pgstore: pop %s/%s: %w", c.Pop.Group.Queue, c.Pop.Group.Name, err)
	case !popped:
		return model.TailLease{}, false, true, nil
	}
	lease.LeaseID, lease.LeaseUntil = taken.String(), *until
	return lease, true, true, nil
}

// TailSlice reads what consumer_pop_slice answers for messages lo..hi of
// partition pid within budget (ok false: no row), and what
// consumer_ack_is_whole_lease says of items against offsets from..to:
// the check a gateway in check mode makes of every cycle it served from
// its memory.
func (s *Store) TailSlice(ctx context.Context, pid, from, to, lo, hi, budget int64, items []model.Settlement) (
	msgs []model.LogMessage, whole, ok bool, err error) {
	offsets, hashes, completed, _ := pgwire.AckArrays(items)
	// The ack's verdict whether or not the slice is found (a cycle may
	// have settled the ack alone).
	rows, err := s.pool.Query(ctx, `SELECT x.offs, x.txn_ids, x.data::text[], x.meta::text[], x.created_at,
		queen.consumer_ack_is_whole_lease(@pid, @from, @to, @offsets, @hashes, @completed)
		FROM (SELECT 1) one LEFT JOIN LATERAL queen.consumer_pop_slice(@pid, @lo, @hi, @envelope, @budget) x ON true`,
		pgx.NamedArgs{"pid": pid, "from": from, "to": to, "lo": lo, "hi": hi, "envelope": model.DeliveryEnvelope,
			"offsets": offsets, "hashes": hashes, "completed": completed, "budget": budget})
	if err != nil {
		return nil, false, false, err
	}
	defer rows.Close()
	for rows.Next() {
		var (
			offs    []int64
			txns    []string
			data    []string
			meta    []*string // nil when no message has any
			created []time.Time
		)
		if err := rows.Scan(&offs, &txns, &data, &meta, &created, &whole); err != nil {
			return nil, false, false, err
		}
		if offs == nil {
			continue
		}
		for i := range offs {
			msgs = append(msgs, model.LogMessage{PartitionID: pid, Offset: offs[i], TxnID: txns[i], Data: []byte(data[i]),
				CreatedAt: created[i]})
			if meta != nil && meta[i] != nil {
				msgs[len(msgs)-1].Meta = []byte(*meta[i])
			}
		}
		ok = true
	}
	return msgs, whole, ok, rows.Err()
}
