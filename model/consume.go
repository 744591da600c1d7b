package model

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"time"
)

// ErrGroupNotFound is a consumer group that does not exist (groups are
// created by their first pop).
var ErrGroupNotFound = errors.New("consumer group not found")

// ErrGroupExists is a create of a consumer group that exists with
// another start position.
var ErrGroupExists = errors.New("consumer group exists")

// DefaultMaxAttempts is how many deliveries a queue allows a message
// before dead-lettering it, unless configured (0: never).
const DefaultMaxAttempts = 5

// RetainUntil says what retention waits for beyond retentionSeconds.
type RetainUntil string

const (
	// RetainByAge deletes messages by their age alone.
	RetainByAge RetainUntil = "age"
	// RetainUntilConsumed also waits until every group of the queue has
	// consumed them.
	RetainUntilConsumed RetainUntil = "consumed"
)

// Valid reports whether r is one of the values.
func (r RetainUntil) Valid() bool { return r == RetainByAge || r == RetainUntilConsumed }

// Group is a consumer group of a queue.
type Group struct {
	ID, QueueID int64
	Queue, Name string
}

// PopQuery asks for a lease on a partition with work and its messages.
type PopQuery struct {
	Group       Group
	PartitionID int64 // 0: any partition of the queue with work
	Max         int
	Lease       time.Duration
	Consumer    string
	// MaxBytes bounds what the messages take in the answer (each as
	// DeliverySize bounds it); the first message may take more, but never
	// more than Room: when it does not fit in Room, nothing is delivered.
	MaxBytes, Room int64
	// MaxDelivery is the most one message may take in any pop's answer
	// (Room with no ack answer beside it): a message that takes more can
	// never be delivered, and is dead-lettered instead. 0: no bound.
	MaxDelivery int64
	// MaxAckPending bounds what Consumer holds delivered and not yet
	// settled, this pop's delivery included (0: no bound); the queue's
	// maxAckPending bounds the group's likewise.
	MaxAckPending int
}

// NamedPartition is the partition r names, nil when any partition will
// do: the stores' nullable argument.
func (r PopQuery) NamedPartition() *int64 {
	if r.PartitionID <= 0 {
		return nil
	}
	id := r.PartitionID
	return &id
}

// DeliveryEnvelope bounds what a delivered message takes in a pop's
// answer beside its data, transactionId and last error: the field names,
// offset, messageId, createdAt, attempts and separators.
const DeliveryEnvelope = 256

// DeliverySize bounds what a delivered message takes in a pop's answer:
// its data as stored, its transactionId and last error escaped at worst
// (\u00XX for every byte), and the envelope. The store computes the same.
func DeliverySize(d LeasedMessage) int64 {
	return int64(len(d.Data)+len(d.Meta)+6*(len(d.TxnID)+len(d.LastError))) + DeliveryEnvelope
}

// LeasedMessage is one message handed to a consumer.
type LeasedMessage struct {
	LogMessage
	// Attempts counts its deliveries to the group, this one included.
	Attempts int
	// LastError is what the last consumer that failed it said.
	LastError string
}

// PopResult is a lease and what was delivered under it; no lease (empty
// LeaseID) when nothing was.
type PopResult struct {
	PartitionID  int64
	Partition    string
	LeaseID      string
	LeaseUntil   time.Time
	Messages     []LeasedMessage
	DeadLettered int // moved to the dead-letter queue instead of delivered
	// DeadLetters are those moved, without their data (for the log line
	// and the metrics each dead letter gets).
	DeadLetters []DeadLetter
	// RanOutLease: the partition's previous lease had run out, and this
	// pop ended it.
	RanOutLease bool
	// TooLarge counts those of DeadLettered moved because they take more
	// than MaxDelivery: no pop could ever deliver them.
	TooLarge int
	// DeadLetterErr is why messages out of attempts could not be moved
	// (they stay for a later pop); the delivered ones are leased anyway.
	DeadLetterErr error
	// Held: nothing was delivered because the consumer or its group holds
	// maxAckPending messages unsettled (whatever work there is).
	Held bool
}

// Settlement settles one message, named by Offset (>= 0) or TxnID.
type Settlement struct {
	Offset    int64 // -1: named by TxnID
	TxnID     string
	Completed bool // false: failed, redelivered later
	Error     string
	// DelayMs, when above 0, is how long a failed message waits before it
	// is delivered again; otherwise the queue's retry options decide.
	DelayMs int64
}

// AckOutcome is what became of one Settlement.
type AckOutcome struct {
	Offset int64 // -1 when it could not be resolved
	Result string
}

// Ack results (docs/protocol.md, "Consuming").
const (
	AckAcked         = "acked"
	AckAlready       = "alreadyAcked"
	AckUnknownTxnID  = "unknownTransactionId"
	AckUnknownOffset = "unknownOffset"
	AckLeaseExpired  = "leaseExpired"
	AckLeaseNotHeld  = "leaseNotHeld"
	AckNotInLease    = "notInLease"
	// AckDeadLettered: settled before, by moving it to the dead-letter
	// queue (out of attempts).
	AckDeadLettered = "deadLettered"
)

// CarriedAck is one of the acks a pop carries: a lease's items.
type CarriedAck struct {
	PartitionID int64
	LeaseID     string
	Items       []Settlement
}

// SettledBatch is a batch's outcomes, in item order, and the group's cursor
// on the partition after it.
type SettledBatch struct {
	Items        []AckOutcome
	NextOffset   int64
	LeaseEnded   bool
	DeadLettered int
	// LeaseCounted: the lease is counted by pops under maxAckPending, so
	// what the ack settled may let one of them deliver.
	LeaseCounted bool
	// DeadLetters are those moved, without their data.
	DeadLetters []DeadLetter
}

// GroupPartition is a group's position on one partition.
type GroupPartition struct {
	Group, Partition string
	PartitionID      int64
	NextOffset       int64 // every offset below is consumed
	LastOffset       int64
	Leased           bool
	LeaseConsumer    string // while Leased
	LeaseUntil       time.Time
	// Unconfirmed counts deliveries taken back because their lease ran
	// out with nothing heard from its consumer.
	Unconfirmed int64
	// DeletedUnconsumed counts messages retention deleted before the
	// group consumed them.
	DeletedUnconsumed int64
	// DelayedUntil, when not zero, is when a failure's delay (asked for,
	// or a run-out lease's) stops holding the partition for the group.
	DelayedUntil time.Time
}

// Lag is how many messages the group has yet to consume there.
func (g GroupPartition) Lag() int64 { return max(0, g.LastOffset-g.NextOffset+1) }

// GroupPartitionID names one group's cursor on one partition.
type GroupPartitionID struct {
	GroupID, PartitionID int64
}

// DeadLetterQueue is the name of queue's dead-letter queue: queue+"-dlq"
// when that fits a name's 128 bytes; a longer queue's is its first 91
// bytes, "-dlq-" and 32 hex digits of the SHA-256 of its whole name (128
// bytes). The long form never ends in "-dlq", so it never equals a short
// one, and two long names share it only if their hashes' first 128 bits
// do: no two queues share a dead-letter queue (truncating alone made
// every queue sharing its first 124 bytes share one).
func DeadLetterQueue(queue string) string {
	const suffix = "-dlq"
	if len(queue)+len(suffix) <= maxNameBytes {
		return queue + suffix
	}
	const hashDigits = 32
	sum := sha256.Sum256([]byte(queue))
	keep := maxNameBytes - len(suffix+"-") - hashDigits
	return queue[:keep] + suffix + "-" + hex.EncodeToString(sum[:hashDigits/2])
}

// maxNameBytes is the longest queue name (queengate.MaxNameBytes).
const maxNameBytes = 128

// DeadLetter is the data of a message moved to a dead-letter queue: where
// it came from, why, and its data as pushed, or DataOmitted when that
// could not fit in one message (docs/protocol.md, "Dead letters").
type DeadLetter struct {
	Queue     string    `json:"queue"`
	Partition string    `json:"partition"`
	Group     string    `json:"group"`
	MessageID string    `json:"messageId"`
	Offset    int64     `json:"offset"`
	TxnID     string    `json:"transactionId"`
	CreatedAt time.Time `json:"createdAt"`
	Attempts  int       `json:"attempts"`
	Error     string    `json:"error"`
	// DataOmitted stands for data too large to fit in the dead letter.
	DataOmitted *OmittedData `json:"dataOmitted,omitempty"`
	// Headers are the original's headers, as stored (docs/protocol.md,
	// "Headers").
	Headers json.RawMessage `json:"headers,omitempty"`
	// DataEncoding is "base64" when Data is the base64 of binary data.
	DataEncoding string `json:"dataEncoding,omitempty"`
	// Data is the original data byte for byte; the store writes it after
	// the other fields, as it was stored.
	Data json.RawMessage `json:"data,omitempty"`
}

// Meta is the original's meta, as the letter carries it.
func (l *DeadLetter) Meta() []byte {
	return JoinMeta(l.Headers, l.DataEncoding == DataEncodingB64)
}

// OmittedData says how large the data a dead letter left out was.
type OmittedData struct {
	Bytes int `json:"bytes"`
}

// TailCycle is the usual cycle served from a gateway's memory of what it
// committed (docs/design.md, "The tail"): the pop Pop carries the ack
// of lease LeaseID, offsets From..To of partition PartitionID, which the
// gateway found complete the whole lease; the next lease is To+1..Hi,
// whose messages the gateway holds. Epoch is the store epoch its
// memory speaks of.
type TailCycle struct {
	Pop         PopQuery
	PartitionID int64
	LeaseID     string
	From, To    int64
	Hi          int64
	Epoch       uint64
}

// TailLease is the lease a TailCycle took.
type TailLease struct {
	Partition  string
	LeaseID    string
	LeaseUntil time.Time
}

// SliceBudget is the most the messages of a cycle's pop may take, as
// queen.consumer_cycle bounds them: the pop's room, its maxBytes, and
// what one message may take in any pop.
func SliceBudget(r PopQuery) int64 {
	b := min(r.Room, r.MaxBytes)
	if r.MaxDelivery > 0 {
		b = min(b, r.MaxDelivery)
	}
	return b
}
