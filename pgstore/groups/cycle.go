package groups

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

// Cycle serves a pop carrying an ack in one statement and one commit
// when the ack is the usual one: it completes, in order, the whole
// running lease leaseID of partitionID, nothing else pending on the
// partition (queen.consumer_cycle says exactly when). The ack settled,
// the same cursor row takes r's next lease when the general pop would
// take this partition and deliver it at first attempt; then pop holds
// what r delivers, else pop is nil and the caller pops as usual. ok
// false: nothing was done, the caller acks and pops by Ack and Pop.
// r's Room must already leave room for the ack's answer.
func (s *Store) Cycle(ctx context.Context, r model.PopQuery, partitionID int64, leaseID string,
	items []model.Settlement) (ack model.SettledBatch, pop *model.PopResult, ok bool, err error) {
	if !cycles(r, items) {
		return model.SettledBatch{}, nil, false, nil
	}
	row, ok, err := s.queryCycle(ctx, r, partitionID, leaseUUID(leaseID), items)
	if err != nil || !ok {
		if err != nil {
			err = fmt.Errorf("pgstore: pop %s/%s: %w", r.Group.Queue, r.Group.Name, err)
		}
		return model.SettledBatch{}, nil, false, err
	}
	ack = model.SettledBatch{Items: make([]model.AckOutcome, len(items)), NextOffset: row.NextOffset, LeaseEnded: true}
	for i := range items {
		ack.Items[i] = model.AckOutcome{Offset: row.AckedFrom + int64(i), Result: model.AckAcked}
	}
	if row.Popped {
		pop = row.result(partitionID)
	}
	return ack, pop, true, nil
}

// cycles says whether a cycle may serve r carrying items: every item
// completes its message, and no consumer's limit counts the pop's lease
// (the queue's is read by the statement).
func cycles(r model.PopQuery, items []model.Settlement) bool {
	if r.MaxAckPending > 0 || len(items) == 0 {
		return false
	}
	for i := range items {
		if !items[i].Completed {
			return false
		}
	}
	return true
}

// cycleRow is consumer_cycle's answer.
type cycleRow struct {
	AckedFrom  int64 // the acked lease's first offset
	NextOffset int64
	Popped     bool
	Partition  *string
	LeaseID    pgtype.UUID
	LeaseUntil *time.Time
	Offsets    []int64 `db:"offs"`
	TxnIDs     pgwire.TextArray
	Data       pgwire.BytesArray
	Meta       pgwire.BytesArray
	CreatedAt  []time.Time
}

func (s *Store) queryCycle(ctx context.Context, r model.PopQuery, partitionID int64, lease pgtype.UUID,
	items []model.Settlement) (cycleRow, bool, error) {
	offsets, hashes, completed, _ := pgwire.AckArrays(items)
	rows, err := s.pool.Query(ctx, `SELECT acked_from, next_offset, popped, partition, lease_id, lease_until,
		offs, txn_ids, data::text[] AS data, meta::text[] AS meta, created_at
		FROM queen.consumer_cycle(@group_id, @partition_id, @lease, @offsets, @hashes, @completed, @queue_id, @named,
		    @max, @lease_seconds, @consumer, @max_bytes, @room, @envelope, @max_delivery)`,
		pgx.NamedArgs{"group_id": r.Group.ID, "partition_id": partitionID, "lease": lease, "offsets": offsets, "hashes": hashes,
			"completed": completed, "queue_id": r.Group.QueueID, "named": r.NamedPartition(), "max": r.Max, "lease_seconds": r.Lease.Seconds(),
			"consumer": r.Consumer, "max_bytes": r.MaxBytes, "room": r.Room, "envelope": model.DeliveryEnvelope,
			"max_delivery": r.MaxDelivery})
	if err != nil {
		return cycleRow{}, false, err
	}
	row, err := pgx.CollectExactlyOneRow(rows, pgx.RowToStructByName[cycleRow])
	if errors.Is(err, pgx.ErrNoRows) {
		return cycleRow{}, false, nil
	}
	return row, err == nil, err
}

// result is the pop the cycle delivered: each message at its first
// attempt, none dead.
func (row *cycleRow) result(partitionID int64) *model.PopResult {
	out := &model.PopResult{PartitionID: partitionID, Partition: *row.Partition, LeaseID: row.LeaseID.String(),
		LeaseUntil: *row.LeaseUntil, Messages: make([]model.LeasedMessage, len(row.Offsets))}
	for i, off := range row.Offsets {
		out.Messages[i] = model.LeasedMessage{LogMessage: storedMessage(partitionID, off, &row.TxnIDs, &row.Data, &row.Meta, row.CreatedAt, i),
			Attempts: 1}
	}
	return out
}
