package queengate

import "time"

// Consuming limits and defaults (docs/protocol.md, "Consuming").
const (
	DefaultPopMax  = 100
	MaxPopMax      = 10000
	DefaultLeaseMs = 30000
	MaxLeaseMs     = 3600000
	MaxWaitMs      = 20000
	// MaxPopPartitions is the most partitions one pop may lease
	// (PopRequest.Partitions).
	MaxPopPartitions = 100
	MaxAckItems      = 10000
	AckCompleted     = "completed"
	AckFailed        = "failed"
	MaxAckErrorSize  = 4096
	// MaxDelayMs is the longest a failed message can be made to wait
	// before it is delivered again (a day): an ack item's delayMs, a
	// queue's retryDelayMs and each entry of its retryBackoffMs.
	MaxDelayMs = 86400000
)

// DeliveryReserve is the room an answer keeps, beside a message's data,
// for everything else it says about one delivered message: its ids, the
// queue, group, partition and consumer names, the lease, and the last
// error (up to MaxAckErrorSize bytes, six times that when every byte
// needs a \u escape).
const DeliveryReserve = 32 << 10

// MaxDataBytes is the largest data a message may carry on a NATS
// connection whose max payload is maxPayload: the largest that a pop or a
// read can still deliver alone in one answer. A push of more is refused.
func MaxDataBytes(maxPayload int64) int64 { return maxPayload - DeliveryReserve }

// PopRequest asks for messages for a consumer of Group: up to Max, under
// a lease of LeaseMs, waiting up to WaitMs for some to arrive. MaxBytes
// bounds what they take in the answer (at least one message is
// delivered); the gateway lowers it to what fits in NATS's max payload,
// its default.
type PopRequest struct {
	Group    string `json:"group"`
	Consumer string `json:"consumer,omitempty"`
	Max      int    `json:"max,omitempty"`
	LeaseMs  int64  `json:"leaseMs,omitempty"`
	WaitMs   int64  `json:"waitMs,omitempty"`
	MaxBytes int64  `json:"maxBytes,omitempty"`
	// MaxAckPending, when set (with Consumer), bounds what Consumer holds
	// delivered and not yet settled: the pop delivers no more than
	// MaxAckPending less that, and at the limit nothing (it waits, up to
	// WaitMs, for acks, releases or expiries to make room).
	MaxAckPending int `json:"maxAckPending,omitempty"`
	// Ack, when set, settles the previous batch first, as an ack would:
	// one request instead of two per batch.
	Ack *PopAck `json:"ack,omitempty"`
	// Partitions, above 1, lets a pop of any partition lease up to that
	// many (MaxPopPartitions at most), each under its own lease, until
	// Max messages are delivered: the answer's More holds those after
	// the first. 0 or 1: one partition, as without it.
	Partitions int `json:"partitions,omitempty"`
	// Acks settles the batches of several leases first (a previous
	// multi-partition pop's), each as an ack would, in order; the
	// answer's Acks answers them in the same order. A pop carries Ack or
	// Acks, not both.
	Acks []PopAck `json:"acks,omitempty"`
}

// PopAck is the ack a pop carries: the partition and lease of the batch
// it settles, and its items.
type PopAck struct {
	Partition string    `json:"partition"`
	LeaseID   string    `json:"leaseId"`
	Items     []AckItem `json:"items"`
}

// Delivery is a message handed to a consumer.
type Delivery struct {
	StoredMessage
	// Attempts counts its deliveries to the group, this one included.
	Attempts int `json:"attempts"`
	// LastError is what the consumer that last failed it said.
	LastError string `json:"lastError,omitempty"`
}

// PopAnswer is a lease on one partition and the messages delivered under
// it, in offset order; without a lease when nothing was delivered.
type PopAnswer struct {
	Queue       string     `json:"queue"`
	Group       string     `json:"group"`
	Partition   string     `json:"partition,omitempty"`
	PartitionID int64      `json:"partitionId,omitempty"`
	LeaseID     string     `json:"leaseId,omitempty"`
	LeaseUntil  *time.Time `json:"leaseUntil,omitempty"`
	Messages    []Delivery `json:"messages"`
	// DeadLettered counts messages out of attempts that this pop moved to
	// the dead-letter queue instead of delivering them.
	DeadLettered int `json:"deadLettered,omitempty"`
	// Ack answers the request's Ack, settled before the pop.
	Ack *AckAnswer `json:"ack,omitempty"`
	// Acks answers the request's Acks, in their order.
	Acks []AckAnswer `json:"acks,omitempty"`
	// More holds the further partitions a pop with Partitions above 1
	// leased, each under its own lease, its messages in offset order.
	More []PopLease `json:"more,omitempty"`
}

// PopLease is one further partition of a multi-partition pop's answer:
// its lease and the messages delivered under it.
type PopLease struct {
	Partition   string     `json:"partition"`
	PartitionID int64      `json:"partitionId"`
	LeaseID     string     `json:"leaseId"`
	LeaseUntil  *time.Time `json:"leaseUntil"`
	Messages    []Delivery `json:"messages"`
}

// Leases are the answer's partitions, the first one's fields and More's,
// each with its lease and messages; none when nothing was delivered.
func (a *PopAnswer) Leases() []PopLease {
	if a.LeaseID == "" {
		return a.More
	}
	first := PopLease{Partition: a.Partition, PartitionID: a.PartitionID, LeaseID: a.LeaseID, LeaseUntil: a.LeaseUntil, Messages: a.Messages}
	return append([]PopLease{first}, a.More...)
}

// AckItem settles one message, named by TransactionID or by Offset. A
// failed one is delivered again no sooner than DelayMs after the ack
// (0: the queue's retryDelayMs or retryBackoffMs).
type AckItem struct {
	TransactionID string `json:"transactionId,omitempty"`
	Offset        *int64 `json:"offset,omitempty"`
	Status        string `json:"status"` // "completed" or "failed"
	Error         string `json:"error,omitempty"`
	DelayMs       int64  `json:"delayMs,omitempty"`
}

// AckRequest settles messages delivered under a lease.
type AckRequest struct {
	Group   string    `json:"group"`
	LeaseID string    `json:"leaseId"`
	Items   []AckItem `json:"items"`
}

// AckResult is what became of one item; Result is one of acked,
// alreadyAcked, deadLettered, unknownTransactionId, unknownOffset,
// leaseExpired, leaseNotHeld, notInLease.
type AckResult struct {
	Index         int    `json:"index"`
	TransactionID string `json:"transactionId,omitempty"`
	Offset        *int64 `json:"offset,omitempty"`
	Result        string `json:"result"`
}

// AckAnswer answers an ack: each item's result, the group's cursor on
// the partition after it, and whether the lease ended (everything
// delivered under it is settled).
type AckAnswer struct {
	Items        []AckResult `json:"items"`
	NextOffset   int64       `json:"nextOffset"`
	LeaseEnded   bool        `json:"leaseEnded"`
	DeadLettered int         `json:"deadLettered,omitempty"`
}

// LeaseRequest renews a lease for LeaseMs from now, or with LeaseMs 0
// releases it.
type LeaseRequest struct {
	Group   string `json:"group"`
	LeaseID string `json:"leaseId"`
	LeaseMs int64  `json:"leaseMs,omitempty"` // a release has none
}

// LeaseAnswer is a lease after a renew or a release.
type LeaseAnswer struct {
	LeaseID    string     `json:"leaseId"`
	LeaseUntil *time.Time `json:"leaseUntil,omitempty"`
	Released   bool       `json:"released,omitempty"` // a renewal: absent
}

// GroupsAnswer lists a queue's consumer groups.
type GroupsAnswer struct {
	Queue  string      `json:"queue"`
	Groups []GroupView `json:"groups"`
}

// GroupsRequest, the optional body of a groups request, asks for one
// group's partitions from partition From on (a GroupView's
// NextPartition).
type GroupsRequest struct {
	Group string `json:"group"`
	From  string `json:"from,omitempty"`
}
