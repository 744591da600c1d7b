package pgstore

import (
	"context"
	"errors"
	"fmt"
	"github.com/queengate/queengate/model"
	"math"
	"time"

	"github.com/jackc/pgx/v5"
)

// pushBundleSQL calls log_push_bundle with the arrays bundleArgs makes,
// each named after the routine's parameter.
const pushBundleSQL = `SELECT frame, base_offset, last_offset, probe, unrolled, dup_idx, dup_off, on_conflict
FROM queen.log_push_bundle(p_pids => @pids, p_verified => @verified, p_verified_windows => @verified_windows,
    p_counts => @counts, p_txn_ids => @txn_ids, p_hashes => @hashes, p_data => @data, p_bytes => @bytes,
    p_cand_counts => @cand_counts, p_cand_idx => @cand_idx, p_cand_off => @cand_off,
    p_dh_counts => @dh_counts, p_data_hashes => @data_hashes)`

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
func (s *Store) Push(ctx context.Context, frames []model.Frame) ([]model.FrameResult, error) {
	if len(frames) == 0 {
		return nil, nil
	}
	args, err := bundleArgs(frames)
	if err != nil {
		return nil, notStored(err)
	}
	conn, err := s.pool.Acquire(ctx)
	if err != nil {
		return nil, notStored(pushFailure(ctx, err))
	}
	b := backendOf(conn.Conn())
	rows, err := conn.Query(ctx, pushBundleSQL, args)
	var results []model.FrameResult
	if err == nil {
		results, err = collectResults(rows, frames)
	}
	conn.Release()
	switch {
	case err == nil:
		return results, nil
	case refusedBeforeCommit(err):
		return nil, notStored(pushFailure(ctx, classify(err)))
	}
	return s.settle(ctx, frames, b, pushFailure(ctx, err))
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

func bundleArgs(frames []model.Frame) (pgx.NamedArgs, error) {
	total, dataHashed := 0, 0
	for i := range frames {
		fr := &frames[i]
		n := len(fr.Hashes)
		if n == 0 || len(fr.TxnIDs) != n || len(fr.Data) != n || (fr.DataHashes != nil && len(fr.DataHashes) != n) {
			return nil, fmt.Errorf("%w: frame %d for partition %d has %d txn ids, %d hashes, %d data, %d data hashes",
				model.ErrInvalidFrame, i, fr.PartitionID, len(fr.TxnIDs), n, len(fr.Data), len(fr.DataHashes))
		}
		total += n
		dataHashed += len(fr.DataHashes)
	}
	pids := make([]int64, len(frames))
	verified := make([]int64, len(frames))
	windows := make([]int32, len(frames))
	counts := make([]int32, len(frames))
	sizes := make([]int64, len(frames)) // data bytes as sent, per frame
	candCounts := make([]int32, len(frames))
	dhCounts := make([]int32, len(frames))
	dataHashes := noDataHashes
	if dataHashed > 0 {
		dataHashes = newArrayBuilder(oidUUID, dataHashed, 16*dataHashed)
	}
	var candIdx []int32
	var candOff []int64
	txnIDs := newArrayBuilder(oidText, total, 32*total)
	hashes := newArrayBuilder(oidUUID, total, 16*total)
	data := newArrayBuilder(oidJSON, total, 128*total)
	for i := range frames {
		fr := &frames[i]
		pids[i], verified[i], counts[i] = fr.PartitionID, fr.Verified, int32(len(fr.Hashes))
		windows[i] = int32(min(fr.VerifiedWindow, math.MaxInt32))
		for _, id := range fr.TxnIDs {
			txnIDs.appendString(id)
		}
		for j := range fr.Hashes {
			hashes.appendBytes(fr.Hashes[j][:])
		}
		for _, d := range fr.Data {
			if d == nil {
				d = jsonNull
			}
			data.appendBytes(d)
			sizes[i] += int64(len(d))
		}
		dhCounts[i] = int32(len(fr.DataHashes))
		for j := range fr.DataHashes {
			dataHashes.appendBytes(fr.DataHashes[j][:])
		}
		candCounts[i] = int32(len(fr.Candidates))
		for _, c := range fr.Candidates {
			candIdx = append(candIdx, c.Index+1) // 1-based in SQL
			candOff = append(candOff, c.Offset)
		}
	}
	if candIdx == nil {
		candIdx, candOff = []int32{}, []int64{}
	}
	return pgx.NamedArgs{"pids": pids, "verified": verified, "verified_windows": windows, "counts": counts,
		"txn_ids": txnIDs.encoded(), "hashes": hashes.encoded(), "data": data.encoded(), "bytes": sizes,
		"cand_counts": candCounts, "cand_idx": candIdx, "cand_off": candOff,
		"dh_counts": dhCounts, "data_hashes": dataHashes.encoded()}, nil
}

var jsonNull = []byte("null")

// noDataHashes is the empty uuid[] of a bundle without data hashes (every
// queue in it ignores payload conflicts): shared, never appended to.
var noDataHashes = newArrayBuilder(oidUUID, 0, 0)

func collectResults(rows pgx.Rows, frames []model.Frame) ([]model.FrameResult, error) {
	defer rows.Close()
	results := make([]model.FrameResult, len(frames))
	seen := 0
	for rows.Next() {
		var (
			frame    int32
			base     *int64
			last     int64
			probe    string
			unrolled int64
			dupIdx   []int32
			dupOff   []int64
			mode     string
		)
		if err := rows.Scan(&frame, &base, &last, &probe, &unrolled, &dupIdx, &dupOff, &mode); err != nil {
			return nil, err
		}
		i := int(frame) - 1
		if i < 0 || i >= len(frames) || len(dupIdx) != len(dupOff) || results[i].Outcomes != nil {
			return nil, fmt.Errorf("malformed or repeated result row for frame %d", frame)
		}
		n := len(frames[i].Hashes)
		p, ok := model.ParseProbe(probe)
		if !ok {
			return nil, fmt.Errorf("unknown probe %q for frame %d", probe, frame)
		}
		r := model.FrameResult{PartitionID: frames[i].PartitionID, BaseOffset: -1, LastOffset: last,
			Probe: p, Unrolled: unrolled, Outcomes: make([]model.Outcome, n), OnConflict: model.ConflictMode(mode)}
		for k, idx := range dupIdx {
			if idx < 1 || int(idx) > n {
				return nil, fmt.Errorf("duplicate index %d out of range for frame %d", idx, frame)
			}
			r.Outcomes[idx-1] = model.Outcome{Offset: dupOff[k], Duplicate: true}
		}
		if base == nil && len(dupIdx) != n {
			return nil, fmt.Errorf("frame %d: nothing written but %d of %d messages are duplicates", frame, len(dupIdx), n)
		}
		if base != nil {
			r.BaseOffset = *base
			next := *base
			for j := range r.Outcomes {
				if !r.Outcomes[j].Duplicate {
					r.Outcomes[j].Offset = next
					next++
				}
			}
			if next-1 != last {
				return nil, fmt.Errorf("frame %d: %d new messages from %d do not end at %d", frame, next-*base, *base, last)
			}
		}
		results[i] = r
		seen++
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	if seen != len(frames) {
		return nil, fmt.Errorf("got %d result rows for %d frames", seen, len(frames))
	}
	return results, nil
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
	rows, err := s.pool.Query(ctx,
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
	return originals(ctx, s.pool, partitionID, offsets)
}

// querier is what reads need of a pool or a transaction.
type querier interface {
	Query(context.Context, string, ...any) (pgx.Rows, error)
}

// originals is Originals read through q (an ack-and-push reads them in
// its transaction, under the partition's lock).
func originals(ctx context.Context, q querier, partitionID int64, offsets []int64) (map[int64]model.Hash, error) {
	rows, err := q.Query(ctx, "SELECT off, data_hash, data::text FROM queen.log_originals($1, $2)", partitionID, offsets)
	if err != nil {
		return nil, fmt.Errorf("pgstore: originals of %d: %w", partitionID, err)
	}
	defer rows.Close()
	out := make(map[int64]model.Hash, len(offsets))
	for rows.Next() {
		var (
			off  int64
			hash *model.Hash
			data *string
		)
		if err := rows.Scan(&off, &hash, &data); err != nil {
			return nil, fmt.Errorf("pgstore: originals of %d: %w", partitionID, err)
		}
		switch {
		case hash != nil:
			out[off] = *hash
		case data != nil:
			out[off] = model.HashData([]byte(*data))
		}
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("pgstore: originals of %d: %w", partitionID, err)
	}
	return out, nil
}
