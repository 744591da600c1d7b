package model

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"time"
)

// Partition identifies a partition and the configuration that governs it.
type Partition struct {
	ID            int64
	QueueID       int64
	WindowSeconds int          // the queue's deduplication window; 0 disables the probe
	OnConflict    ConflictMode // what a payload conflict is answered
	LastOffset    int64        // the allocator when read; -1 before the first message
}

// Frame is one partition's messages of a push, in arrival order: what a
// fusion buffer becomes when it is sent, stored as one log_segments row.
type Frame struct {
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
	// Meta[i] is message i's meta (its headers and data encoding, see
	// AppendMeta), nil for none; Meta is nil when no message has any.
	Meta [][]byte
	// DataHashes[i] is HashData(Data[i], Meta[i]), for a queue that compares
	// payloads (ConflictMode.Compares); nil otherwise. SQL stores them
	// only if the queue compares when the push commits.
	DataHashes []Hash
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

// Probe is what a push's duplicate probe did for a frame.
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

var probeNames = [...]string{ProbeOff: "off", ProbeSkipped: "skipped", ProbeNarrowed: "narrowed", ProbeFull: "full"}

func (p Probe) String() string {
	if int(p) < len(probeNames) {
		return probeNames[p]
	}
	return "unknown"
}

// ParseProbe reads a probe's name, as String writes it.
func ParseProbe(name string) (Probe, bool) {
	for p, n := range probeNames {
		if n == name {
			return Probe(p), true
		}
	}
	return 0, false
}

// Outcome is what happened to one message of a frame.
type Outcome struct {
	// Offset is where the message now is, or for a duplicate, where the
	// original (the first occurrence within the window) is.
	Offset int64
	// Duplicate is true when the message wrote nothing.
	Duplicate bool
}

// FrameResult is the result of pushing one frame.
type FrameResult struct {
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
	// OnConflict is the queue's mode as the push read it, under the
	// partition's lock: what its duplicates are answered by.
	OnConflict ConflictMode
	// Settled: the connection broke after the push was sent, and a
	// verification read found every message stored. Each outcome is then a
	// duplicate of where its message is, whether this push or an earlier
	// one stored it; BaseOffset is -1 and LastOffset the allocator then.
	Settled bool
	// CreatedAt is the time stored with the frame's messages (zero for a
	// settled push).
	CreatedAt time.Time
}

// Status is what became of one pushed message.
type Status uint8

const (
	// StatusQueued: stored now at its offset.
	StatusQueued Status = iota + 1
	// StatusDuplicate: wrote nothing; the offset is the original's.
	StatusDuplicate
	// StatusFailed: not stored by this push. Retrying is safe.
	StatusFailed
)

func (s Status) String() string {
	switch s {
	case StatusQueued:
		return "queued"
	case StatusDuplicate:
		return "duplicate"
	case StatusFailed:
		return "failed"
	}
	return fmt.Sprintf("Status(%d)", uint8(s))
}

// Probed reports whether the duplicate probe looked at stored rows.
func (r *FrameResult) Probed() bool { return r.Probe == ProbeNarrowed || r.Probe == ProbeFull }

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

// ParseMessageID is the inverse of MessageID. Either half at 2^63 or more
// is an error: no partition id or offset is negative.
func ParseMessageID(id string) (partitionID, offset int64, err error) {
	if len(id) != 36 || id[8] != '-' || id[13] != '-' || id[18] != '-' || id[23] != '-' {
		return 0, 0, errors.New("not 36 characters shaped like a UUID")
	}
	digits := id[0:8] + id[9:13] + id[14:18] + id[19:23] + id[24:36]
	p, err1 := strconv.ParseUint(digits[:16], 16, 64)
	o, err2 := strconv.ParseUint(digits[16:], 16, 64)
	switch {
	case err1 != nil || err2 != nil:
		return 0, 0, errors.New("not hexadecimal digits shaped like a UUID")
	case p > math.MaxInt64:
		return 0, 0, errors.New("its partition half (the first 16 digits) is 8000000000000000 or more, which no partition id is")
	case o > math.MaxInt64:
		return 0, 0, errors.New("its offset half (the last 16 digits) is 8000000000000000 or more, which no offset is")
	}
	return int64(p), int64(o), nil
}

// ClockSkewSlack is how much older than the window a hydration reads, and
// the least retention keeps beyond it: the gateways' clocks and
// PostgreSQL's may differ by this much without a cache missing a row.
const ClockSkewSlack = 5 * time.Second

// TxnRange is one stored frame's transactionId hashes: those of offsets
// BaseOffset..EndOffset (queen.log_hashes).
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
	// created_at >= DBNow - window - ClockSkewSlack.
	DBNow time.Time
	// Txns are in offset order.
	Txns []TxnRange
	// Epoch is the store's epoch of the connection that read it (see
	// pgstore.Store.Epoch), 0 for none: a cache takes it only under the
	// epoch it vouches under.
	Epoch uint64
}

// StoredData is message data as log_segments stores it: as sent, or
// JSON null for a message sent without any.
func StoredData(d []byte) []byte {
	if d == nil {
		return jsonNull
	}
	return d
}

// Incoming is one message of a push as the gateway takes it, decoded and
// checked.
type Incoming struct {
	// TxnID is the transactionId; the caller mints one when the producer
	// sent none.
	TxnID string
	// Data is the message's data as JSON text; nil stands for null.
	Data []byte
	// Meta is its headers and data encoding (AppendMeta), nil for
	// none.
	Meta []byte
}

// PushOutcome is one message's result in a push.
type PushOutcome struct {
	Status      Status
	PartitionID int64
	Offset      int64
	Err         error
	// Conflict: a duplicate whose data differs from its original's, in a
	// queue that compares payloads (answered duplicate with flag, failed
	// with reject).
	Conflict bool
}
