package operator

import (
	"encoding/json"
	"testing"

	"github.com/queengate/queengate/ingest"
	"github.com/queengate/queengate/model"
)

// manyOffsets is a cache that holds an id at n offsets (the same
// transactionId stored again each time the window let it go).
type manyOffsets struct {
	IngestStats
	n int
}

func (c manyOffsets) CacheLookup(int64, model.Hash) ingest.HashLookup {
	offsets := make([]int64, c.n)
	for i := range offsets {
		offsets[i] = int64(i) * 1_000_000_000_000
	}
	return ingest.HashLookup{State: "vouching", Offsets: offsets, VerifiedUpto: offsets[c.n-1]}
}

// TestExplainCacheOffsetsAreBounded: however many offsets the cache holds
// for an id, explain lists at most maxExplainOffsets of them, the first,
// with their count and offsetsTruncated; fewer are listed whole.
func TestExplainCacheOffsetsAreBounded(t *testing.T) {
	t.Parallel()
	for _, n := range []int{maxExplainOffsets, maxExplainOffsets + 1, 100_000} {
		o := &Ops{ing: manyOffsets{n: n}}
		c := o.explainCache(model.TxnLookup{WindowSeconds: 60}, model.HashTxnID("t"))
		cut := n > maxExplainOffsets
		if c.OffsetCount != n || c.OffsetsTruncated != cut || len(c.Offsets) != min(n, maxExplainOffsets) || c.Offsets[0] != 0 {
			t.Errorf("%d offsets held: count %d, truncated %v, %d listed from %d; want %d, %v, %d from 0",
				n, c.OffsetCount, c.OffsetsTruncated, len(c.Offsets), c.Offsets[0], n, cut, min(n, maxExplainOffsets))
		}
		if b, _ := json.Marshal(c); len(b) > 4<<10 {
			t.Errorf("%d offsets held: the cache's view takes %d bytes", n, len(b))
		}
	}
}
