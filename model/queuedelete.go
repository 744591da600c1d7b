package model

// QueueDeleted is what deleting a queue removed.
type QueueDeleted struct {
	// QueueID is the id the queue had; a queue made afresh by its name
	// gets another.
	QueueID int64
	// PartitionIDs are its partitions' ids, never used again.
	PartitionIDs []int64
	// Messages counts the stored messages deleted, Bytes their data as
	// sent.
	Messages int64
	Bytes    int64
	// Groups counts its consumer groups, LeasesEnded the leases that were
	// running, Timers its pending timers (cancelled: they never fire).
	Groups      int
	LeasesEnded int
	Timers      int64
}

// QueuePurged is what purging a queue (or one of its partitions) removed.
type QueuePurged struct {
	// Partitions counts the partitions purged.
	Partitions int
	// Messages counts the stored messages deleted, Bytes their data as
	// sent.
	Messages int64
	Bytes    int64
	// Groups counts the consumer groups whose positions moved past the
	// purged messages, LeasesEnded the leases that were running and
	// Unconsumed the purged messages the groups had not consumed (counted
	// once per group).
	Groups      int
	LeasesEnded int
	Unconsumed  int64
	// Timers counts the pending timers cancelled.
	Timers int64
}
