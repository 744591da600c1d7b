package pgwire

import (
	"context"
	"fmt"
	"math"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/queengate/queengate/model"
)

// PushBundleSQL calls log_push_bundle with the arrays BundleArgs makes,
// each named after the routine's parameter.
const PushBundleSQL = `SELECT frame, base_offset, last_offset, probe, unrolled, dup_idx, dup_off, on_conflict, created_at
FROM queen.log_push_bundle(p_pids => @pids, p_verified => @verified, p_verified_windows => @verified_windows,
    p_counts => @counts, p_txn_ids => @txn_ids, p_hashes => @hashes, p_data => @data, p_bytes => @bytes,
    p_cand_counts => @cand_counts, p_cand_idx => @cand_idx, p_cand_off => @cand_off,
    p_dh_counts => @dh_counts, p_data_hashes => @data_hashes)`

// BundleArgs are log_push_bundle's arguments for frames, named after
// its parameters (PushBundleSQL), the arrays built in the binary format.
func BundleArgs(frames []model.Frame) (pgx.NamedArgs, error) {
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
		dataHashes = NewArrayBuilder(OIDUUID, dataHashed, 16*dataHashed)
	}
	var candIdx []int32
	var candOff []int64
	txnIDs := NewArrayBuilder(OIDText, total, 32*total)
	hashes := NewArrayBuilder(OIDUUID, total, 16*total)
	data := NewArrayBuilder(OIDJSON, total, 128*total)
	for i := range frames {
		fr := &frames[i]
		pids[i], verified[i], counts[i] = fr.PartitionID, fr.Verified, int32(len(fr.Hashes))
		windows[i] = int32(min(fr.VerifiedWindow, math.MaxInt32))
		for _, id := range fr.TxnIDs {
			txnIDs.AppendString(id)
		}
		for j := range fr.Hashes {
			hashes.AppendBytes(fr.Hashes[j][:])
		}
		for _, d := range fr.Data {
			d = model.StoredData(d) // JSON null for a message sent without data
			data.AppendBytes(d)
			sizes[i] += int64(len(d))
		}
		dhCounts[i] = int32(len(fr.DataHashes))
		for j := range fr.DataHashes {
			dataHashes.AppendBytes(fr.DataHashes[j][:])
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
		"txn_ids": txnIDs.Encoded(), "hashes": hashes.Encoded(), "data": data.Encoded(), "bytes": sizes,
		"cand_counts": candCounts, "cand_idx": candIdx, "cand_off": candOff,
		"dh_counts": dhCounts, "data_hashes": dataHashes.Encoded()}, nil
}

// noDataHashes is the empty uuid[] of a bundle without data hashes (every
// queue in it ignores payload conflicts): shared, never appended to.
var noDataHashes = NewArrayBuilder(OIDUUID, 0, 0)

// CollectResults reads PushBundleSQL's rows, one per frame, into each
// frame's result, and refuses rows that do not add up.
func CollectResults(rows pgx.Rows, frames []model.Frame) ([]model.FrameResult, error) {
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
			created  time.Time
		)
		if err := rows.Scan(&frame, &base, &last, &probe, &unrolled, &dupIdx, &dupOff, &mode, &created); err != nil {
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
			Probe: p, Unrolled: unrolled, Outcomes: make([]model.Outcome, n), OnConflict: model.ConflictMode(mode), CreatedAt: created}
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

// Querier is what reads need of a pool or a transaction.
type Querier interface {
	Query(context.Context, string, ...any) (pgx.Rows, error)
}

// Originals reads what a payload-conflict check needs of the messages at
// offsets of a partition, through q (the pool, or an ack-and-push's
// transaction, under the partition's lock). An offset whose message is
// gone (retention) is absent from the map: its conflict cannot be told.
func Originals(ctx context.Context, q Querier, partitionID int64, offsets []int64) (map[int64]model.Hash, error) {
	rows, err := q.Query(ctx, "SELECT off, data_hash, data::text FROM queen.log_originals($1, $2)", partitionID, offsets)
	if err != nil {
		return nil, fmt.Errorf("pgstore: Originals of %d: %w", partitionID, err)
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
			return nil, fmt.Errorf("pgstore: Originals of %d: %w", partitionID, err)
		}
		switch {
		case hash != nil:
			out[off] = *hash
		case data != nil:
			out[off] = model.HashData([]byte(*data))
		}
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("pgstore: Originals of %d: %w", partitionID, err)
	}
	return out, nil
}
