package groups

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sort"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/queengate/queengate/model"
	"github.com/queengate/queengate/pgstore/internal/pgwire"
	"github.com/queengate/queengate/pgstore/internal/readpool"
)

// EnsureGroup returns queue's consumer group name, creating it (the
// group, not the queue) if it does not exist: a pop names its group into
// being. ErrQueueNotFound for a queue that does not exist. The group is
// created with a cursor on every partition of the queue
// (queen.ensure_group); concurrent first pops of a group create it once.
func (s *Store) EnsureGroup(ctx context.Context, queue, name string) (model.Group, error) {
	g, err := s.FindGroup(ctx, queue, name)
	if !errors.Is(err, model.ErrGroupNotFound) {
		return g, err
	}
	if err := s.pool.QueryRow(ctx, "SELECT queen.ensure_group($1, $2)", g.QueueID, name).Scan(&g.ID); err != nil {
		return g, fmt.Errorf("pgstore: consumer group %s/%s: %w", queue, name, err)
	}
	return g, nil
}

// FindGroup returns queue's consumer group name; ErrQueueNotFound or
// ErrGroupNotFound if either does not exist.
func (s *Store) FindGroup(ctx context.Context, queue, name string) (model.Group, error) {
	g := model.Group{Queue: queue, Name: name}
	var gid *int64
	err := s.pool.QueryRow(ctx, `
		SELECT q.id, g.id FROM queen.queues q
		  LEFT JOIN queen.consumer_groups g ON g.queue_id = q.id AND g.name = $2
		 WHERE q.name = $1`, queue, name).Scan(&g.QueueID, &gid)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return g, fmt.Errorf("%w: %s", model.ErrQueueNotFound, queue)
	case err != nil:
		return g, fmt.Errorf("pgstore: consumer group %s/%s: %w", queue, name, err)
	case gid == nil:
		return g, fmt.Errorf("%w: %q of queue %s (a group is created by its first pop, or by a create)", model.ErrGroupNotFound, name, queue)
	}
	g.ID = *gid
	return g, nil
}

// PartitionID is the id of queue's partition name; ErrNotFound if it
// does not exist.
func (s *Store) PartitionID(ctx context.Context, queueID int64, name string) (int64, error) {
	var id int64
	err := s.pool.QueryRow(ctx, "SELECT id FROM queen.log_partitions WHERE queue_id = $1 AND name = $2", queueID, name).Scan(&id)
	if errors.Is(err, pgx.ErrNoRows) {
		return 0, fmt.Errorf("%w: partition %s", model.ErrNotFound, name)
	}
	if err != nil {
		return 0, fmt.Errorf("pgstore: partition %s: %w", name, err)
	}
	return id, nil
}

// Pop leases a partition with work to the request's consumer and returns
// what it delivers (docs/design.md, "Consuming"). Messages out of
// attempts, and those too large for any pop to deliver, are then moved
// to the dead-letter queue.
func (s *Store) Pop(ctx context.Context, r model.PopQuery) (model.PopResult, error) {
	var out model.PopResult
	err := func() error {
		// One row always: whether the group exists (a deleted group has
		// no cursors, so its pops would find nothing, forever) beside the
		// pop's row, NULLs when no partition has work. The cursor as the
		// statement found it (its snapshot predates the pop's update; one
		// look-up by key) says whether the pop ended a lease that had run
		// out: pops take only partitions without a running lease.
		rows, err := s.pool.Query(ctx, `SELECT x.partition_id, x.partition, x.lease_id, x.lease_until, x.offs, x.txn_ids,
			x.data::text[] AS data, x.meta::text[] AS meta, x.created_at, x.attempts, x.last_errors, x.dead, x.too_large,
			coalesce(x.held, false) AS held, g.id IS NOT NULL AS group_exists,
			coalesce((SELECT before.lease_id IS NOT NULL FROM queen.consumer_cursors before
			           WHERE before.group_id = a.id AND before.partition_id = x.partition_id), false) AS ran_out_lease
			  FROM (SELECT @group_id::bigint AS id) a LEFT JOIN queen.consumer_groups g ON g.id = a.id
			  LEFT JOIN queen.queues q ON q.id = @queue_id
			  LEFT JOIN LATERAL queen.consumer_pop(p_group_id => a.id, p_queue_id => @queue_id, p_partition_id => @partition_id,
			      p_max => @max, p_lease_seconds => @lease_seconds, p_consumer => @consumer, p_max_bytes => @max_bytes,
			      p_room => @room, p_envelope => @envelope, p_max_delivery => @max_delivery,
			      p_consumer_limit => @consumer_limit, p_group_limit => q.max_ack_pending) x ON true`,
			pgx.NamedArgs{"group_id": r.Group.ID, "queue_id": r.Group.QueueID, "partition_id": r.NamedPartition(), "max": r.Max,
				"lease_seconds": r.Lease.Seconds(), "consumer": r.Consumer, "max_bytes": r.MaxBytes, "room": r.Room,
				"envelope": model.DeliveryEnvelope, "max_delivery": r.MaxDelivery, "consumer_limit": r.MaxAckPending})
		var row popRow
		if err == nil {
			row, err = pgx.CollectExactlyOneRow(rows, pgx.RowToStructByName[popRow])
		}
		out.Held, out.RanOutLease = row.Held, row.RanOutLease
		switch {
		case err != nil:
			return err
		case !row.GroupExists:
			return groupNotFound(r.Group.Queue, r.Group.Name)
		case row.PartitionID == nil:
			return nil // no partition with work
		}
		s.deliverOrDeadLetter(ctx, r, &row, &out)
		return nil
	}()
	if err != nil {
		return model.PopResult{}, fmt.Errorf("pgstore: pop %s/%s: %w", r.Group.Queue, r.Group.Name, err)
	}
	return out, nil
}

// popRow is consumer_pop's answer: a partition, a lease, and its
// messages as arrays, one element per message.
type popRow struct {
	PartitionID *int64
	Partition   *string
	LeaseID     pgtype.UUID
	LeaseUntil  *time.Time
	Offsets     []int64 `db:"offs"`
	TxnIDs      pgwire.TextArray
	Data        pgwire.BytesArray
	Meta        pgwire.BytesArray
	CreatedAt   []time.Time
	Attempts    []int
	LastErrors  pgwire.TextArray
	Dead        []bool
	TooLarge    []bool
	// Held: the consumer or its group holds maxAckPending messages.
	Held bool
	// GroupExists: a deleted group's pops find nothing, ever.
	GroupExists bool
	// RanOutLease: the pop ended the partition's lease that had run out.
	RanOutLease bool
}

// deliveries fills out with the row's partition, lease and messages,
// and returns the dead ones (to dead-letter) and the offsets of those no
// pop could deliver.
func (row *popRow) deliveries(out *model.PopResult, maxDelivery int64) (dead []model.LeasedMessage, tooLarge []int64) {
	if len(row.Offsets) == 0 {
		return nil, nil
	}
	out.PartitionID, out.Partition = *row.PartitionID, *row.Partition
	out.Messages = make([]model.LeasedMessage, 0, len(row.Offsets))
	for i, off := range row.Offsets {
		d := model.LeasedMessage{LogMessage: storedMessage(out.PartitionID, off, &row.TxnIDs, &row.Data, &row.Meta, row.CreatedAt, i),
			Attempts: row.Attempts[i]}
		d.LastError, _ = row.LastErrors.At(i)
		if row.TooLarge[i] {
			d.LastError = tooLargeError(d, maxDelivery)
			tooLarge = append(tooLarge, d.Offset)
		}
		if row.Dead[i] {
			dead = append(dead, d)
			continue
		}
		out.Messages = append(out.Messages, d)
	}
	if len(out.Messages) > 0 {
		out.LeaseID, out.LeaseUntil = row.LeaseID.String(), *row.LeaseUntil
	}
	return dead, tooLarge
}

// storedMessage is the i-th of a pop's messages: its transactionId, data
// and meta are slices of the answer's arrays, not copies of their own
// (meta is a NULL array when no message has any).
func storedMessage(partitionID, offset int64, txnIDs *pgwire.TextArray, data, meta *pgwire.BytesArray, createdAt []time.Time, i int) model.LogMessage {
	txnID, _ := txnIDs.At(i)
	m := model.LogMessage{PartitionID: partitionID, Offset: offset, TxnID: txnID, Data: data.At(i), CreatedAt: createdAt[i]}
	if i < meta.Len() {
		m.Meta = meta.At(i)
	}
	return m
}

// Undo takes back a pop whose answer was never sent: the lease ends and
// the attempts it counted are uncounted, as if it had never run. It
// changes nothing (false) once the lease is no longer the partition's or
// its consumer was heard from.
func (s *Store) Undo(ctx context.Context, g model.Group, partitionID int64, leaseID string) (bool, error) {
	var lease pgtype.UUID
	if lease.Scan(leaseID) != nil {
		return false, nil
	}
	var undone bool
	if err := s.pool.QueryRow(ctx, "SELECT queen.consumer_undo($1, $2, $3)", g.ID, partitionID, lease).Scan(&undone); err != nil {
		return false, fmt.Errorf("pgstore: undo pop %s/%s: %w", g.Queue, g.Name, err)
	}
	return undone, nil
}

// Ack settles a batch of messages under a lease in one statement, then
// dead-letters those out of attempts.
func (s *Store) Ack(ctx context.Context, g model.Group, partitionID int64, leaseID string, items []model.Settlement) (model.SettledBatch, error) {
	out := model.SettledBatch{Items: make([]model.AckOutcome, len(items))}
	row, err := queryAck(ctx, s.pool, g, partitionID, leaseUUID(leaseID), items, &out)
	if err == nil {
		err = s.afterAck(ctx, g, partitionID, &row, &out)
	}
	if err != nil {
		return model.SettledBatch{}, fmt.Errorf("pgstore: ack %s/%s: %w", g.Queue, g.Name, err)
	}
	return out, nil
}

// afterAck fills out's items from consumer_ack's row, and moves what
// ran out of attempts to the dead-letter queue.
func (s *Store) afterAck(ctx context.Context, g model.Group, partitionID int64, row *ackRow, out *model.SettledBatch) error {
	dead := row.outcomes(out.Items, partitionID)
	if err := s.notHeldInGroup(ctx, g, out.Items); err != nil {
		return err
	}
	if len(dead) > 0 {
		var partition string
		if err := s.pool.QueryRow(ctx, "SELECT name FROM queen.log_partitions WHERE id = $1", partitionID).Scan(&partition); err != nil {
			return err
		}
		moved, next, ended, err := s.deadLetter(ctx, g, partition, dead)
		out.NextOffset = next
		out.DeadLettered = len(moved)
		out.DeadLetters = movedLetters(g, partition, dead, moved)
		out.LeaseEnded = out.LeaseEnded || ended
		if err != nil {
			return err
		}
	}
	return markDeadLettered(ctx, s.pool, g, partitionID, out.Items)
}

// leaseUUID is a lease id as consumer_ack takes it: not a uuid, no lease
// matches it.
func leaseUUID(leaseID string) pgtype.UUID {
	var lease pgtype.UUID
	if err := lease.Scan(leaseID); err != nil {
		return pgtype.UUID{}
	}
	return lease
}

// queryAck runs consumer_ack on q (the pool, or an ack-and-push's
// transaction), filling out's cursor and lease; out.Items are filled by
// the row's outcomes.
func queryAck(ctx context.Context, q pgwire.Querier, g model.Group, partitionID int64, lease pgtype.UUID, items []model.Settlement,
	out *model.SettledBatch) (ackRow, error) {
	rows, err := q.Query(ctx, ackStatement, ackArgs(g, partitionID, lease, items))
	if err != nil {
		return ackRow{}, err
	}
	return collectAck(rows, out)
}

// ackStatement settles one ack (queen.consumer_ack), with ackArgs.
const ackStatement = `SELECT offs, results, dead, txn_ids, data::text[] AS data, meta::text[] AS meta, created_at, attempts,
	last_errors, next_offset, lease_ended, lease_counted
	FROM queen.consumer_ack(@group_id, @partition_id, @lease, @offsets, @hashes, @completed, @errors, @delays)`

func ackArgs(g model.Group, partitionID int64, lease pgtype.UUID, items []model.Settlement) pgx.NamedArgs {
	offsets, hashes, completed, errs := pgwire.AckArrays(items)
	return pgx.NamedArgs{"group_id": g.ID, "partition_id": partitionID, "lease": lease, "offsets": offsets, "hashes": hashes,
		"completed": completed, "errors": errs, "delays": pgwire.AckDelays(items)}
}

// collectAck reads consumer_ack's row, filling out's cursor and lease.
func collectAck(rows pgx.Rows, out *model.SettledBatch) (ackRow, error) {
	row, err := pgx.CollectExactlyOneRow(rows, pgx.RowToStructByName[ackRow])
	out.NextOffset, out.LeaseEnded, out.LeaseCounted = row.NextOffset, row.LeaseEnded, row.LeaseCounted
	return row, err
}

// ackRow is consumer_ack's answer: arrays of one element per item (those
// saying what a dead letter needs only when an item failed).
type ackRow struct {
	Offsets    pgwire.AckOffsets `db:"offs"`
	Results    pgwire.AckResults
	Dead       []bool
	TxnIDs     []*string `db:"txn_ids"`
	Data       [][]byte
	Meta       [][]byte
	CreatedAt  []*time.Time
	Attempts   []*int
	LastErrors []*string
	// The group's cursor and lease after the ack.
	NextOffset   int64
	LeaseEnded   bool
	LeaseCounted bool
}

// outcomes fills each item's outcome and returns the messages out of
// attempts, to dead-letter.
func (row *ackRow) outcomes(items []model.AckOutcome, partitionID int64) (dead []model.LeasedMessage) {
	for i, off := range row.Offsets {
		items[i] = model.AckOutcome{Offset: -1, Result: row.Results[i]}
		if off != nil {
			items[i].Offset = *off
		}
		if i >= len(row.Dead) || !row.Dead[i] || row.TxnIDs[i] == nil {
			continue
		}
		d := model.LeasedMessage{LogMessage: model.LogMessage{PartitionID: partitionID, Offset: *off,
			TxnID: *row.TxnIDs[i], Data: row.Data[i], CreatedAt: *row.CreatedAt[i]}, Attempts: *row.Attempts[i]}
		if i < len(row.Meta) {
			d.Meta = row.Meta[i]
		}
		if row.LastErrors[i] != nil {
			d.LastError = *row.LastErrors[i]
		}
		dead = append(dead, d)
	}
	return dead
}

// markDeadLettered answers deadLettered, not alreadyAcked, for items
// whose message was settled by moving it to the dead-letter queue: its
// dead letter is there, within the dead-letter queue's window. Only
// retried or late acks pay for the look-up, read through q (the pool, or
// an ack-and-push's transaction).
func markDeadLettered(ctx context.Context, q pgwire.Querier, g model.Group, partitionID int64, items []model.AckOutcome) error {
	var hashes []model.Hash
	var offsets []int64 // of each hash
	for _, o := range items {
		if o.Result == model.AckAlready && o.Offset >= 0 && !slices.Contains(offsets, o.Offset) {
			hashes = append(hashes, model.HashTxnID(deadLetterID(g, partitionID, o.Offset)))
			offsets = append(offsets, o.Offset)
		}
	}
	if len(hashes) == 0 {
		return nil
	}
	rows, err := q.Query(ctx, `
		SELECT x.i::int FROM queen.log_partitions src
		  JOIN queen.queues dq ON dq.name = $1
		  JOIN queen.log_partitions dp ON dp.queue_id = dq.id AND dp.name = src.name
		 CROSS JOIN LATERAL queen.log_find(dp.id, $3) AS f
		  JOIN unnest($3::uuid[]) WITH ORDINALITY AS x(h, i) ON x.h = f.h
		 WHERE src.id = $2 AND f.first_offset IS NOT NULL`, model.DeadLetterQueue(g.Queue), partitionID, hashes)
	if err != nil {
		return err
	}
	found, err := pgx.CollectRows(rows, pgx.RowTo[int])
	if err != nil {
		return err
	}
	for _, k := range found {
		off := offsets[k-1]
		for i := range items {
			if items[i].Result == model.AckAlready && items[i].Offset == off {
				items[i].Result = model.AckDeadLettered
			}
		}
	}
	return nil
}

// deadLetterID is the transactionId of group g's dead letter of a message.
func deadLetterID(g model.Group, partitionID, offset int64) string {
	return g.Name + ":" + model.MessageID(partitionID, offset)
}

// deadLetter moves messages of group g to the queue's dead-letter queue
// (same partition name) and records them done for the group, in one
// transaction holding the group's cursor row, skipping any another pop or
// ack dead-lettered meanwhile: once per message and group. A failure
// leaves them below the cursor, for the next pop to find again. The
// dead-letter message's transactionId is "<group>:<messageId>", its data
// deadLetterData's. It returns the offsets it moved, the group's cursor
// after, and whether that ended a lease.
func (s *Store) deadLetter(ctx context.Context, g model.Group, partition string, dead []model.LeasedMessage) (moved []int64, next int64, ended bool, err error) {
	var dlq int64
	if err := s.pool.QueryRow(ctx, "SELECT partition_id FROM queen.ensure_partition($1, $2)",
		model.DeadLetterQueue(g.Queue), partition).Scan(&dlq); err != nil {
		return nil, 0, false, fmt.Errorf("dead-letter queue: %w", err)
	}
	pid := dead[0].PartitionID
	offsets := make([]int64, len(dead))
	for i, d := range dead {
		offsets[i] = d.Offset
	}
	err = pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		pending, err := stillPending(ctx, tx, g.ID, pid, offsets)
		if err != nil {
			return err
		}
		if len(pending) > 0 {
			if err := pushDeadLetters(ctx, tx, g, partition, dlq, dead, pending, s.maxData()); err != nil {
				return err
			}
		}
		moved = pending
		return tx.QueryRow(ctx, "SELECT next_offset, lease_ended FROM queen.consumer_dead_lettered($1, $2, $3)",
			g.ID, pid, pending).Scan(&next, &ended)
	})
	if err != nil {
		return nil, 0, false, err
	}
	return moved, next, ended, nil
}

// pushDeadLetters writes the pending ones of dead to the dead-letter
// partition dlq, in tx, each within maxData bytes.
func pushDeadLetters(ctx context.Context, tx pgx.Tx, g model.Group, partition string, dlq int64, dead []model.LeasedMessage, pending []int64, maxData int) error {
	fr := model.Frame{PartitionID: dlq, Verified: -1}
	for _, d := range dead {
		if !slices.Contains(pending, d.Offset) {
			continue
		}
		id := deadLetterID(g, d.PartitionID, d.Offset)
		body, err := deadLetterData(letterOf(g, partition, d), d.Data, maxData)
		if err != nil {
			return err
		}
		fr.TxnIDs, fr.Hashes, fr.Data = append(fr.TxnIDs, id), append(fr.Hashes, model.HashTxnID(id)), append(fr.Data, body)
	}
	if _, err := pgwire.PushBundle(ctx, tx.Conn(), []model.Frame{fr}); err != nil {
		return fmt.Errorf("dead-letter push: %w", err)
	}
	return nil
}

// letterOf is the dead letter of group g's message d of partition, but
// its data.
func letterOf(g model.Group, partition string, d model.LeasedMessage) model.DeadLetter {
	return model.DeadLetter{Queue: g.Queue, Partition: partition, Group: g.Name,
		MessageID: model.MessageID(d.PartitionID, d.Offset), Offset: d.Offset, TxnID: d.TxnID,
		CreatedAt: d.CreatedAt.UTC(), Attempts: d.Attempts, Error: d.LastError,
		Headers: model.MetaHeadersRaw(d.Meta), DataEncoding: model.DataEncoding(d.Meta)}
}

// movedLetters are the dead letters of those of dead at the offsets moved.
func movedLetters(g model.Group, partition string, dead []model.LeasedMessage, moved []int64) []model.DeadLetter {
	var out []model.DeadLetter
	for _, d := range dead {
		if slices.Contains(moved, d.Offset) {
			out = append(out, letterOf(g, partition, d))
		}
	}
	return out
}

// model.DeadLetter is a dead-letter message's data.
// cutMark ends an error cut to fit in its dead letter.
const cutMark = "…"

// deadLetterData is a dead letter's data, at most maxData bytes (what a
// push may carry, so that it can be delivered as any message): body's
// fields, then the original data byte for byte. When they do not fit,
// the error is cut, on a character boundary, ending in cutMark; when the
// data alone leaves too little room, it is left out, and dataOmitted
// says how large it was (the original stays readable by its messageId
// while retention keeps it).
func deadLetterData(body model.DeadLetter, data []byte, maxData int) ([]byte, error) {
	whole := body.Error
	tail := append(append([]byte(`,"data":`), data...), '}')
	if b, ok := fitError(body, whole, maxData-len(tail)); ok {
		return append(b, tail...), nil
	}
	body.DataOmitted = &model.OmittedData{Bytes: len(data)}
	if b, ok := fitError(body, whole, maxData-1); ok {
		return append(b, '}'), nil
	}
	return nil, fmt.Errorf("a dead letter's fields alone take more than %d bytes", maxData)
}

// fitError encodes body's fields, without the closing brace, in at most
// room bytes, with the error whole or cut to fit; false when nothing of
// it fits.
func fitError(body model.DeadLetter, whole string, room int) ([]byte, bool) {
	if b := encodeFields(body); len(b) <= room {
		return b, true
	}
	var starts []int // where each character of the error starts
	for i := range whole {
		starts = append(starts, i)
	}
	cut := func(n int) []byte {
		body.Error = whole[:n] + cutMark
		return encodeFields(body)
	}
	n := sort.Search(len(starts), func(i int) bool { return len(cut(starts[i])) > room })
	if n == 0 {
		return nil, false
	}
	return cut(starts[n-1]), true
}

// encodeFields encodes body without its closing brace, escaping only
// what JSON requires: an error's <, > and & stay as they are, not six
// bytes each.
func encodeFields(body model.DeadLetter) []byte {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(body) // strings, numbers and a time: always encodes
	b := bytes.TrimSuffix(buf.Bytes(), []byte("\n"))
	return b[:len(b)-1]
}

// tooLargeError is the error of a message dead-lettered because it takes
// more than maxDelivery bytes in a pop's answer.
func tooLargeError(d model.LeasedMessage, maxDelivery int64) string {
	return fmt.Sprintf("too large to deliver: it takes up to %d bytes in a pop's answer, more than the %d the gateway's NATS max payload leaves for one message",
		model.DeliverySize(d), maxDelivery)
}

// Lease renews (d > 0) or releases (d = 0) a lease; false when it is not
// the partition's current lease or has run out.
func (s *Store) Lease(ctx context.Context, g model.Group, partitionID int64, leaseID string, d time.Duration) (until time.Time, ok bool, err error) {
	var lease pgtype.UUID
	if lease.Scan(leaseID) != nil {
		return time.Time{}, false, nil
	}
	var u *time.Time
	err = s.pool.QueryRow(ctx, "SELECT lease_until FROM queen.consumer_lease(@group_id, @partition_id, @lease_id, @seconds)",
		pgx.NamedArgs{"group_id": g.ID, "partition_id": partitionID, "lease_id": lease, "seconds": d.Seconds()}).Scan(&u)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		gone, err := s.groupGone(ctx, g) // not held: perhaps no group
		if err == nil && gone {
			err = groupNotFound(g.Queue, g.Name)
		}
		return time.Time{}, false, err
	case err != nil:
		return time.Time{}, false, fmt.Errorf("pgstore: lease: %w", err)
	case u == nil:
		return time.Time{}, true, nil
	}
	return *u, true, nil
}

// GroupPartitions lists every group of the queue with its position on
// each partition, lag included: partitions a group has not read yet are
// listed from offset 0. It reads on the read pool.
func (s *Store) GroupPartitions(ctx context.Context, queueID int64) ([]model.GroupPartition, error) {
	return readpool.List(ctx, s.reads, func(ctx context.Context, q readpool.Querier) ([]model.GroupPartition, error) {
		return groupPartitions(ctx, q, queueID)
	})
}

func groupPartitions(ctx context.Context, q readpool.Querier, queueID int64) ([]model.GroupPartition, error) {
	rows, err := q.Query(ctx, `
		SELECT g.name, p.name, p.id, coalesce(c.next_offset, 0), p.last_offset,
		       coalesce(c.lease_id IS NOT NULL AND c.lease_until > now(), false), coalesce(c.lease_consumer, ''), c.lease_until,
		       coalesce(c.unconfirmed, 0), coalesce(c.deleted_unconsumed, 0),
		       -- what holds the cursor after a failure (consumer_free): its
		       -- delay, or a run-out lease's once its consumer was heard
		       greatest(CASE WHEN c.delayed_until > now() THEN c.delayed_until END,
		                CASE WHEN c.lease_id IS NOT NULL AND c.lease_heard AND c.lease_until <= now()
		                      AND c.lease_until + c.lease_delay > now() THEN c.lease_until + c.lease_delay END)
		  FROM queen.consumer_groups g
		  JOIN queen.log_partitions p ON p.queue_id = g.queue_id
		  LEFT JOIN queen.consumer_cursors c ON c.group_id = g.id AND c.partition_id = p.id
		 WHERE g.queue_id = $1
		 ORDER BY g.name, p.name`, queueID)
	if err != nil {
		return nil, fmt.Errorf("pgstore: groups: %w", err)
	}
	return pgx.CollectRows(rows, func(row pgx.CollectableRow) (model.GroupPartition, error) {
		var (
			gp             model.GroupPartition
			until, delayed *time.Time
		)
		err := row.Scan(&gp.Group, &gp.Partition, &gp.PartitionID, &gp.NextOffset, &gp.LastOffset, &gp.Leased,
			&gp.LeaseConsumer, &until, &gp.Unconfirmed, &gp.DeletedUnconsumed, &delayed)
		if delayed != nil {
			gp.DelayedUntil = *delayed
		}
		if until != nil && gp.Leased {
			gp.LeaseUntil = *until
		} else {
			gp.LeaseConsumer = "" // the last lease's, which ended
		}
		return gp, err
	})
}

// RunOutLeases lists, among groupIDs, the partitions whose lease, or
// delay after a failure, has run out with messages still behind the
// cursor: a pop would take them now, and nothing announces it
// (docs/design.md, "Consuming"). One statement for every group a
// gateway's pops wait on; it reads the groups' cursors by their primary
// key and locks nothing.
func (s *Store) RunOutLeases(ctx context.Context, groupIDs []int64) ([]model.GroupPartitionID, error) {
	rows, err := s.pool.Query(ctx, `
		SELECT cc.group_id, cc.partition_id
		  FROM queen.consumer_cursors cc JOIN queen.log_partitions p ON p.id = cc.partition_id
		 WHERE cc.group_id = ANY($1) AND (cc.lease_id IS NOT NULL OR cc.delayed_until IS NOT NULL)
		   AND queen.consumer_free(cc.lease_id, cc.lease_until, cc.lease_heard, cc.lease_delay, cc.delayed_until, now())
		   AND cc.next_offset <= p.last_offset`, groupIDs)
	if err != nil {
		return nil, fmt.Errorf("pgstore: run-out leases: %w", err)
	}
	out, err := pgx.CollectRows(rows, pgx.RowToStructByPos[model.GroupPartitionID])
	if err != nil {
		return nil, fmt.Errorf("pgstore: run-out leases: %w", err)
	}
	return out, nil
}
