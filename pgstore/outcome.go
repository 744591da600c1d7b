package pgstore

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/queengate/queengate/model"
)

// defaultSettleTimeout bounds the settling of one unknown outcome.
const defaultSettleTimeout = 10 * time.Second

// notStoredError is a push failure known to have stored nothing.
type notStoredError struct{ err error }

func (e *notStoredError) Error() string        { return e.err.Error() }
func (e *notStoredError) Unwrap() error        { return e.err }
func (e *notStoredError) Is(target error) bool { return target == model.ErrNotStored }

func notStored(err error) error { return &notStoredError{err} }

// refusedBeforeCommit reports whether err means the push's transaction
// did not commit: it never left (pgconn's SafeToRetry), or PostgreSQL
// answered the statement with an ERROR, which aborts its transaction. A
// FATAL or PANIC (a terminated backend, a server shutting down or
// crashing) can arrive after COMMIT, so it is settled instead.
func refusedBeforeCommit(err error) bool {
	if pgconn.SafeToRetry(err) {
		return true
	}
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && pgErr.Severity == "ERROR"
}

// backend identifies the server process behind a connection: pids are
// reused, so it is the pid with the process's start time. It is recorded
// when the connection is made (rememberServer).
type backend struct {
	pid   uint32
	start time.Time
}

const backendStartKey = "queengate.backend_start"

func backendOf(conn *pgx.Conn) backend {
	start, _ := conn.PgConn().CustomData()[backendStartKey].(time.Time)
	return backend{pid: conn.PgConn().PID(), start: start}
}

// settle resolves a push whose connection broke after the statement was
// sent. First the old backend must be gone — terminated, and no longer in
// pg_stat_activity — so that its transaction has committed or rolled back
// for good; then a verification read (queen.log_find) looks for every
// message of every frame. Commit is all or nothing, so one message
// missing means nothing of the bundle committed. While PostgreSQL cannot
// be reached (a restart) or the attempt fails it tries again, for up to the settle timeout.
// A frame whose queue has the window off cannot be verified this way
// (repeats are stored too).
func (s *Store) settle(pushCtx context.Context, frames []model.Frame, b backend, cause error) ([]model.FrameResult, error) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(pushCtx), s.settleTimeout)
	defer cancel()
	// The push's own deadline has passed by now, but a gateway that has
	// found PostgreSQL out of reach does not wait for it.
	stop := context.AfterFunc(pushCtx, func() {
		if errors.Is(context.Cause(pushCtx), model.ErrStoreDown) {
			cancel()
		}
	})
	defer stop()
	wait := 50 * time.Millisecond
	for {
		results, err := s.verify(ctx, frames, b, cause)
		switch {
		case err == nil, errors.Is(err, model.ErrNotStored):
			return results, err
		case errors.Is(err, errUnverifiable):
			return nil, fmt.Errorf("%w (could not settle it: %v)", cause, err)
		}
		select {
		case <-ctx.Done():
			if down := context.Cause(pushCtx); errors.Is(down, model.ErrStoreDown) {
				err = down
			}
			return nil, fmt.Errorf("%w (could not settle it: %v)", cause, err)
		case <-time.After(wait):
			wait = min(2*wait, time.Second)
		}
	}
}

// errUnverifiable: a frame's queue has the window off, so a verification
// read cannot tell this push's messages from earlier ones.
var errUnverifiable = errors.New("a queue's window is off")

// verify makes one attempt at settling.
func (s *Store) verify(ctx context.Context, frames []model.Frame, b backend, cause error) ([]model.FrameResult, error) {
	conn, err := s.pool.Acquire(ctx)
	if err != nil {
		return nil, err
	}
	defer conn.Release()
	if err := awaitGone(ctx, conn.Conn(), b); err != nil {
		return nil, err
	}
	results := make([]model.FrameResult, len(frames))
	verifiable := true
	for i := range frames {
		fr := &frames[i]
		window, last, found, err := find(ctx, conn.Conn(), fr.PartitionID, fr.Hashes)
		if err != nil {
			return nil, err
		}
		r := model.FrameResult{PartitionID: fr.PartitionID, BaseOffset: -1, LastOffset: last, Settled: true,
			Outcomes: make([]model.Outcome, len(fr.Hashes))}
		for k, h := range fr.Hashes {
			off, ok := found[h]
			if !ok && window > 0 {
				return nil, notStored(fmt.Errorf("%w (settled: not committed, a message of partition %d is absent)", cause, fr.PartitionID))
			}
			r.Outcomes[k] = model.Outcome{Offset: off, Duplicate: true}
		}
		verifiable = verifiable && window > 0
		results[i] = r
	}
	if !verifiable {
		return nil, errUnverifiable
	}
	return results, nil
}

// awaitGone terminates backend b and waits until it has left.
func awaitGone(ctx context.Context, conn *pgx.Conn, b backend) error {
	const alive = "FROM pg_stat_activity WHERE pid = $1 AND backend_start = $2"
	if _, err := conn.Exec(ctx, "SELECT pg_terminate_backend(pid) "+alive, int64(b.pid), b.start); err != nil {
		return err
	}
	for {
		var gone bool
		if err := conn.QueryRow(ctx, "SELECT NOT EXISTS (SELECT 1 "+alive+")", int64(b.pid), b.start).Scan(&gone); err != nil {
			return err
		}
		if gone {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("backend %d still there: %w", b.pid, ctx.Err())
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// find reads which of hashes partition pid holds in its window (earliest
// offsets), with the window and the allocator.
func find(ctx context.Context, conn *pgx.Conn, pid int64, hashes []model.Hash) (window int, last int64, found map[model.Hash]int64, err error) {
	rows, err := conn.Query(ctx, "SELECT dedup_window_seconds, last_offset, h, first_offset FROM queen.log_find($1, $2)", pid, hashes)
	if err != nil {
		return 0, 0, nil, err
	}
	defer rows.Close()
	found = map[model.Hash]int64{}
	for rows.Next() {
		var (
			h   *model.Hash
			off *int64
		)
		if err := rows.Scan(&window, &last, &h, &off); err != nil {
			return 0, 0, nil, err
		}
		if h != nil && off != nil {
			found[*h] = *off
		}
	}
	return window, last, found, rows.Err()
}

// Unreachable reports whether err means PostgreSQL could not be reached
// or was not accepting work yet — a refused dial, a timeout, a server
// starting up, shutting down or recovering — as opposed to a refusal that
// waiting does not cure (a wrong password, a missing database, an SQL
// error).
func Unreachable(err error) bool {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		// 57P01-57P03: shut down, crashed, cannot connect now; 08: connection.
		return strings.HasPrefix(pgErr.Code, "57P") || strings.HasPrefix(pgErr.Code, "08")
	}
	var connectErr *pgconn.ConnectError
	var netErr net.Error
	return errors.As(err, &connectErr) || errors.As(err, &netErr) || pgconn.SafeToRetry(err) ||
		errors.Is(err, context.DeadlineExceeded) || errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) ||
		errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.ECONNRESET)
}
