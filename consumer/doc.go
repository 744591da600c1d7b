// Package consumer is queengate's consumer runner, built on the root
// package's Client alone: it pops a queue's messages for a consumer group,
// hands them to a Handler in each partition's order (Concurrency
// batches at once, each filled from up to Partitions partitions), renews
// each batch's leases while it is handled, acknowledges each batch with
// the next pop, retries what is worth
// retrying, stops at MaxMessages, and drains gracefully. Run consumes
// until its context ends; New builds a Consumer that can also be drained.
// The wire calls it makes (pop, ack, renew, release) are the Client's.
package consumer
