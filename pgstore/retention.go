package pgstore

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/queengate/queengate/model"
)

// Retain runs one retention pass over every partition (queen.log_retain,
// a procedure committing after each partition it locked):
// txns_start rises past the frames wholly older than the window plus
// slack (their log_txns rows go); segments older than a queue's
// retentionSeconds go, their hashes the window still needs kept.
// Several gateways may run it at once: partitions are locked in ascending
// id order with SKIP LOCKED, so it never waits for a push or for another
// pass, and a skipped partition is visited by the next pass. A pass first
// deletes the frames of deleted queues whose delete stopped midway
// (DeleteQueue). Groups idle past their queue's groupIdleSeconds hold
// nothing; the pass lists them.
func (s *Store) Retain(ctx context.Context, o model.RetainOptions) (model.RetainStats, error) {
	var total model.RetainStats
	if _, err := s.drop(ctx, nil, abandonedDrop); err != nil {
		return total, fmt.Errorf("pgstore: retention: frames of deleted queues: %w", err)
	}
	idle, err := s.IdleGroups(ctx)
	if err != nil {
		return total, err
	}
	total.IdleGroups = idle
	idleIDs := make([]int64, len(idle))
	for i, g := range idle {
		idleIDs[i] = g.ID
	}
	after := int64(0)
	for {
		var (
			lastID         int64
			st             model.RetainStats
			more           bool
			visited, lockd int32
			skipped        int32
		)
		err := s.pool.QueryRow(ctx,
			`CALL queen.log_retain(@after, @partitions_per_step, @slack_seconds, @max_rows_per_partition, @idle_ids)`,
			pgx.NamedArgs{"after": after, "partitions_per_step": o.PartitionsPerStep, "slack_seconds": o.Slack.Seconds(),
				"max_rows_per_partition": o.MaxRowsPerPartition, "idle_ids": idleIDs},
		).Scan(&lastID, &visited, &lockd, &skipped, &st.TxnsDeleted, &st.SegmentsDeleted, &more)
		if err != nil {
			return total, fmt.Errorf("pgstore: retention: %w", err)
		}
		total.Visited += int(visited)
		total.Locked += int(lockd)
		total.Skipped += int(skipped)
		total.TxnsDeleted += st.TxnsDeleted
		total.SegmentsDeleted += st.SegmentsDeleted
		switch {
		case more && st.TxnsDeleted+st.SegmentsDeleted > 0:
			// A partition of this step has more to delete: the same step
			// again (the others' cheap checks find nothing).
		case int(visited) < o.PartitionsPerStep:
			return total, nil
		default:
			after = lastID
		}
	}
}
