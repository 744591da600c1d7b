package groups

import (
	"context"
	"fmt"
	"slices"

	"github.com/jackc/pgx/v5"

	"github.com/queengate/queengate/model"
)

// PopMore takes, after r's pop delivered, up to partitions further
// partitions for the same answer in one statement (queen.consumer_pop_many):
// each is a pop of any partition under its own lease, with r.Max messages
// and r.Room bytes between them, and leaseEnvelope bytes more for each
// beside its messages. It stops at the first pop that delivers nothing;
// messages out of attempts or too large are dead-lettered as after Pop.
func (s *Store) PopMore(ctx context.Context, r model.PopQuery, partitions int, leaseEnvelope int64) ([]model.PopResult, error) {
	rows, err := s.pool.Query(ctx, `SELECT x.partition_id, x.partition, x.lease_id, x.lease_until, x.offs, x.txn_ids,
		x.data::text[] AS data, x.meta::text[] AS meta, x.created_at, x.attempts, x.last_errors, x.dead, x.too_large, x.held, true AS group_exists,
		coalesce((SELECT before.lease_id IS NOT NULL FROM queen.consumer_cursors before
		           WHERE before.group_id = @group_id AND before.partition_id = x.partition_id), false) AS ran_out_lease
		  FROM queen.queues q
		 CROSS JOIN LATERAL queen.consumer_pop_many(p_group_id => @group_id, p_queue_id => @queue_id, p_partitions => @partitions,
		      p_max => @max, p_budget => @budget, p_lease_seconds => @lease_seconds, p_consumer => @consumer,
		      p_envelope => @envelope, p_lease_envelope => @lease_envelope, p_max_delivery => @max_delivery,
		      p_consumer_limit => @consumer_limit, p_group_limit => q.max_ack_pending) x
		 WHERE q.id = @queue_id`,
		pgx.NamedArgs{"group_id": r.Group.ID, "queue_id": r.Group.QueueID, "partitions": partitions, "max": r.Max,
			"budget": min(r.Room, r.MaxBytes), "lease_seconds": r.Lease.Seconds(), "consumer": r.Consumer,
			"envelope": model.DeliveryEnvelope, "lease_envelope": leaseEnvelope, "max_delivery": r.MaxDelivery,
			"consumer_limit": r.MaxAckPending})
	var found []popRow
	if err == nil {
		found, err = pgx.CollectRows(rows, pgx.RowToStructByName[popRow])
	}
	if err != nil {
		return nil, fmt.Errorf("pgstore: pop %s/%s: %w", r.Group.Queue, r.Group.Name, err)
	}
	out := make([]model.PopResult, 0, len(found))
	for i := range found {
		res := model.PopResult{RanOutLease: found[i].RanOutLease}
		s.deliverOrDeadLetter(ctx, r, &found[i], &res)
		out = append(out, res)
	}
	return out, nil
}

// deliverOrDeadLetter fills out with what row delivers, and moves its
// dead messages to the dead-letter queue. The delivered messages are
// leased already: a failure to move the dead ones is reported beside
// them (out.DeadLetterErr), and a later pop dead-letters them again.
func (s *Store) deliverOrDeadLetter(ctx context.Context, r model.PopQuery, row *popRow, out *model.PopResult) {
	dead, tooLarge := row.deliveries(out, r.MaxDelivery)
	if len(dead) == 0 {
		return
	}
	var moved []int64
	moved, _, _, out.DeadLetterErr = s.deadLetter(ctx, r.Group, out.Partition, dead)
	out.DeadLettered = len(moved)
	out.DeadLetters = movedLetters(r.Group, out.Partition, dead, moved)
	for _, off := range moved {
		if slices.Contains(tooLarge, off) {
			out.TooLarge++
		}
	}
	s.undeliverable.WithLabelValues(r.Group.Queue, r.Group.Name).Add(float64(out.TooLarge))
}
