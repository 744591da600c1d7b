package model

import (
	"context"
	"time"
)

// ScheduledTimer is a pending timer as stored.
type ScheduledTimer struct {
	ID          string // the timerId, a UUID
	PartitionID int64
	FireAt      time.Time
	TxnID       string
	// Existing is true when the transactionId was already pending in the
	// partition: that timer is answered, and nothing is changed.
	Existing bool
}

// TimerInfo is a pending timer with its queue and partition names.
type TimerInfo struct {
	ID, Queue, Partition, TxnID string
	FireAt, CreatedAt           time.Time
}

// TimerKey is a place in the order timers are listed in: by fire
// time, then id.
type TimerKey struct {
	FireAt time.Time
	ID     string
}

// FiredTimer is a timer whose fire committed.
type FiredTimer struct {
	ID          string
	PartitionID int64
	Offset      int64 // where its message is
	TxnID       string
	FireAt      time.Time
	FiredAt     time.Time // PostgreSQL's clock when its message was pushed
	// Epoch is the store's epoch of the connection that fired it (as
	// Hydration.Epoch).
	Epoch uint64
}

// TimerNotifyHorizon: a schedule notifies the fire loops when its timer is
// due within this, so a loop may sleep that long without missing one.
const TimerNotifyHorizon = 30 * time.Second

// TimerListener receives schedule notifications.
type TimerListener interface {
	// Wait blocks until a schedule notifies or ctx ends, and returns the
	// scheduled timer's fireAt in Unix milliseconds (0 if unknown: look
	// now).
	Wait(ctx context.Context) (int64, error)
	Close()
}
