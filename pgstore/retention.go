package pgstore

import (
	"context"
	"fmt"
	"time"
)

// RetainOptions bounds one retention pass.
type RetainOptions struct {
	// Slack is kept beyond each queue's window before its log_txns rows go
	// (clock skew between brokers and PostgreSQL, in-flight hydrations).
	Slack time.Duration
	// PartitionsPerStep is how many partitions one transaction visits;
	// the locks it takes are held until that transaction commits.
	PartitionsPerStep int
	// MaxRowsPerPartition bounds the rows of each kind one step deletes
	// from one partition, so a step never holds a lock for long.
	MaxRowsPerPartition int
}

// DefaultRetainOptions are what the gateway runs with.
func DefaultRetainOptions() RetainOptions {
	return RetainOptions{Slack: time.Minute, PartitionsPerStep: 100, MaxRowsPerPartition: 10_000}
}

// RetainStats is what a pass did.
type RetainStats struct {
	Visited         int   // partitions looked at
	Locked          int   // partitions with work whose lock was taken
	Skipped         int   // partitions with work held by another transaction: next pass
	TxnsDeleted     int64 // log_txns rows
	SegmentsDeleted int64 // log_segments rows
}

// Retain runs one retention pass over every partition (queen.log_retain,
// a procedure committing after each partition it locked):
// log_txns rows wholly older than the window plus slack go and txns_start
// rises past them; segments older than a queue's retentionSeconds go.
// Several gateways may run it at once: partitions are locked in ascending
// id order with SKIP LOCKED, so it never waits for a push or for another
// pass, and a skipped partition is visited by the next pass.
func (s *Store) Retain(ctx context.Context, o RetainOptions) (RetainStats, error) {
	var total RetainStats
	after := int64(0)
	for {
		var (
			lastID         int64
			st             RetainStats
			more           bool
			visited, lockd int32
			skipped        int32
		)
		err := s.pool.QueryRow(ctx,
			`CALL queen.log_retain($1, $2, $3, $4)`,
			after, o.PartitionsPerStep, o.Slack.Seconds(), o.MaxRowsPerPartition,
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
