// Package tail keeps, per partition, the last messages this gateway
// committed, exactly as log_segments holds them, so that the usual
// consume cycle can be answered from memory (docs/design.md, "The
// tail"). It holds only what a commit this gateway saw confirmed wrote,
// contiguous per partition, under the store epoch of that commit.
package tail

import (
	"sync"
	"sync/atomic"
	"time"
)

// DefaultBudgetBytes is the tail's budget unless configured.
const DefaultBudgetBytes = 32 << 20

// frameOverhead is what a frame costs beside its strings (slice headers,
// the frame and its bookkeeping), counted in the budget.
const frameOverhead = 128

// Frame is one log_segments row of a partition: messages Base.. in
// order, their transactionIds and data as stored, and the frame's
// created_at. A Frame is never changed once added.
type Frame struct {
	Base   int64
	TxnIDs []string
	Data   [][]byte
	// Meta[k] is message k's meta (model.AppendMeta), nil for none; Meta
	// is nil when no message has any.
	Meta      [][]byte
	CreatedAt time.Time
	size      int64
	pid       int64
	live      bool // still held by its partition (guarded by Tail.mu)
}

// End is the frame's last offset.
func (f *Frame) End() int64 { return f.Base + int64(len(f.TxnIDs)) - 1 }

// NewFrame is a frame of messages from base; it takes the slices as
// they are (the caller does not change them after).
func NewFrame(base int64, txnIDs []string, data, meta [][]byte, createdAt time.Time) *Frame {
	f := &Frame{Base: base, TxnIDs: txnIDs, Data: data, Meta: meta, CreatedAt: createdAt, size: frameOverhead}
	for i := range txnIDs {
		f.size += int64(len(txnIDs[i]) + len(data[i]) + 40)
	}
	for _, m := range meta {
		f.size += int64(len(m))
	}
	return f
}

// meta is message k's meta.
func (f *Frame) meta(k int) []byte {
	if f.Meta == nil {
		return nil
	}
	return f.Meta[k]
}

// Tail is the frames of every partition, within a budget of bytes. Safe
// for concurrent use.
type Tail struct {
	mu     sync.Mutex
	epoch  uint64
	budget int64
	used   int64
	parts  map[int64][]*Frame // ascending, contiguous
	// order is every frame added, oldest first, for eviction: frames
	// dropped since are skipped (not live).
	order []*Frame
	head  int

	served, acked, missed, refused atomic.Int64
}

// New is an empty tail of at most budget bytes.
func New(budget int64) *Tail {
	return &Tail{budget: budget, parts: map[int64][]*Frame{}}
}

// Epoch is the store epoch the tail speaks of; 0 before any.
func (t *Tail) Epoch() uint64 {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.epoch
}

// Reset drops everything and makes n the tail's epoch: what was committed
// under another server's identity may not be what this one holds.
func (t *Tail) Reset(n uint64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, fs := range t.parts {
		for _, f := range fs {
			f.live = false
		}
	}
	t.parts, t.order, t.head, t.used, t.epoch = map[int64][]*Frame{}, nil, 0, 0, n
}

// Add appends frame f of partition pid, committed under epoch n. A frame
// that does not follow the partition's last one restarts it (another
// writer wrote between); one of another epoch is not kept, nor one larger
// than the whole budget.
func (t *Tail) Add(n uint64, pid int64, f *Frame) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if n == 0 || n != t.epoch || len(f.TxnIDs) == 0 || f.size > t.budget {
		t.dropLocked(pid)
		return
	}
	fs := t.parts[pid]
	if len(fs) > 0 && fs[len(fs)-1].End()+1 != f.Base {
		t.dropLocked(pid)
		fs = nil
	}
	f.pid, f.live = pid, true
	t.parts[pid] = append(fs, f)
	t.order = append(t.order, f)
	t.used += f.size
	t.evictLocked()
}

// Drop forgets partitions' frames: a commit whose outcome is not known
// exactly, or a deleted queue's.
func (t *Tail) Drop(pids ...int64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, pid := range pids {
		t.dropLocked(pid)
	}
}

func (t *Tail) dropLocked(pid int64) {
	for _, f := range t.parts[pid] {
		f.live = false
		t.used -= f.size
	}
	delete(t.parts, pid)
}

// evictLocked drops the oldest frames, whichever partition's, while the
// tail is over budget. The oldest frame added that is still live is its
// partition's first.
func (t *Tail) evictLocked() {
	for t.used > t.budget && t.head < len(t.order) {
		f := t.order[t.head]
		t.order[t.head] = nil
		t.head++
		if !f.live {
			continue
		}
		fs := t.parts[f.pid]
		f.live = false
		t.used -= f.size
		if len(fs) <= 1 {
			delete(t.parts, f.pid)
		} else {
			t.parts[f.pid] = fs[1:]
		}
	}
	if t.head > 1024 && t.head > len(t.order)/2 {
		t.order = append([]*Frame(nil), t.order[t.head:]...)
		t.head = 0
	}
}

// Window is what consumer_pop_slice would read for messages from lo on
// partition pid: the frame holding lo and the one after it (nil when the
// tail has none), under epoch n. ok false when the tail does not hold lo.
func (t *Tail) Window(pid, lo int64) (a, b *Frame, n uint64, ok bool) {
	a, b, _, n, ok = t.window(pid, lo)
	return a, b, n, ok
}

// window is Window, and whether the tail holds a frame after b.
func (t *Tail) window(pid, lo int64) (a, b *Frame, more bool, n uint64, ok bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	fs := t.parts[pid]
	for i, f := range fs {
		if f.Base <= lo && lo <= f.End() {
			if i+1 < len(fs) {
				b = fs[i+1]
			}
			return f, b, i+2 < len(fs), t.epoch, true
		}
	}
	return nil, nil, false, t.epoch, false
}

// Bytes is what the tail holds, as its budget counts.
func (t *Tail) Bytes() int64 {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.used
}

// Budget is the tail's budget in bytes.
func (t *Tail) Budget() int64 { return t.budget }

// Counted cycles: served from the tail, missed (the tail lacked the
// messages, or the plan did not fit), refused (the statement found the
// cursor or the partition not as remembered, and the usual path served),
// acked (the statement settled the ack alone: the pop was another
// partition's turn, served the usual way).
func (t *Tail) Served()  { t.served.Add(1) }
func (t *Tail) Missed()  { t.missed.Add(1) }
func (t *Tail) Refused() { t.refused.Add(1) }
func (t *Tail) Acked()   { t.acked.Add(1) }

// CycleCounts are the cycles a tail counted, by what became of them.
type CycleCounts struct{ Served, Acked, Missed, Refused int64 }

// Counts are the cycles counted so far.
func (t *Tail) Counts() CycleCounts {
	return CycleCounts{Served: t.served.Load(), Acked: t.acked.Load(), Missed: t.missed.Load(), Refused: t.refused.Load()}
}
