package model

import (
	"errors"
	"time"
)

// ErrNotFound is a queue, partition or message that does not exist (or
// is no longer stored).
var ErrNotFound = errors.New("not found")

// LogMessage is one message as the log holds it.
type LogMessage struct {
	PartitionID int64
	Offset      int64
	TxnID       string
	CreatedAt   time.Time
	// Data is the message's data as pushed (JSON text, byte for byte).
	Data []byte
	// Meta is its headers and data encoding (AppendMeta), nil for none.
	Meta []byte
}

// ReadQuery asks for a partition's messages from an offset.
type ReadQuery struct {
	Queue, Partition string
	From             int64
	Max              int   // most messages
	MaxBytes         int64 // most data bytes (at least one message is returned)
}

// ReadResult is a run of a partition's messages in offset order.
type ReadResult struct {
	PartitionID int64
	Messages    []LogMessage
	// Next is the offset to read from next: past the last message
	// returned, or From when nothing was (at the end).
	Next int64
	// FirstOffset is the first offset still stored (retention deletes a
	// prefix); LastOffset+1 when nothing is. A read from below it starts
	// at it.
	FirstOffset int64
	// LastOffset is the last offset written, -1 before the first.
	LastOffset int64
}

// TxnLookup is where a transactionId's message is, as the deduplication
// verdict sees it: the earliest copy within the queue's window.
type TxnLookup struct {
	PartitionID   int64
	WindowSeconds int
	Found         bool
	Offset        int64
	CreatedAt     time.Time
	// Retained: the message itself is still stored (retention may delete
	// it while its transactionId still counts in the window).
	Retained bool
	// DBNow is PostgreSQL's clock at the lookup: the window is measured on
	// it.
	DBNow time.Time
}
