package pgstore

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/queengate/queengate/model"
)

// dropStep bounds the rows one step of a delete or a purge deletes per
// partition and kind, as retention's MaxRowsPerPartition does: a step
// holds what it locks for that long at most.
const dropStep = 10000

// abandonedDrop is how long a deleted queue's frames are left to the
// request that deleted it before a retention pass takes them over.
const abandonedDrop = 5 * time.Minute

// DeleteQueue deletes queue and everything of it (queen.queue_delete:
// configuration, partitions, groups with their cursors and marks, pending
// timers; then its frames and transactionIds in bounded steps, log_drop)
// and says what it removed. ErrQueueNotFound if it does not exist. A
// push naming the queue afterwards makes it afresh: new ids, nothing of
// the old one (no verdict, no group).
func (s *Store) DeleteQueue(ctx context.Context, queue string) (model.QueueDeleted, error) {
	var d model.QueueDeleted
	err := s.pool.QueryRow(ctx,
		"SELECT queue_id, partition_ids, groups, leases_ended, timers, stored_bytes FROM queen.queue_delete($1)", queue).
		Scan(&d.QueueID, &d.PartitionIDs, &d.Groups, &d.LeasesEnded, &d.Timers, &d.Bytes)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return d, fmt.Errorf("%w: %s", model.ErrQueueNotFound, queue)
	case err != nil:
		return d, fmt.Errorf("pgstore: delete queue %s: %w", queue, err)
	}
	d.Messages, err = s.drop(ctx, d.PartitionIDs, 0)
	if err != nil {
		return d, fmt.Errorf("pgstore: delete queue %s: its frames (the next retention pass deletes the rest): %w", queue, err)
	}
	return d, nil
}

// drop deletes the frames of dropped partitions in steps (log_drop): of
// pids, or (pids nil) of any listed at least minAge ago. It answers the
// messages deleted.
func (s *Store) drop(ctx context.Context, pids []int64, minAge time.Duration) (int64, error) {
	if pids != nil && len(pids) == 0 {
		return 0, nil
	}
	var messages int64
	for {
		var (
			pid        *int64
			n, segs, t int64
			done       bool
		)
		err := s.pool.QueryRow(ctx, "SELECT partition_id, messages, segments, txns, done FROM queen.log_drop($1, $2, $3)",
			pids, minAge.Seconds(), dropStep).Scan(&pid, &n, &segs, &t, &done)
		if err != nil {
			return messages, err
		}
		if pid == nil {
			return messages, nil
		}
		messages += n
	}
}

// PurgeQueue deletes queue's stored messages, of every partition or
// (partition not empty) of one, and its consumers' state about them:
// each partition up to its allocator when the purge reaches it, in
// steps of bounded length (queen.log_purge), then in one transaction
// (queen.consumer_purge) its pending timers, what is left, and the groups'
// leases and marks, their cursors moving past. Messages pushed meanwhile
// are kept. TransactionIds are kept: a retry within the window answers
// duplicate. ErrQueueNotFound, or ErrNotFound for a partition that does
// not exist.
func (s *Store) PurgeQueue(ctx context.Context, queue, partition string) (model.QueuePurged, error) {
	var out model.QueuePurged
	rows, err := s.pool.Query(ctx, `
		SELECT q.id, p.id, p.last_offset
		  FROM queen.queues q LEFT JOIN queen.log_partitions p ON p.queue_id = q.id AND ($2 = '' OR p.name = $2)
		 WHERE q.name = $1
		 ORDER BY p.id`, queue, partition)
	if err != nil {
		return out, fmt.Errorf("pgstore: purge queue %s: %w", queue, err)
	}
	type upto struct{ pid, last int64 }
	var parts []upto
	found := false
	for rows.Next() {
		var qid int64
		var pid, last *int64
		if err := rows.Scan(&qid, &pid, &last); err != nil {
			rows.Close()
			return out, err
		}
		found = true
		if pid != nil {
			parts = append(parts, upto{*pid, *last})
		}
	}
	if err := rows.Err(); err != nil {
		return out, fmt.Errorf("pgstore: purge queue %s: %w", queue, err)
	}
	switch {
	case !found:
		return out, fmt.Errorf("%w: %s", model.ErrQueueNotFound, queue)
	case partition != "" && len(parts) == 0:
		return out, fmt.Errorf("%w: partition %s/%s does not exist", model.ErrNotFound, queue, partition)
	}
	for _, p := range parts {
		if err := s.purgePartition(ctx, p.pid, p.last, &out); err != nil {
			return out, fmt.Errorf("pgstore: purge queue %s: %w", queue, err)
		}
	}
	return out, nil
}

// purgePartition purges partition pid up to offset upto and adds what it
// removed to out.
func (s *Store) purgePartition(ctx context.Context, pid, upto int64, out *model.QueuePurged) error {
	for more := true; more; {
		var n, bytes int64
		err := s.pool.QueryRow(ctx, "SELECT messages, bytes, more FROM queen.log_purge($1, $2, $3)", pid, upto, dropStep).
			Scan(&n, &bytes, &more)
		if err != nil {
			return err
		}
		out.Messages += n
		out.Bytes += bytes
	}
	var n, bytes, timers, unconsumed int64
	var groups, leases int
	err := s.pool.QueryRow(ctx, "SELECT timers, messages, bytes, groups, leases_ended, unconsumed FROM queen.consumer_purge($1, $2)",
		pid, upto).Scan(&timers, &n, &bytes, &groups, &leases, &unconsumed)
	if err != nil {
		return err
	}
	out.Partitions++
	out.Messages += n
	out.Bytes += bytes
	out.Groups = max(out.Groups, groups)
	out.LeasesEnded += leases
	out.Unconsumed += unconsumed
	out.Timers += timers
	return nil
}
