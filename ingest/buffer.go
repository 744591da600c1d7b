package ingest

import (
	"time"

	"github.com/queengate/queengate/model"
)

// buffer is one partition's fusion buffer: the requests it holds and, for
// every message, which leader it follows.
type buffer struct {
	firstAt time.Time
	size    int   // messages
	bytes   int64 // their ids and data, as Submit counted them
	reqs    []*Request

	// Leaders in arrival order; what SQL receives when the window is on.
	txnIDs []string
	hashes []model.Hash
	data   [][]byte
	// meta[i] is leader i's meta; nil while no leader has any.
	meta [][]byte
	// leaderOf[i] is the leader index of the i-th message of the buffer
	// (requests concatenated); leaderOf[i] == its own leader index for a
	// leader. isLeader marks them.
	leaderOf []int32
	isLeader []bool

	// Layers 1 and 2 in one map. Layer 1 compares
	// queue\x1fpartition\x1ftransactionId and layer 2 the xxh3_128 hash,
	// the identity SQL compares (so a collision here behaves like one
	// there). Every message of a buffer has the same queue and partition,
	// and equal transactionIds have equal hashes: one lookup by the hash
	// answers both. A buffer of few leaders has no map: they are
	// compared in turn (byHash nil), as cheap and allocation free.
	byHash map[model.Hash]int32
}

// mapLeaders is how many leaders a buffer holds before it looks them up
// in a map rather than comparing them in turn.
const mapLeaders = 32

// newBuffer starts a buffer sized for about hint messages.
func newBuffer(now time.Time, hint int) *buffer {
	return &buffer{firstAt: now,
		txnIDs: make([]string, 0, hint), hashes: make([]model.Hash, 0, hint), data: make([][]byte, 0, hint),
		leaderOf: make([]int32, 0, hint), isLeader: make([]bool, 0, hint)}
}

func (b *buffer) add(req *Request) {
	b.reqs = append(b.reqs, req)
	b.size += len(req.Messages)
	b.bytes += req.bytes()
	for _, m := range req.Messages {
		h := model.HashTxnID(m.TxnID)
		if li, ok := b.leader(h); ok {
			b.leaderOf = append(b.leaderOf, li)
			b.isLeader = append(b.isLeader, false)
			continue
		}
		li := int32(len(b.txnIDs))
		if b.byHash != nil {
			b.byHash[h] = li
		}
		b.txnIDs = append(b.txnIDs, m.TxnID)
		b.hashes = append(b.hashes, h)
		b.meta = model.WithMeta(b.meta, len(b.data), m.Meta)
		b.data = append(b.data, m.Data)
		b.leaderOf = append(b.leaderOf, li)
		b.isLeader = append(b.isLeader, true)
	}
}

// leaderData is leader i's data and meta.
func (b *buffer) leaderData(i int32) model.Incoming {
	m := model.Incoming{Data: b.data[i]}
	if b.meta != nil {
		m.Meta = b.meta[i]
	}
	return m
}

// leader is the index of the leader whose hash is h, if there is one.
// Past mapLeaders leaders it builds the map and looks there.
func (b *buffer) leader(h model.Hash) (int32, bool) {
	if b.byHash == nil && len(b.hashes) < mapLeaders {
		for i := range b.hashes {
			if b.hashes[i] == h {
				return int32(i), true
			}
		}
		return 0, false
	}
	if b.byHash == nil {
		b.byHash = make(map[model.Hash]int32, 2*len(b.hashes))
		for i, lh := range b.hashes {
			b.byHash[lh] = int32(i)
		}
	}
	li, ok := b.byHash[h]
	return li, ok
}

// frame is what SQL receives. With the window on, only leaders are sent:
// followers inherit. With the window off (0), deduplication is off, so
// every message is stored, repeats included.
func (b *buffer) frame(meta model.Partition) model.Frame {
	fr := model.Frame{PartitionID: meta.ID, Verified: -1}
	if meta.WindowSeconds > 0 {
		fr.TxnIDs, fr.Hashes, fr.Data, fr.Meta = b.txnIDs, b.hashes, b.data, b.meta
		return fr
	}
	fr.TxnIDs = make([]string, 0, b.size)
	fr.Hashes = make([]model.Hash, 0, b.size)
	fr.Data = make([][]byte, 0, b.size)
	for _, req := range b.reqs {
		for _, m := range req.Messages {
			fr.TxnIDs = append(fr.TxnIDs, m.TxnID)
			fr.Hashes = append(fr.Hashes, b.hashes[b.leaderOf[len(fr.TxnIDs)-1]])
			fr.Meta = model.WithMeta(fr.Meta, len(fr.Data), m.Meta)
			fr.Data = append(fr.Data, m.Data)
		}
	}
	return fr
}

// resolve maps the frame's outcomes back to every message and calls each
// request's Done, after the counters include them (a producer that reads
// the figures after its answer finds its messages counted). A follower inherits its leader's final result: a queued
// leader makes it a duplicate of the leader's offset, a duplicate leader
// passes on the stored original, a failed leader fails it too. With
// clash, a duplicate whose data differs from its original's is a payload
// conflict.
func (b *buffer) resolve(meta model.Partition, res *model.FrameResult, failure error, clash *conflicts, m *metrics, t counted) {
	byLeader := meta.WindowSeconds > 0
	var counts [model.StatusFailed + 1]int64
	conflicted := 0
	i := 0
	answers := make([][]model.PushOutcome, len(b.reqs))
	for q, req := range b.reqs {
		results := make([]model.PushOutcome, len(req.Messages))
		answers[q] = results
		for k := range req.Messages {
			r := &results[k]
			r.PartitionID = meta.ID
			switch {
			case failure != nil:
				r.Status, r.Err = model.StatusFailed, failure
			case byLeader:
				o := res.Outcomes[b.leaderOf[i]]
				r.Offset = o.Offset
				r.Status = model.StatusQueued
				if o.Duplicate || !b.isLeader[i] {
					r.Status = model.StatusDuplicate
					if clash != nil {
						clash.judge(r, req.Messages[k], o, b.leaderData(b.leaderOf[i]))
						if r.Conflict {
							conflicted++
						}
					}
				}
			default:
				o := res.Outcomes[i]
				r.Offset, r.Status = o.Offset, model.StatusQueued
				if o.Duplicate {
					r.Status = model.StatusDuplicate
				}
			}
			counts[r.Status]++
			i++
		}
	}
	if conflicted > 0 {
		m.conflicts[clash.mode].Add(float64(conflicted))
	}
	for st := model.StatusQueued; st <= model.StatusFailed; st++ {
		if counts[st] > 0 {
			m.messages[st].Add(float64(counts[st]))
			t.addN(st, counts[st])
		}
	}
	for q, req := range b.reqs {
		req.Done(answers[q])
	}
}
