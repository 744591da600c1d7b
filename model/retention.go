package model

import "time"

// RetainOptions bounds one retention pass.
type RetainOptions struct {
	// Slack is kept beyond each queue's window before its transactionIds are retired
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
	TxnsDeleted     int64 // frames whose transactionIds left the window: log_txns rows deleted, frames passed by txns_start
	SegmentsDeleted int64 // log_segments rows
	// IdleGroups are the groups idle past their queue's groupIdleSeconds,
	// whose holds the pass ignored.
	IdleGroups []IdleGroup
}
