package model

import (
	"errors"
	"fmt"
	"math"
	"time"
)

// Queue option defaults (docs/admin-api.md, "Configure").
const (
	DefaultDedupWindowSeconds = 3600
	DefaultRetentionSeconds   = 0
	// MaxOptionSeconds is the largest value an option takes (the column
	// is an integer).
	MaxOptionSeconds = math.MaxInt32
	// MaxRetryDelayMs is the longest a failed message may be made to wait
	// (a day), by retryDelayMs or an entry of retryBackoffMs.
	MaxRetryDelayMs = 86400000
	// MaxRetryBackoff is how many entries retryBackoffMs may have.
	MaxRetryBackoff = 64
	// MaxAckPendingLimit bounds maxAckPending, a queue's and a pop's.
	MaxAckPendingLimit = 1000000
	// DefaultMaxUnheardDeliveries is maxUnheardDeliveries' default: more
	// than 1, so that a lost answer alone never counts an attempt.
	DefaultMaxUnheardDeliveries = 3
	// MaxUnheardDeliveriesLimit bounds maxUnheardDeliveries.
	MaxUnheardDeliveriesLimit = 1000
)

// Options is a queue's whole configuration.
type Options struct {
	// DedupWindowSeconds is the deduplication window; 0 disables the probe
	// (the transactionIds' hashes are still stored).
	DedupWindowSeconds int
	// RetentionSeconds deletes messages older than this; 0 keeps them.
	RetentionSeconds int
	// OnConflict is what a duplicate whose data differs from its
	// original's is answered.
	OnConflict ConflictMode
	// MaxAttempts is how many deliveries to a consumer group a message
	// gets before it is dead-lettered; 0 never dead-letters.
	MaxAttempts int
	// RetainUntil says whether retention also waits for every consumer
	// group.
	RetainUntil RetainUntil
	// RetryDelayMs is how long a failed message waits before it is
	// delivered again, when its failure does not say; 0 not at all.
	RetryDelayMs int
	// RetryBackoffMs, when not empty, is that wait by attempt instead:
	// the n-th entry after the n-th attempt, the last after every later.
	RetryBackoffMs []int
	// MaxAckPending bounds what each consumer group holds delivered and
	// not yet settled; 0: no bound.
	MaxAckPending int
	// GroupIdleSeconds: a consumer group idle for longer no longer holds
	// retention back; 0: every group holds.
	GroupIdleSeconds int
	// MaxUnheardDeliveries: every so many leases in a row that run out
	// unheard from the same message count their attempts, so that a
	// message that kills its consumer is dead-lettered too; 0: none does.
	MaxUnheardDeliveries int
}

// OptionsPatch names the options a configure request sets; nil is an
// omitted option.
type OptionsPatch struct {
	DedupWindowSeconds   *int
	RetentionSeconds     *int
	OnConflict           *ConflictMode
	MaxAttempts          *int
	RetainUntil          *RetainUntil
	RetryDelayMs         *int
	RetryBackoffMs       *[]int
	MaxAckPending        *int
	GroupIdleSeconds     *int
	MaxUnheardDeliveries *int
}

// Validate checks every option the patch sets; each error is an
// *OptionError.
func (p OptionsPatch) Validate() error {
	var errs []error
	check := func(name string, v *int, max int) {
		if v != nil && (*v < 0 || *v > max) {
			errs = append(errs, &OptionError{Option: name, Value: *v, Max: max})
		}
	}
	check("dedupWindowSeconds", p.DedupWindowSeconds, MaxOptionSeconds)
	check("retentionSeconds", p.RetentionSeconds, MaxOptionSeconds)
	check("maxAttempts", p.MaxAttempts, MaxOptionSeconds)
	check("retryDelayMs", p.RetryDelayMs, MaxRetryDelayMs)
	if p.RetryBackoffMs != nil {
		if n := len(*p.RetryBackoffMs); n > MaxRetryBackoff {
			errs = append(errs, fmt.Errorf("%w: retryBackoffMs has %d entries: at most %d", ErrInvalidOption, n, MaxRetryBackoff))
		}
		for i := range *p.RetryBackoffMs {
			check(fmt.Sprintf("retryBackoffMs[%d]", i), &(*p.RetryBackoffMs)[i], MaxRetryDelayMs)
		}
	}
	check("maxAckPending", p.MaxAckPending, MaxAckPendingLimit)
	check("groupIdleSeconds", p.GroupIdleSeconds, MaxOptionSeconds)
	check("maxUnheardDeliveries", p.MaxUnheardDeliveries, MaxUnheardDeliveriesLimit)
	if p.RetainUntil != nil && !p.RetainUntil.Valid() {
		errs = append(errs, fmt.Errorf("%w: retainUntil %q: age or consumed", ErrInvalidOption, string(*p.RetainUntil)))
	}
	if p.OnConflict != nil && !p.OnConflict.Valid() {
		errs = append(errs, fmt.Errorf("%w: onConflict %q: ignore, flag or reject", ErrInvalidOption, string(*p.OnConflict)))
	}
	return errors.Join(errs...)
}

// QueueConfig is a queue's configuration row.
type QueueConfig struct {
	ID   int64
	Name string
	Options
	CreatedAt time.Time
	UpdatedAt time.Time
}

// PartitionInfo is a partition's row and what it holds.
type PartitionInfo struct {
	ID         int64
	Name       string
	LastOffset int64 // the allocator; -1 before the first message
	TxnsStart  int64 // purge watermark: the transactionIds of frames below it are no longer read
	CreatedAt  time.Time
	// FirstOffset is the first offset still stored (segment retention
	// deletes a prefix): LastOffset+1 when nothing is.
	FirstOffset int64
	// StoredBytes is the data of the stored messages, as sent.
	StoredBytes int64
	// OldestAt and NewestAt are when the first and the last stored
	// message were written; zero when nothing is stored.
	OldestAt, NewestAt time.Time
}

// StoredMessages is the number of messages the partition holds: offsets
// are contiguous and retention deletes a prefix.
func (p PartitionInfo) StoredMessages() int64 { return p.LastOffset - p.FirstOffset + 1 }

// ConflictMode is a queue's answer to a duplicate whose data differs from
// the original's (a payload conflict). The verdict itself, duplicate and
// nothing written, is the same in every mode.
type ConflictMode string

const (
	// ConflictIgnore answers it as any duplicate; nothing extra is stored.
	ConflictIgnore ConflictMode = "ignore"
	// ConflictFlag answers it duplicate, marked as a conflict.
	ConflictFlag ConflictMode = "flag"
	// ConflictReject answers it failed, with a conflict error.
	ConflictReject ConflictMode = "reject"
)

// Valid reports whether m is one of the modes.
func (m ConflictMode) Valid() bool {
	return m == ConflictIgnore || m == ConflictFlag || m == ConflictReject
}

// Compares reports whether duplicates need their original's data: every
// mode but ignore.
func (m ConflictMode) Compares() bool { return m == ConflictFlag || m == ConflictReject }
