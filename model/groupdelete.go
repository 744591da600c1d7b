package model

// GroupDeleted is what deleting a consumer group released.
type GroupDeleted struct {
	Group
	// Partitions is how many partitions the group had cursors on.
	Partitions int
	// Unconsumed counts the messages the group had not consumed: its lag,
	// less what it had completed out of order.
	Unconsumed int64
	// LeasesEnded counts the leases that were running.
	LeasesEnded int
}
