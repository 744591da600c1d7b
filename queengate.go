// Package queengate is queengate's wire contract in Go, and a client for
// producers, consumers and operators: subjects and name rules, the answers
// and their error codes, and a Client that pushes (request-reply, or
// fire-and-forget with the answers read on the ack subject and matched to
// their requests), schedules and cancels timers, configures and reads
// queues, and pops, acknowledges, renews and releases over NATS (package
// consumer runs a consumer on those calls). docs/protocol.md and
// docs/admin-api.md describe the same contract in words; the gateway,
// queenctl and queenbench speak it through this package.
package queengate

const (
	// DefaultPrefix starts every subject unless configured otherwise.
	DefaultPrefix = "queen"
	// DefaultPartition is the partition of a push whose subject names
	// none.
	DefaultPartition = "Default"
	// MaxNameBytes is the longest queue or partition name.
	MaxNameBytes = 128
	// MaxTxnIDBytes is the longest transactionId accepted.
	MaxTxnIDBytes = 256
	// DefaultMaxBatch is how many messages one push may carry unless the
	// gateway is configured otherwise.
	DefaultMaxBatch = 1000
)
