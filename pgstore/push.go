package pgstore

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/queengate/queengate/model"
	"github.com/queengate/queengate/pgstore/internal/pgwire"
)

// Push writes frames in one transaction and one round trip. Partition row
// locks are taken in ascending id order before anything is written. A
// duplicate writes nothing for its message and leaves the rest untouched.
//
// An error that is model.NotStored stored nothing: the connection could
// not be had, the statement never left, or PostgreSQL refused it. Any
// other error happened after the statement was sent, with the outcome
// unknown: Push then settles it (settle) — once the old backend is gone,
// a verification read finds every message stored (results marked
// Settled, each a duplicate of where its message is), or finds one
// missing (nothing of the bundle committed: NotStored), or cannot tell
// (the error is returned as is; a retry of the same transactionIds is
// exact whatever happened).
//
// Push honours the frames' vouches on whatever server it reaches; a
// caller whose vouches come from a cache of what it read earlier uses
// PushUnder.
func (s *Store) Push(ctx context.Context, frames []model.Frame) ([]model.FrameResult, error) {
	res, _, err := s.push(ctx, frames, nil)
	return res, err
}

// PushUnder is Push for a caller whose frames were built under store
// epoch n (Epoch): their partition ids were resolved, and their vouches
// made, from what connections of epoch n read and wrote. Its connection
// is of the latest epoch (a straggler of an older server is closed, not
// used); when that is not n (the server failed over, restarted or was
// restored since the frames were built), it sends nothing and returns an
// error that is model.ErrStoreChanged (and model.NotStored): the frames
// speak of a log that may no longer be there. It returns the epoch of the
// connection it used, 0 when it had none (or the push was settled).
func (s *Store) PushUnder(ctx context.Context, n uint64, frames []model.Frame) ([]model.FrameResult, uint64, error) {
	return s.push(ctx, frames, &n)
}

func (s *Store) push(ctx context.Context, frames []model.Frame, under *uint64) ([]model.FrameResult, uint64, error) {
	if len(frames) == 0 {
		return nil, 0, nil
	}
	bundle, err := pgwire.EncodeBundle(frames)
	if err != nil {
		return nil, 0, notStored(err)
	}
	defer bundle.Release()
	conn, n, err := s.acquire(ctx)
	if err != nil {
		return nil, 0, notStored(pushFailure(ctx, err))
	}
	if under != nil && n != *under {
		conn.Release()
		return nil, n, notStored(fmt.Errorf("pgstore: push built under epoch %d, connection in epoch %d: %w", *under, n, model.ErrStoreChanged))
	}
	b := backendOf(conn.Conn())
	results, err := bundle.Run(ctx, conn.Conn())
	conn.Release()
	switch {
	case err == nil:
		return results, n, nil
	case refusedBeforeCommit(err):
		return nil, n, notStored(pushFailure(ctx, classify(err)))
	}
	// A settled push teaches no cache anything it vouches with (only an
	// allocator, which can only mark a gap): its epoch is left 0.
	results, err = s.settle(ctx, frames, b, pushFailure(ctx, err))
	return results, 0, err
}

// pushFailure names what ended the push: its error, and the reason its
// context ended when it did (a deadline, or the gateway finding
// PostgreSQL out of reach) — pgx reports only "context canceled".
func pushFailure(ctx context.Context, err error) error {
	if cause := context.Cause(ctx); cause != nil && !errors.Is(err, cause) {
		return fmt.Errorf("pgstore: push: %w (%w)", err, cause)
	}
	return fmt.Errorf("pgstore: push: %w", err)
}

// Hydrate reads a partition's in-window hashes (plus model.ClockSkewSlack
// slack) together with its allocator, in one snapshot.
func (s *Store) Hydrate(ctx context.Context, partitionID int64) (model.Hydration, error) {
	return s.hydrateOne(ctx, partitionID, nil)
}

// HydrateAbove reads the hashes of every row stored above offset above,
// whatever their age, together with the allocator, in one snapshot: what
// a cache entry missed since it last knew everything (a fill).
func (s *Store) HydrateAbove(ctx context.Context, partitionID, above int64) (model.Hydration, error) {
	return s.hydrateOne(ctx, partitionID, &above)
}

// HydrateMany is Hydrate for many partitions in one round trip and one
// snapshot. A partition that does not exist is absent from the map.
func (s *Store) HydrateMany(ctx context.Context, partitionIDs []int64) (map[int64]model.Hydration, error) {
	hs, err := s.hydrate(ctx, partitionIDs, nil)
	if err != nil {
		return nil, fmt.Errorf("pgstore: hydrate %d partitions: %w", len(partitionIDs), err)
	}
	return hs, nil
}

func (s *Store) hydrateOne(ctx context.Context, partitionID int64, above *int64) (model.Hydration, error) {
	hs, err := s.hydrate(ctx, []int64{partitionID}, above)
	if err != nil {
		return model.Hydration{}, fmt.Errorf("pgstore: hydrate %d: %w", partitionID, err)
	}
	h, found := hs[partitionID]
	if !found {
		return model.Hydration{}, fmt.Errorf("%w: %d", model.ErrPartitionNotFound, partitionID)
	}
	return h, nil
}

func (s *Store) hydrate(ctx context.Context, partitionIDs []int64, above *int64) (map[int64]model.Hydration, error) {
	conn, n, err := s.acquire(ctx)
	if err != nil {
		return nil, err
	}
	defer conn.Release()
	rows, err := conn.Query(ctx,
		`SELECT partition_id, last_offset, txns_start, dedup_window_seconds, db_now, base_offset, end_offset, created_at, hashes
		   FROM queen.log_hydrate($1, $2, $3)`, partitionIDs, above, model.ClockSkewSlack.Seconds())
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := make(map[int64]model.Hydration, len(partitionIDs))
	for rows.Next() {
		var (
			h         model.Hydration
			base, end *int64
			created   *time.Time
			hashes    []model.Hash
		)
		if err := rows.Scan(&h.PartitionID, &h.LastOffset, &h.TxnsStart, &h.WindowSeconds, &h.DBNow,
			&base, &end, &created, &hashes); err != nil {
			return nil, err
		}
		h.Epoch = n
		if prev, seen := out[h.PartitionID]; seen {
			h.Txns = prev.Txns // rows come in offset order, partition by partition
		}
		if base != nil { // nil: the partition has no row in the window
			h.Txns = append(h.Txns, model.TxnRange{BaseOffset: *base, EndOffset: *end, CreatedAt: *created, Hashes: hashes})
		}
		out[h.PartitionID] = h
	}
	return out, rows.Err()
}

// Originals reads what a payload-conflict check needs of the messages at
// offsets of a partition. An offset whose message is gone (retention) is
// absent from the map: its conflict cannot be told.
func (s *Store) Originals(ctx context.Context, partitionID int64, offsets []int64) (map[int64]model.Hash, error) {
	return pgwire.Originals(ctx, s.pool, partitionID, offsets)
}
