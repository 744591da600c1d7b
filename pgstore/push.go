package pgstore

import (
	"context"
	"fmt"
	"math"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"
)

// Segment is one frame of messages for one partition, in arrival order.
type Segment struct {
	PartitionID int64
	// Verified is the caller's vouched watermark: it guarantees that none of
	// Hashes occurs at or below this offset, so the probe only has to cover
	// (Verified, last_offset]. -1 means "cannot vouch": probe the whole
	// window. Any value is safe for exactness only if the guarantee holds.
	Verified int64
	// VerifiedWindow is the window, in seconds, Verified was vouched under.
	// SQL honours Verified only while the queue's window is no larger
	// (a grown window has a part the vouch never covered); 0 with a window
	// on means a full probe.
	VerifiedWindow int
	TxnIDs         []string
	// Hashes[i] must be HashTxnID(TxnIDs[i]); it is what SQL compares.
	Hashes []Hash
	// Data[i] is message i's data as JSON text; nil stands for null.
	Data [][]byte
	// Candidates, with a vouched Verified, are the only places at or below
	// it where one of Hashes may be stored in the window: SQL checks those
	// slots and everything above Verified, instead of the whole window.
	// Each names a message (its index in Hashes) and an offset.
	Candidates []Candidate
}

// Candidate is a stored occurrence a caller's cache holds of message
// Index's hash, at Offset.
type Candidate struct {
	Index  int32
	Offset int64
}

// Probe is what a push's duplicate probe did for a segment.
type Probe uint8

const (
	// ProbeOff: the window is 0, deduplication is off.
	ProbeOff Probe = iota
	// ProbeSkipped: nothing was stored above what the caller vouched for.
	ProbeSkipped
	// ProbeNarrowed: the caller's candidates and the rows above its
	// watermark were checked.
	ProbeNarrowed
	// ProbeFull: the whole window was unrolled.
	ProbeFull
)

var probeNames = map[string]Probe{"off": ProbeOff, "skipped": ProbeSkipped, "narrowed": ProbeNarrowed, "full": ProbeFull}

func (p Probe) String() string {
	for name, v := range probeNames {
		if v == p {
			return name
		}
	}
	return "unknown"
}

// Outcome is what happened to one message of a segment.
type Outcome struct {
	// Offset is where the message now is, or for a duplicate, where the
	// original (the first occurrence within the window) is.
	Offset int64
	// Duplicate is true when the message wrote nothing.
	Duplicate bool
}

// SegmentResult is the result of pushing one segment.
type SegmentResult struct {
	PartitionID int64
	// BaseOffset is the first offset written, -1 when every message was a
	// duplicate and nothing was written.
	BaseOffset int64
	// LastOffset is the partition's allocator after the push.
	LastOffset int64
	// Probe is what the duplicate probe did, and Unrolled how many stored
	// hashes it compared.
	Probe    Probe
	Unrolled int64
	// Outcomes has one entry per input message, in input order.
	Outcomes []Outcome
}

const pushBundleSQL = `SELECT seg, base_offset, last_offset, probe, unrolled, dup_idx, dup_off
FROM queen.log_push_bundle($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11)`

// Push writes segments in one transaction and one round trip. Partition row
// locks are taken in ascending id order before anything is written. A
// duplicate writes nothing for its message and leaves the rest untouched;
// an error means nothing of the bundle was committed (unless the error
// arrived after COMMIT was sent, which a failed network can always cause:
// the retry of the same transactionIds then answers duplicate).
func (s *Store) Push(ctx context.Context, segs []Segment) ([]SegmentResult, error) {
	if len(segs) == 0 {
		return nil, nil
	}
	args, err := bundleArgs(segs)
	if err != nil {
		return nil, err
	}
	rows, err := s.pool.Query(ctx, pushBundleSQL, args...)
	if err != nil {
		return nil, fmt.Errorf("pgstore: push: %w", classify(err))
	}
	results, err := collectResults(rows, segs)
	if err != nil {
		return nil, fmt.Errorf("pgstore: push: %w", classify(err))
	}
	return results, nil
}

func bundleArgs(segs []Segment) ([]any, error) {
	total := 0
	for i := range segs {
		seg := &segs[i]
		n := len(seg.Hashes)
		if n == 0 || len(seg.TxnIDs) != n || len(seg.Data) != n {
			return nil, fmt.Errorf("%w: segment %d for partition %d has %d txn ids, %d hashes, %d data",
				ErrInvalidSegment, i, seg.PartitionID, len(seg.TxnIDs), n, len(seg.Data))
		}
		total += n
	}
	pids := make([]int64, len(segs))
	verified := make([]int64, len(segs))
	windows := make([]int32, len(segs))
	counts := make([]int32, len(segs))
	sizes := make([]int64, len(segs)) // data bytes as sent, per frame
	candCounts := make([]int32, len(segs))
	var candIdx []int32
	var candOff []int64
	txnIDs := newArrayBuilder(oidText, total, 32*total)
	hashes := newArrayBuilder(oidUUID, total, 16*total)
	data := newArrayBuilder(oidJSON, total, 128*total)
	for i := range segs {
		seg := &segs[i]
		pids[i], verified[i], counts[i] = seg.PartitionID, seg.Verified, int32(len(seg.Hashes))
		windows[i] = int32(min(seg.VerifiedWindow, math.MaxInt32))
		for _, id := range seg.TxnIDs {
			txnIDs.appendString(id)
		}
		for j := range seg.Hashes {
			hashes.appendBytes(seg.Hashes[j][:])
		}
		for _, d := range seg.Data {
			if d == nil {
				d = jsonNull
			}
			data.appendBytes(d)
			sizes[i] += int64(len(d))
		}
		candCounts[i] = int32(len(seg.Candidates))
		for _, c := range seg.Candidates {
			candIdx = append(candIdx, c.Index+1) // 1-based in SQL
			candOff = append(candOff, c.Offset)
		}
	}
	if candIdx == nil {
		candIdx, candOff = []int32{}, []int64{}
	}
	return []any{pids, verified, windows, counts, txnIDs.encoded(), hashes.encoded(), data.encoded(), sizes,
		candCounts, candIdx, candOff}, nil
}

var jsonNull = []byte("null")

func collectResults(rows pgx.Rows, segs []Segment) ([]SegmentResult, error) {
	defer rows.Close()
	results := make([]SegmentResult, len(segs))
	seen := 0
	for rows.Next() {
		var (
			seg      int32
			base     *int64
			last     int64
			probe    string
			unrolled int64
			dupIdx   []int32
			dupOff   []int64
		)
		if err := rows.Scan(&seg, &base, &last, &probe, &unrolled, &dupIdx, &dupOff); err != nil {
			return nil, err
		}
		i := int(seg) - 1
		if i < 0 || i >= len(segs) || len(dupIdx) != len(dupOff) || results[i].Outcomes != nil {
			return nil, fmt.Errorf("malformed or repeated result row for segment %d", seg)
		}
		n := len(segs[i].Hashes)
		r := SegmentResult{PartitionID: segs[i].PartitionID, BaseOffset: -1, LastOffset: last,
			Probe: probeNames[probe], Unrolled: unrolled, Outcomes: make([]Outcome, n)}
		for k, idx := range dupIdx {
			if idx < 1 || int(idx) > n {
				return nil, fmt.Errorf("duplicate index %d out of range for segment %d", idx, seg)
			}
			r.Outcomes[idx-1] = Outcome{Offset: dupOff[k], Duplicate: true}
		}
		if base == nil && len(dupIdx) != n {
			return nil, fmt.Errorf("segment %d: nothing written but %d of %d messages are duplicates", seg, len(dupIdx), n)
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
				return nil, fmt.Errorf("segment %d: %d new messages from %d do not end at %d", seg, next-*base, *base, last)
			}
		}
		results[i] = r
		seen++
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	if seen != len(segs) {
		return nil, fmt.Errorf("got %d result rows for %d segments", seen, len(segs))
	}
	return results, nil
}

// Probed reports whether the duplicate probe looked at stored rows.
func (r *SegmentResult) Probed() bool { return r.Probe == ProbeNarrowed || r.Probe == ProbeFull }

// MessageID is the stable id of the message at (partition, offset): the
// same message always has the same id, and distinct messages distinct ids.
// It is formatted like a UUID: the partition id in the first 8 bytes, the
// offset in the last 8.
func MessageID(partitionID, offset int64) string {
	return string(AppendMessageID(make([]byte, 0, 36), partitionID, offset))
}

// AppendMessageID appends MessageID(partitionID, offset) to b.
func AppendMessageID(b []byte, partitionID, offset int64) []byte {
	const digits = "0123456789abcdef"
	hex := func(b []byte, v uint64, n int) []byte {
		for i := n - 1; i >= 0; i-- {
			b = append(b, digits[(v>>(4*uint(i)))&0xf])
		}
		return b
	}
	p, o := uint64(partitionID), uint64(offset)
	b = hex(b, p>>32, 8)
	b = append(b, '-')
	b = hex(b, p>>16, 4)
	b = append(b, '-')
	b = hex(b, p, 4)
	b = append(b, '-')
	b = hex(b, o>>48, 4)
	b = append(b, '-')
	return hex(b, o, 12)
}

// ParseMessageID is the inverse of MessageID.
func ParseMessageID(id string) (partitionID, offset int64, err error) {
	if len(id) != 36 || id[8] != '-' || id[13] != '-' || id[18] != '-' || id[23] != '-' {
		return 0, 0, fmt.Errorf("pgstore: malformed message id %q", id)
	}
	digits := id[0:8] + id[9:13] + id[14:18] + id[19:23] + id[24:36]
	p, err1 := strconv.ParseUint(digits[:16], 16, 64)
	o, err2 := strconv.ParseUint(digits[16:], 16, 64)
	if err1 != nil || err2 != nil {
		return 0, 0, fmt.Errorf("pgstore: malformed message id %q", id)
	}
	return int64(p), int64(o), nil
}

// TxnRange is one log_txns row: the hashes of offsets BaseOffset..EndOffset.
type TxnRange struct {
	BaseOffset int64
	EndOffset  int64
	CreatedAt  time.Time
	Hashes     []Hash
}

// Hydration is everything the broker cache needs to build a partition's
// entry, read from one snapshot.
type Hydration struct {
	PartitionID   int64
	LastOffset    int64
	TxnsStart     int64
	WindowSeconds int
	// DBNow is the database clock at the snapshot; rows were selected with
	// created_at >= DBNow - window - 5 s.
	DBNow time.Time
	// Txns are in offset order.
	Txns []TxnRange
}

// Hydrate reads a partition's in-window hashes (plus 5 s of clock-skew
// slack) together with its allocator, in one snapshot.
func (s *Store) Hydrate(ctx context.Context, partitionID int64) (Hydration, error) {
	return s.hydrate(ctx, partitionID, nil)
}

// HydrateAbove reads the hashes of every row stored above offset above,
// whatever their age, together with the allocator, in one snapshot: what
// a cache entry missed since it last knew everything (a fill).
func (s *Store) HydrateAbove(ctx context.Context, partitionID, above int64) (Hydration, error) {
	return s.hydrate(ctx, partitionID, &above)
}

func (s *Store) hydrate(ctx context.Context, partitionID int64, above *int64) (Hydration, error) {
	rows, err := s.pool.Query(ctx,
		`SELECT last_offset, txns_start, dedup_window_seconds, db_now, base_offset, end_offset, created_at, hashes
		   FROM queen.log_hydrate($1, $2)`, partitionID, above)
	if err != nil {
		return Hydration{}, fmt.Errorf("pgstore: hydrate %d: %w", partitionID, err)
	}
	defer rows.Close()
	h := Hydration{PartitionID: partitionID}
	found := false
	for rows.Next() {
		var (
			base, end *int64
			created   *time.Time
			hashes    []Hash
		)
		if err := rows.Scan(&h.LastOffset, &h.TxnsStart, &h.WindowSeconds, &h.DBNow,
			&base, &end, &created, &hashes); err != nil {
			return Hydration{}, fmt.Errorf("pgstore: hydrate %d: %w", partitionID, err)
		}
		found = true
		if base == nil {
			continue // the partition has no row in the window
		}
		h.Txns = append(h.Txns, TxnRange{BaseOffset: *base, EndOffset: *end, CreatedAt: *created, Hashes: hashes})
	}
	if err := rows.Err(); err != nil {
		return Hydration{}, fmt.Errorf("pgstore: hydrate %d: %w", partitionID, err)
	}
	if !found {
		return Hydration{}, fmt.Errorf("%w: %d", ErrPartitionNotFound, partitionID)
	}
	return h, nil
}
