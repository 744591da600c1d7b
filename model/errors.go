package model

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
)

var (
	// ErrPartitionNotFound is returned when a push names a partition id that
	// does not exist.
	ErrPartitionNotFound = errors.New("partition not found")
	// ErrQueueNotFound is returned when a queue is read that does not exist.
	ErrQueueNotFound = errors.New("queue not found")
	// ErrInvalidFrame is returned for a frame that cannot be pushed:
	// empty, or with TxnIDs, Hashes and Data of different lengths.
	ErrInvalidFrame = errors.New("invalid frame")
	// ErrInvalidOption is what every OptionError is.
	ErrInvalidOption = errors.New("invalid queue option")
	// ErrNotStored marks a failed push that is known not to have stored
	// anything: the statement never reached PostgreSQL, PostgreSQL refused
	// it, or a verification read after a broken connection found it
	// absent. Without it, a failure may have committed.
	ErrNotStored = errors.New("not stored")
	// ErrStoreChanged is a push refused before it was sent because the
	// connection reached a server of another identity than the one the
	// push was built under (a failover, a restart, a restored backup):
	// its partition ids and its cache's vouches speak of a log that may
	// no longer be there. Nothing was stored; build it again.
	ErrStoreChanged = errors.New("PostgreSQL changed (failover, restart or restore) since the push was built")
	// ErrStoreDown is the cause a push is cancelled with when the gateway
	// has found PostgreSQL out of reach: nothing is waited for then, not
	// even the settling of a push already sent.
	ErrStoreDown = errors.New("PostgreSQL unreachable from this gateway")
	// ErrPayloadConflict is a duplicate rejected because its data differs
	// from its original's (a queue with onConflict reject).
	ErrPayloadConflict = errors.New("payload conflict")
)

// OptionError is a queue option value out of range.
type OptionError struct {
	Option   string // the wire name, e.g. dedupWindowSeconds
	Value    int
	Min, Max int
}

func (e *OptionError) Error() string {
	return fmt.Sprintf("option %s: %d is out of range: %d to %d", e.Option, e.Value, e.Min, e.Max)
}

// Is makes every OptionError an ErrInvalidOption.
func (e *OptionError) Is(target error) bool { return target == ErrInvalidOption }

// NotStored reports whether a failed push is known to have stored
// nothing (ErrNotStored, or an error raised before the statement was
// sent).
func NotStored(err error) bool { return errors.Is(err, ErrNotStored) || SafeToRetry(err) }

// SafeToRetry reports whether err is known to have happened before the
// store's statement was sent, so the same call can be made again without
// any chance of a double write. A store marks such errors with a
// SafeToRetry() bool method (pgx's do).
func SafeToRetry(err error) bool {
	var retryable interface{ SafeToRetry() bool }
	return errors.As(err, &retryable) && retryable.SafeToRetry()
}

// Unreachable reports whether err says the store could not be reached or
// went away, rather than that it refused the statement: answered "retry
// later" (503), not "failed" (500). The driver's errors are recognised by
// what they implement, so that only the store's package knows the driver:
// a network error (a refused or broken connection), an error raised
// before anything was sent, and a connection exception or a server
// shutting down or starting, by SQLSTATE (classes 08 and 57P).
func Unreachable(err error) bool {
	var (
		netErr net.Error
		state  interface{ SQLState() string }
	)
	switch {
	case NotStored(err), errors.Is(err, ErrStoreDown), errors.Is(err, context.DeadlineExceeded),
		errors.As(err, &netErr), errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, io.EOF):
		return true
	case errors.As(err, &state):
		code := state.SQLState()
		return strings.HasPrefix(code, "08") || strings.HasPrefix(code, "57P")
	}
	return false
}
