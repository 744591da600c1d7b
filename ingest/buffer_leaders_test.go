package ingest

import (
	"fmt"
	"math/rand/v2"
	"reflect"
	"testing"
	"time"

	"github.com/queengate/queengate/model"
)

// mapBuffer is the fusion buffer's leaders as it found them before a
// small buffer compared them in turn: every message looked up in a map
// of the leaders' hashes.
type mapBuffer struct {
	txnIDs   []string
	leaderOf []int32
	isLeader []bool
}

func (m *mapBuffer) add(req *Request, byHash map[model.Hash]int32) {
	for _, msg := range req.Messages {
		h := model.HashTxnID(msg.TxnID)
		if li, ok := byHash[h]; ok {
			m.leaderOf, m.isLeader = append(m.leaderOf, li), append(m.isLeader, false)
			continue
		}
		li := int32(len(m.txnIDs))
		byHash[h] = li
		m.txnIDs = append(m.txnIDs, msg.TxnID)
		m.leaderOf, m.isLeader = append(m.leaderOf, li), append(m.isLeader, true)
	}
}

// TestBufferLeadersAreTheMapsLeaders: requests of repeated and new
// transactionIds, fused into a buffer below and past mapLeaders leaders,
// find the leaders, and each message's leader, that a map of every
// leader finds.
func TestBufferLeadersAreTheMapsLeaders(t *testing.T) {
	r := rand.New(rand.NewPCG(35, 7))
	for round := range 300 {
		b := newBuffer(time.Now(), 4)
		want := &mapBuffer{}
		byHash := map[model.Hash]int32{}
		ids := 1 + r.IntN(3*mapLeaders) // how many distinct ids the round draws from
		for range 1 + r.IntN(12) {
			req := &Request{}
			for range 1 + r.IntN(10) {
				req.Messages = append(req.Messages, model.Incoming{TxnID: fmt.Sprint("id-", r.IntN(ids))})
			}
			b.add(req)
			want.add(req, byHash)
			if !reflect.DeepEqual(b.txnIDs, want.txnIDs) || !reflect.DeepEqual(b.leaderOf, want.leaderOf) ||
				!reflect.DeepEqual(b.isLeader, want.isLeader) {
				t.Fatalf("round %d: leaders %v, of %v (%v); the map's %v, of %v (%v)", round,
					b.txnIDs, b.leaderOf, b.isLeader, want.txnIDs, want.leaderOf, want.isLeader)
			}
			if len(b.txnIDs) > mapLeaders && b.byHash == nil {
				t.Fatalf("round %d: %d leaders compared in turn, past %d", round, len(b.txnIDs), mapLeaders)
			}
		}
	}
}
