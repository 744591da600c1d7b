package ingest

import (
	"bytes"
	"strings"

	"github.com/queengate/queengate/model"
	"github.com/queengate/queengate/tail"
)

// Tail is the ingester's memory of what it committed, per partition
// (package tail); nil with Config.NoTail. Consumers of the same store
// serve the usual cycle from it.
func (in *Ingester) Tail() *tail.Tail { return in.tail }

// feedTail hands the tail what a committed frame wrote, on a connection
// of epoch n: its new messages at BaseOffset..LastOffset, copied (the
// requests' buffers are not the tail's) as stored (model.StoredData),
// and the created_at stored with them. A settled push (n 0) says what is stored but not that nothing
// else was written between: the partition's tail is dropped.
func (in *Ingester) feedTail(n uint64, fr *model.Frame, res *model.FrameResult) {
	if in.tail == nil || res.BaseOffset < 0 {
		if in.tail != nil && res.Settled {
			in.tail.Drop(fr.PartitionID)
		}
		return
	}
	if n == 0 || res.Settled {
		in.tail.Drop(fr.PartitionID)
		return
	}
	var size, idSize int
	for k, o := range res.Outcomes {
		if !o.Duplicate {
			size += len(model.StoredData(fr.Data[k]))
			idSize += len(fr.TxnIDs[k])
		}
	}
	buf := make([]byte, 0, size)
	var ids strings.Builder
	ids.Grow(idSize)
	count := int(res.LastOffset - res.BaseOffset + 1)
	data, bounds := make([][]byte, 0, count), make([]int, 0, count+1)
	bounds = append(bounds, 0)
	for k, o := range res.Outcomes {
		if o.Duplicate {
			continue
		}
		start := len(buf)
		buf = append(buf, model.StoredData(fr.Data[k])...)
		data = append(data, buf[start:len(buf):len(buf)])
		ids.WriteString(fr.TxnIDs[k])
		bounds = append(bounds, ids.Len())
	}
	all := ids.String()
	txnIDs := make([]string, len(data))
	for i := range txnIDs {
		txnIDs[i] = all[bounds[i]:bounds[i+1]]
	}
	if len(txnIDs) != count {
		in.tail.Drop(fr.PartitionID) // cannot happen: the store checks the count
		return
	}
	in.tail.Add(n, fr.PartitionID, tail.NewFrame(res.BaseOffset, txnIDs, data, tailMeta(fr, res), res.CreatedAt))
}

// tailMeta copies the meta of a committed frame's new messages, as
// stored (nil for a message without, none for a frame without any): a
// meta shared by neighbours (wire.DecodePush) is copied once.
func tailMeta(fr *model.Frame, res *model.FrameResult) [][]byte {
	if fr.Meta == nil {
		return nil
	}
	meta := make([][]byte, 0, len(res.Outcomes))
	var src, copied []byte
	for k, o := range res.Outcomes {
		switch m := fr.Meta[k]; {
		case o.Duplicate:
			continue
		case m == nil:
			meta = append(meta, nil)
		case model.SharesMeta(m, src):
			meta = append(meta, copied)
		default:
			src, copied = m, bytes.Clone(m)
			meta = append(meta, copied)
		}
	}
	return meta
}

// dropTails forgets the tails of partitions whose push's outcome is not
// known.
func (in *Ingester) dropTails(frames []model.Frame) {
	if in.tail == nil {
		return
	}
	for i := range frames {
		in.tail.Drop(frames[i].PartitionID)
	}
}
