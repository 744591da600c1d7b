package pgwire

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"slices"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/queengate/queengate/model"
)

// A push bundle's arrays are most of what the gateway allocated per
// message: built in one buffer, copied again by pgx's parameter encoding,
// a third time into the Bind message. A Bundle encodes them once, in
// PostgreSQL's binary format, into a buffer kept for the next bundle, and
// hands them to pgconn as they are; its answer is read from the protocol's
// rows without pgx's scanning.

// PushBundleSQL calls log_push_bundle with a Bundle's 15 arrays, in the
// order of the routine's parameters.
const PushBundleSQL = `SELECT frame, base_offset, last_offset, probe, unrolled, dup_idx, dup_off, on_conflict, created_at
FROM queen.log_push_bundle(p_pids => $1, p_verified => $2, p_verified_windows => $3,
    p_counts => $4, p_txn_ids => $5, p_hashes => $6, p_data => $7, p_bytes => $8,
    p_cand_counts => $9, p_cand_idx => $10, p_cand_off => $11,
    p_dh_counts => $12, p_data_hashes => $13, p_meta_counts => $14, p_meta => $15)`

const (
	// pushStatement is PushBundleSQL's name on a connection that ran it.
	pushStatement = "queengate_push_bundle"
	// pushStaleKey marks (in a connection's custom data) a pushStatement
	// that failed: it is prepared again before its next use, as pgx's
	// statement cache does (a routine replaced with another result type
	// leaves a prepared statement that can only fail).
	pushStaleKey = "queengate.push_stale"
	bundleParams = 15
	// maxPooledBundle is the largest buffer kept for the next bundle:
	// past it, one rare huge bundle would stay pinned in memory.
	maxPooledBundle = 4 << 20
)

// binaryFormat says every parameter, and every result column, is in the
// binary format. Shared: pgconn only reads it.
var binaryFormat = []int16{pgtype.BinaryFormatCode}

// Bundle is log_push_bundle's arguments for frames, encoded. Get one from
// EncodeBundle, run it with Run, and Release it.
type Bundle struct {
	frames []model.Frame
	buf    []byte
	params [bundleParams][]byte
	starts []int // where each frame's outcomes begin in the answer
}

var bundlePool = sync.Pool{New: func() any { return new(Bundle) }}

// EncodeBundle encodes frames as log_push_bundle's arguments. It refuses
// (model.ErrInvalidFrame) a frame without messages or whose slices do not
// match.
func EncodeBundle(frames []model.Frame) (*Bundle, error) {
	size, err := bundleSize(frames)
	if err != nil {
		return nil, err
	}
	b := bundlePool.Get().(*Bundle)
	b.frames = frames
	b.buf = slices.Grow(b.buf[:0], size)
	var ends [bundleParams]int
	for k, appendArray := range bundleArrays {
		b.buf = appendArray(b.buf, frames)
		ends[k] = len(b.buf)
	}
	start := 0
	for k, end := range ends { // sliced once b.buf no longer moves
		b.params[k] = b.buf[start:end:end]
		start = end
	}
	return b, nil
}

// Release gives the bundle's buffer to the next one: the bundle must not
// be used after (the results Run returned share nothing with it).
func (b *Bundle) Release() {
	b.frames, b.params = nil, [bundleParams][]byte{}
	if cap(b.buf) <= maxPooledBundle {
		bundlePool.Put(b)
	}
}

// bundleSize checks frames and says how many bytes their arrays take.
func bundleSize(frames []model.Frame) (int, error) {
	const header, perFrame = 20, 8 * 12 // 8 arrays of an element per frame, 8 bytes at most each
	size := bundleParams*header + perFrame*len(frames)
	for i := range frames {
		fr := &frames[i]
		n := len(fr.Hashes)
		if n == 0 || len(fr.TxnIDs) != n || len(fr.Data) != n || (fr.DataHashes != nil && len(fr.DataHashes) != n) ||
			(fr.Meta != nil && len(fr.Meta) != n) {
			return 0, fmt.Errorf("%w: frame %d for partition %d has %d txn ids, %d hashes, %d data, %d data hashes, %d meta",
				model.ErrInvalidFrame, i, fr.PartitionID, len(fr.TxnIDs), n, len(fr.Data), len(fr.DataHashes), len(fr.Meta))
		}
		size += n*(4+20) + len(fr.DataHashes)*20 + len(fr.Candidates)*(8+12) + len(fr.Meta)*4
		for _, m := range fr.Meta {
			size += len(m)
		}
		for k := range n {
			size += 4 + len(fr.TxnIDs[k]) + 4 + len(model.StoredData(fr.Data[k]))
		}
	}
	return size, nil
}

const oidInt4 = pgtype.Int4OID

// bundleArrays append log_push_bundle's arrays, in the order of its
// parameters (PushBundleSQL).
var bundleArrays = [bundleParams]func([]byte, []model.Frame) []byte{
	func(buf []byte, frames []model.Frame) []byte {
		return appendPerFrame(buf, frames, func(fr *model.Frame) int64 { return fr.PartitionID })
	},
	func(buf []byte, frames []model.Frame) []byte {
		return appendPerFrame(buf, frames, func(fr *model.Frame) int64 { return fr.Verified })
	},
	func(buf []byte, frames []model.Frame) []byte {
		return appendPerFrame(buf, frames, func(fr *model.Frame) int32 { return int32(min(fr.VerifiedWindow, math.MaxInt32)) })
	},
	func(buf []byte, frames []model.Frame) []byte {
		return appendPerFrame(buf, frames, func(fr *model.Frame) int32 { return int32(len(fr.Hashes)) })
	},
	appendTxnIDs,
	appendHashes,
	appendData,
	func(buf []byte, frames []model.Frame) []byte {
		return appendPerFrame(buf, frames, storedBytes) // data bytes as sent, per frame
	},
	func(buf []byte, frames []model.Frame) []byte {
		return appendPerFrame(buf, frames, func(fr *model.Frame) int32 { return int32(len(fr.Candidates)) })
	},
	appendCandidateIndexes,
	appendCandidateOffsets,
	func(buf []byte, frames []model.Frame) []byte {
		return appendPerFrame(buf, frames, func(fr *model.Frame) int32 { return int32(len(fr.DataHashes)) })
	},
	appendDataHashes,
	func(buf []byte, frames []model.Frame) []byte {
		return appendPerFrame(buf, frames, metaCount)
	},
	appendMeta,
}

// appendPerFrame appends an int4[] or int8[] of one element per frame.
func appendPerFrame[T int32 | int64](buf []byte, frames []model.Frame, element func(*model.Frame) T) []byte {
	buf = appendArrayHeader(buf, intOID[T](), len(frames))
	for i := range frames {
		buf = appendInt(buf, element(&frames[i]))
	}
	return buf
}

func intOID[T int32 | int64]() uint32 {
	var zero T
	if _, four := any(zero).(int32); four {
		return oidInt4
	}
	return OIDInt8
}

func appendInt[T int32 | int64](buf []byte, v T) []byte {
	if _, four := any(v).(int32); four {
		buf = binary.BigEndian.AppendUint32(buf, 4)
		return binary.BigEndian.AppendUint32(buf, uint32(v))
	}
	buf = binary.BigEndian.AppendUint32(buf, 8)
	return binary.BigEndian.AppendUint64(buf, uint64(v))
}

func storedBytes(fr *model.Frame) int64 {
	n := 0
	for _, d := range fr.Data {
		n += len(model.StoredData(d))
	}
	return int64(n)
}

// appendArrayHeader starts a one-dimensional binary array of n elements,
// none NULL; of no dimensions when empty, as PostgreSQL and pgx send one.
func appendArrayHeader(buf []byte, elemOID uint32, n int) []byte {
	if n == 0 {
		buf = binary.BigEndian.AppendUint32(buf, 0) // dimensions
		buf = binary.BigEndian.AppendUint32(buf, 0) // has nulls
		return binary.BigEndian.AppendUint32(buf, elemOID)
	}
	return arrayHeader(buf, elemOID, n)
}

func appendElement[T string | []byte](buf []byte, v T) []byte {
	buf = binary.BigEndian.AppendUint32(buf, uint32(len(v)))
	return append(buf, v...)
}

// total sums count over frames: an array's element count.
func total(frames []model.Frame, count func(*model.Frame) int) (n int) {
	for i := range frames {
		n += count(&frames[i])
	}
	return n
}

func messages(fr *model.Frame) int   { return len(fr.Hashes) }
func dataHashes(fr *model.Frame) int { return len(fr.DataHashes) }

// metas is how many elements of p_meta fr takes.
func metas(fr *model.Frame) int {
	if sharedMeta(fr) {
		return 1
	}
	return len(fr.Meta)
}
func candidates(fr *model.Frame) int { return len(fr.Candidates) }

func appendTxnIDs(buf []byte, frames []model.Frame) []byte {
	buf = appendArrayHeader(buf, OIDText, total(frames, messages))
	for i := range frames {
		for _, id := range frames[i].TxnIDs {
			buf = appendElement(buf, id)
		}
	}
	return buf
}

func appendHashes(buf []byte, frames []model.Frame) []byte {
	buf = appendArrayHeader(buf, OIDUUID, total(frames, messages))
	for i := range frames {
		for j := range frames[i].Hashes {
			buf = appendElement(buf, frames[i].Hashes[j][:])
		}
	}
	return buf
}

func appendData(buf []byte, frames []model.Frame) []byte {
	buf = appendArrayHeader(buf, OIDJSON, total(frames, messages))
	for i := range frames {
		for _, d := range frames[i].Data {
			buf = appendElement(buf, model.StoredData(d)) // JSON null for a message sent without data
		}
	}
	return buf
}

func appendDataHashes(buf []byte, frames []model.Frame) []byte {
	buf = appendArrayHeader(buf, OIDUUID, total(frames, dataHashes))
	for i := range frames {
		for j := range frames[i].DataHashes {
			buf = appendElement(buf, frames[i].DataHashes[j][:])
		}
	}
	return buf
}

// metaCount is a frame's p_meta_counts: its messages, -1 when they share
// one meta (sent once), 0 for none.
func metaCount(fr *model.Frame) int32 {
	if sharedMeta(fr) {
		return -1
	}
	return int32(len(fr.Meta))
}

// sharedMeta says every message of fr has the same meta, the one slice
// (wire.DecodePush shares a meta its neighbours repeat).
func sharedMeta(fr *model.Frame) bool {
	if len(fr.Meta) < 2 {
		return false
	}
	for _, m := range fr.Meta[1:] {
		if !model.SharesMeta(m, fr.Meta[0]) {
			return false
		}
	}
	return true
}

// appendMeta appends the meta of the frames that have any, a NULL element
// for a message without, once for a frame whose messages share it.
func appendMeta(buf []byte, frames []model.Frame) []byte {
	n := total(frames, metas)
	if n == 0 {
		return appendArrayHeader(buf, OIDText, 0)
	}
	buf = arrayHeader(buf, OIDText, n)
	binary.BigEndian.PutUint32(buf[len(buf)-16:], 1) // has nulls
	for i := range frames {
		if sharedMeta(&frames[i]) {
			buf = appendElement(buf, frames[i].Meta[0])
			continue
		}
		for _, m := range frames[i].Meta {
			if m == nil {
				buf = binary.BigEndian.AppendUint32(buf, math.MaxUint32) // -1: NULL
				continue
			}
			buf = appendElement(buf, m)
		}
	}
	return buf
}

func appendCandidateIndexes(buf []byte, frames []model.Frame) []byte {
	buf = appendArrayHeader(buf, oidInt4, total(frames, candidates))
	for i := range frames {
		for _, c := range frames[i].Candidates {
			buf = appendInt(buf, c.Index+1) // 1-based in SQL
		}
	}
	return buf
}

func appendCandidateOffsets(buf []byte, frames []model.Frame) []byte {
	buf = appendArrayHeader(buf, OIDInt8, total(frames, candidates))
	for i := range frames {
		for _, c := range frames[i].Candidates {
			buf = appendInt(buf, c.Offset)
		}
	}
	return buf
}

// Run pushes the bundle on conn (a pooled connection, or a
// transaction's) and reads each frame's result. Its errors are those of
// pgx's Query and Scan: a PostgreSQL error, a connection that failed
// before or after the statement was sent, or an answer that does not add
// up.
func (b *Bundle) Run(ctx context.Context, conn *pgx.Conn) ([]model.FrameResult, error) {
	sd, err := pushStatementOn(ctx, conn)
	if err != nil {
		return nil, err
	}
	makeRoom(conn.PgConn(), b.bindSize())
	rr := conn.PgConn().ExecStatement(ctx, sd, b.params[:], binaryFormat, binaryFormat)
	results, rows, readErr := b.readResults(rr)
	if _, err := rr.Close(); err != nil {
		if pgErr := (*pgconn.PgError)(nil); errors.As(err, &pgErr) {
			conn.PgConn().CustomData()[pushStaleKey] = true
		}
		return nil, err
	}
	if readErr != nil {
		return nil, readErr
	}
	if rows != len(b.frames) {
		return nil, fmt.Errorf("got %d result rows for %d frames", rows, len(b.frames))
	}
	return results, nil
}

// bindSize is about what the bundle's Bind message takes.
func (b *Bundle) bindSize() int {
	const header = 64 // type, length, names, format codes, lengths
	return header + len(pushStatement) + 4*bundleParams + len(b.buf)
}

// The Bind message is encoded into the connection's write buffer, which
// pgproto3 shrinks back to 1 KiB after each flush: a bundle's Bind grew
// it again by doubling, twice the bundle's size allocated per push.
// makeRoom gives the write buffer, before the statement, a buffer of the
// connection's own, kept for its next push, with room for the Bind. It is
// sent as a message of no bytes whose encoding returns what was already
// buffered, copied into that buffer: a message's Encode appends to dst
// and returns the new buffer, which need not be dst's. The buffer is
// only ever the write buffer of its own connection.
type writeRoom struct{ buf []byte }

const (
	writeRoomKey = "queengate.push_write_room"
	// pgproto3's own write buffer holds a Bind up to minWriteRoom bytes;
	// maxWriteRoom bounds what a connection keeps.
	minWriteRoom = 1 << 10
	maxWriteRoom = 1 << 20
)

func (*writeRoom) Frontend()           {}
func (*writeRoom) Decode([]byte) error { return errors.New("pgwire: writeRoom is only ever sent") }

func (r *writeRoom) Encode(dst []byte) ([]byte, error) {
	return append(r.buf[:0], dst...), nil
}

// makeRoom makes room for need bytes in pc's write buffer, from a buffer
// kept on the connection.
func makeRoom(pc *pgconn.PgConn, need int) {
	if need <= minWriteRoom || need > maxWriteRoom {
		return
	}
	data := pc.CustomData()
	r, _ := data[writeRoomKey].(*writeRoom)
	if r == nil {
		r = &writeRoom{}
		data[writeRoomKey] = r
	}
	if cap(r.buf) < need {
		r.buf = make([]byte, 0, min(max(need, 2*cap(r.buf)), maxWriteRoom))
	}
	pc.Frontend().Send(r)
}

// pushStatementOn prepares PushBundleSQL on conn, unless it is already.
func pushStatementOn(ctx context.Context, conn *pgx.Conn) (*pgconn.StatementDescription, error) {
	data := conn.PgConn().CustomData()
	if data[pushStaleKey] != nil {
		if err := conn.Deallocate(ctx, pushStatement); err != nil {
			return nil, err
		}
		delete(data, pushStaleKey)
	}
	return conn.Prepare(ctx, pushStatement, PushBundleSQL)
}

// resultOIDs are PushBundleSQL's columns' types.
var resultOIDs = [...]uint32{pgtype.Int4OID, pgtype.Int8OID, pgtype.Int8OID, pgtype.TextOID, pgtype.Int8OID,
	pgtype.Int4ArrayOID, pgtype.Int8ArrayOID, pgtype.TextOID, pgtype.TimestamptzOID}

// readResults reads PushBundleSQL's rows, one per frame, into each
// frame's result, and refuses rows that do not add up. The frames'
// outcomes share one slice, each frame's capped at its end. It leaves the
// rows unread from the first error on (rr.Close reads them), and says
// how many rows it read.
func (b *Bundle) readResults(rr *pgconn.ResultReader) ([]model.FrameResult, int, error) {
	fields := rr.FieldDescriptions()
	if len(fields) != len(resultOIDs) {
		return nil, 0, fmt.Errorf("push answer has %d columns, want %d", len(fields), len(resultOIDs))
	}
	for k, f := range fields {
		if f.DataTypeOID != resultOIDs[k] || f.Format != pgtype.BinaryFormatCode {
			return nil, 0, fmt.Errorf("push answer column %s is of type %d format %d, want type %d in binary", f.Name, f.DataTypeOID, f.Format, resultOIDs[k])
		}
	}
	b.starts = b.starts[:0]
	total := 0
	for i := range b.frames {
		b.starts = append(b.starts, total)
		total += len(b.frames[i].Hashes)
	}
	outcomes := make([]model.Outcome, total)
	results := make([]model.FrameResult, len(b.frames))
	rows := 0
	for rr.NextRow() {
		if err := b.readResult(rr.Values(), results, outcomes); err != nil {
			return nil, rows, err
		}
		rows++
	}
	return results, rows, nil
}

// readResult reads one row of PushBundleSQL into its frame's result.
func (b *Bundle) readResult(row [][]byte, results []model.FrameResult, outcomes []model.Outcome) error {
	frame, err := int4Value(row[0])
	if err != nil {
		return fmt.Errorf("push answer: frame: %w", err)
	}
	i := int(frame) - 1
	if i < 0 || i >= len(b.frames) || results[i].Outcomes != nil {
		return fmt.Errorf("malformed or repeated result row for frame %d", frame)
	}
	n := len(b.frames[i].Hashes)
	r := model.FrameResult{PartitionID: b.frames[i].PartitionID, BaseOffset: -1,
		Outcomes: outcomes[b.starts[i] : b.starts[i]+n : b.starts[i]+n]}
	var base *int64
	if row[1] != nil {
		v, err := int8Value(row[1])
		if err != nil {
			return fmt.Errorf("push answer: base_offset of frame %d: %w", frame, err)
		}
		base = &v
	}
	if r.LastOffset, err = int8Value(row[2]); err != nil {
		return fmt.Errorf("push answer: last_offset of frame %d: %w", frame, err)
	}
	p, ok := model.ParseProbe(string(row[3]))
	if !ok || row[3] == nil {
		return fmt.Errorf("unknown probe %q for frame %d", row[3], frame)
	}
	r.Probe = p
	if r.Unrolled, err = int8Value(row[4]); err != nil {
		return fmt.Errorf("push answer: unrolled of frame %d: %w", frame, err)
	}
	dups, err := markDuplicates(r.Outcomes, row[5], row[6])
	if err != nil {
		return fmt.Errorf("push answer: frame %d: %w", frame, err)
	}
	if row[7] == nil {
		return fmt.Errorf("push answer: no on_conflict for frame %d", frame)
	}
	r.OnConflict = conflictMode(row[7])
	if r.CreatedAt, err = timestamptzValue(row[8]); err != nil {
		return fmt.Errorf("push answer: created_at of frame %d: %w", frame, err)
	}
	if base == nil && dups != n {
		return fmt.Errorf("frame %d: nothing written but %d of %d messages are duplicates", frame, dups, n)
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
		if next-1 != r.LastOffset {
			return fmt.Errorf("frame %d: %d new messages from %d do not end at %d", frame, next-*base, *base, r.LastOffset)
		}
	}
	results[i] = r
	return nil
}

// markDuplicates marks the outcomes dup_idx (int4[], 1-based) names as
// duplicates at the offsets dup_off (int8[]) gives, and counts them. A
// NULL array is an empty one, as pgx scans it.
func markDuplicates(outcomes []model.Outcome, idxArray, offArray []byte) (int, error) {
	var idx, off []byte
	count := 0
	if idxArray != nil {
		n, body, err := arrayBody(idxArray, oidInt4)
		if err != nil {
			return 0, err
		}
		idx, count = body, n
	}
	if offArray != nil {
		n, body, err := arrayBody(offArray, OIDInt8)
		if err != nil {
			return 0, err
		}
		if n != count {
			return 0, fmt.Errorf("%d duplicate indexes and %d offsets", count, n)
		}
		off = body
	} else if count != 0 {
		return 0, fmt.Errorf("%d duplicate indexes and no offsets", count)
	}
	for range count {
		var i, o []byte
		var err error
		if i, idx, err = nextElement(idx); err != nil {
			return 0, err
		}
		if o, off, err = nextElement(off); err != nil {
			return 0, err
		}
		k, err := int4Value(i)
		if err != nil {
			return 0, err
		}
		offset, err := int8Value(o)
		if err != nil {
			return 0, err
		}
		if k < 1 || int(k) > len(outcomes) {
			return 0, fmt.Errorf("duplicate index %d out of range", k)
		}
		outcomes[k-1] = model.Outcome{Offset: offset, Duplicate: true}
	}
	if len(idx) != 0 || len(off) != 0 {
		return 0, errors.New("duplicate arrays longer than their length")
	}
	return count, nil
}

func int4Value(src []byte) (int32, error) {
	if len(src) != 4 {
		return 0, fmt.Errorf("an integer of %d bytes", len(src))
	}
	return int32(binary.BigEndian.Uint32(src)), nil
}

func int8Value(src []byte) (int64, error) {
	if len(src) != 8 {
		return 0, fmt.Errorf("a bigint of %d bytes", len(src))
	}
	return int64(binary.BigEndian.Uint64(src)), nil
}

// conflictMode is the queue's mode, its name not copied when it is one
// the product knows.
func conflictMode(b []byte) model.ConflictMode {
	for _, m := range [...]model.ConflictMode{model.ConflictIgnore, model.ConflictFlag, model.ConflictReject} {
		if string(b) == string(m) {
			return m
		}
	}
	return model.ConflictMode(b)
}

// microsecondsToY2K is 2000-01-01 UTC, PostgreSQL's epoch, in Unix
// microseconds.
const microsecondsToY2K = 946_684_800 * 1_000_000

// timestamptzValue is a binary timestamptz as pgx scans it into a
// time.Time (local time; infinities refused).
func timestamptzValue(src []byte) (time.Time, error) {
	us, err := int8Value(src)
	switch {
	case err != nil:
		return time.Time{}, err
	case us == math.MaxInt64 || us == math.MinInt64:
		return time.Time{}, errors.New("an infinite timestamp")
	}
	return time.Unix(microsecondsToY2K/1_000_000+us/1_000_000, microsecondsToY2K%1_000_000*1_000+us%1_000_000*1_000), nil
}

// PushBundle encodes frames, pushes them on conn (a pooled connection, or
// a transaction's) and reads each frame's result.
func PushBundle(ctx context.Context, conn *pgx.Conn, frames []model.Frame) ([]model.FrameResult, error) {
	b, err := EncodeBundle(frames)
	if err != nil {
		return nil, err
	}
	defer b.Release()
	return b.Run(ctx, conn)
}
