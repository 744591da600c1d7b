package tail

import (
	"github.com/queengate/queengate/model"
)

// Lease is a lease this gateway answered: partition PartitionID's
// offsets From..To, delivered with these transactionIds, of group
// GroupID, under store epoch Epoch.
type Lease struct {
	GroupID     int64
	PartitionID int64
	ID          string
	From, To    int64
	TxnIDs      []string
	Epoch       uint64
}

// WholeLease says whether items complete lease l as
// queen.consumer_ack_is_whole_lease accepts it: one item per message,
// every one completed, and either all by offset, From..To in order, or
// all by transactionId, each the hash of the next message's, no two
// hashes alike.
func WholeLease(l *Lease, items []model.Settlement) bool {
	n := l.To - l.From + 1
	if int64(len(items)) != n || int64(len(l.TxnIDs)) != n {
		return false
	}
	byOffset := true
	for i := range items {
		if !items[i].Completed {
			return false
		}
		byOffset = byOffset && items[i].Offset >= 0
	}
	if byOffset {
		for i := range items {
			if items[i].Offset != l.From+int64(i) {
				return false
			}
		}
		return true
	}
	seen := make(map[model.Hash]struct{}, len(items))
	for i := range items {
		if items[i].Offset >= 0 {
			return false // mixed
		}
		h := model.HashTxnID(items[i].TxnID)
		if h != model.HashTxnID(l.TxnIDs[i]) {
			return false
		}
		if _, dup := seen[h]; dup {
			return false
		}
		seen[h] = struct{}{}
	}
	return true
}

// Slice is messages Lo..Hi of a partition as the tail holds them: the
// end of frame a, and the start of frame b when Hi is past a.
type Slice struct {
	Lo, Hi int64
	a, b   *Frame
}

// NextSlice is what consumer_cycle's pop would deliver from lo (the
// acked lease's end + 1) when the tail's frames a (holding lo) and b
// (after a, or nil) are the partition's: up to max messages, taken from
// a and b only (consumer_pop_slice reads two frames at most), and only
// when they fit budget as consumer_pop_slice measures them. Hi is then
// the partition's last offset or lo + max - 1, which the statement checks
// against the partition (least(last_offset, lease_to + max) = Hi). more
// says the tail holds a frame after b: a pop reaching into it spans
// three frames, which consumer_cycle leaves to the general pop.
func NextSlice(a, b *Frame, more bool, lo int64, max int, budget int64, envelope int) (Slice, bool) {
	want := lo + int64(max) - 1
	s := Slice{Lo: lo, a: a, Hi: min(want, a.End())}
	if want > a.End() && b != nil {
		s.b, s.Hi = b, min(want, b.End())
	}
	if (more && want > s.Hi) || s.Hi < s.Lo || s.bound(envelope) > budget {
		return Slice{}, false
	}
	return s, true
}

// each calls f for every message of the slice, in offset order.
func (s Slice) each(f func(off int64, fr *Frame, k int)) {
	for off := s.Lo; off <= s.Hi; off++ {
		fr := s.a
		if off > s.a.End() {
			fr = s.b
		}
		f(off, fr, int(off-fr.Base))
	}
}

// arrayHeader is a one-dimensional array's header without a null bitmap
// (ARR_OVERHEAD_NONULLS(1)); each varlena element then takes its 4-byte
// header and its bytes, padded to 4 (json and text align as int).
const arrayHeader = 24

func elementSize(n int) int64 { return int64((4 + n + 3) &^ 3) }

// bound is consumer_pop_slice's measure of the slice: the sizes of its
// data and transactionId arrays (pg_column_size of the slices it builds),
// six times over for the transactionIds, and envelope per message.
func (s Slice) bound(envelope int) int64 {
	data, txns, meta := int64(arrayHeader), int64(arrayHeader), int64(0)
	s.each(func(_ int64, fr *Frame, k int) {
		data += elementSize(len(fr.Data[k]))
		txns += elementSize(len(fr.TxnIDs[k]))
		if m := fr.meta(k); m != nil {
			meta += elementSize(len(m))
		}
	})
	if s.a.Meta != nil || s.b != nil && s.b.Meta != nil {
		// The meta slice has a null bitmap: its header and the bitmap,
		// aligned, at most (more than SQL's measure is safe: the tail
		// then leaves the pop to SQL).
		meta += arrayHeader + 8 + (s.Hi-s.Lo+1)/8 + 8
	}
	return data + meta + 6*txns + (s.Hi-s.Lo+1)*int64(envelope)
}

// Deliveries are the slice's messages of partition pid, each at its
// first attempt, as consumer_cycle answers them.
func (s Slice) Deliveries(pid int64) []model.LeasedMessage {
	out := make([]model.LeasedMessage, 0, s.Hi-s.Lo+1)
	s.each(func(off int64, fr *Frame, k int) {
		out = append(out, model.LeasedMessage{LogMessage: model.LogMessage{PartitionID: pid, Offset: off,
			TxnID: fr.TxnIDs[k], Data: fr.Data[k], Meta: fr.meta(k), CreatedAt: fr.CreatedAt}, Attempts: 1})
	})
	return out
}

// TxnIDs are the slice's transactionIds in offset order.
func (s Slice) TxnIDs() []string {
	out := make([]string, 0, s.Hi-s.Lo+1)
	s.each(func(_ int64, fr *Frame, k int) { out = append(out, fr.TxnIDs[k]) })
	return out
}
