package model

// QueueFigures is what PostgreSQL holds of one queue, as operators see
// it at a glance (the status page, the metrics).
type QueueFigures struct {
	Queue   string
	QueueID int64
	// Partitions is how many partitions the queue has.
	Partitions     int
	StoredMessages int64
	// DLQDepth counts the messages of the queue's dead-letter queue not
	// yet redriven.
	DLQDepth int64
	// Delayed sums its groups' Delayed.
	Delayed int64
	// Groups are the queue's consumer groups by name, with their lag.
	Groups []GroupLag
}

// GroupLag is how many messages a consumer group has not consumed yet,
// over every partition of its queue.
type GroupLag struct {
	Group string
	Lag   int64
	// Delayed is the part of Lag a delay holds back: the lag on the
	// partitions where the group's cursor waits for a failure's delay.
	Delayed int64
}
