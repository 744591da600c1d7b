package pgstore

import (
	"bytes"
	"testing"

	"github.com/jackc/pgx/v5/pgtype"

	"github.com/queengate/queengate/model"
)

// TestAckArraysAreWhatPgxSends: the ack's arrays, built by hand, are byte
// for byte what pgx's own codecs send for the same items as pointers and
// NULLs (the way Ack passed them before).
func TestAckArraysAreWhatPgxSends(t *testing.T) {
	items := []model.AckItem{
		{Offset: 0, Completed: true},
		{Offset: -1, TxnID: "order-7", Completed: false, Error: "handler: timeout"},
		{Offset: 1 << 40, Completed: false, Error: ""},
		{Offset: -1, TxnID: "order-8", Completed: true},
	}
	offsets := make([]*int64, len(items))
	hashes := make([]*model.Hash, len(items))
	completed := make([]bool, len(items))
	errs := make([]*string, len(items))
	for i := range items {
		it := &items[i]
		if it.Offset >= 0 {
			offsets[i] = &it.Offset
		} else {
			h := model.HashTxnID(it.TxnID)
			hashes[i] = &h
		}
		completed[i] = it.Completed
		if !it.Completed {
			errs[i] = &it.Error
		}
	}
	o, h, c, e := ackArrays(items)
	m := pgtype.NewMap()
	for _, tc := range []struct {
		name string
		oid  uint32
		pgx  any
		ours encodedArray
	}{
		{"offsets", oidInt8Array, offsets, o},
		{"hashes", oidUUIDArray, hashes, h},
		{"completed", oidBoolArray, completed, c},
		{"errors", oidTextArray, errs, e},
	} {
		want, err := m.Encode(tc.oid, pgtype.BinaryFormatCode, tc.pgx, nil)
		if err != nil {
			t.Fatalf("%s: pgx: %v", tc.name, err)
		}
		if !bytes.Equal(tc.ours.b, want) {
			t.Errorf("%s: built\n%x\npgx sends\n%x", tc.name, tc.ours.b, want)
		}
	}
}
