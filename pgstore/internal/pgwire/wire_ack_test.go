package pgwire

import (
	"bytes"
	"reflect"
	"testing"

	"github.com/jackc/pgx/v5/pgtype"

	"github.com/queengate/queengate/model"
)

// TestAckArraysAreWhatPgxSends: the ack's arrays, built by hand, are byte
// for byte what pgx's own codecs send for the same items as pointers and
// NULLs (the way Ack passed them before).
func TestAckArraysAreWhatPgxSends(t *testing.T) {
	items := []model.Settlement{
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
	o, h, c, e := AckArrays(items)
	m := pgtype.NewMap()
	for _, tc := range []struct {
		name string
		oid  uint32
		pgx  any
		ours EncodedArray
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

// TestAckAnswerArraysReadAsPgxReadsThem: consumer_ack's offs and results,
// parsed by hand, are what pgx's own codecs make of them, NULLs and
// empty arrays included.
func TestAckAnswerArraysReadAsPgxReadsThem(t *testing.T) {
	m := pgtype.NewMap()
	seven, big := int64(7), int64(1)<<50
	for _, offsets := range [][]*int64{nil, {}, {&seven}, {&seven, nil, &big}, {nil}} {
		src, err := m.Encode(oidInt8Array, pgtype.BinaryFormatCode, offsets, nil)
		if err != nil {
			t.Fatal(err)
		}
		var want []*int64
		var got AckOffsets
		if err := m.Scan(oidInt8Array, pgtype.BinaryFormatCode, src, &want); err != nil {
			t.Fatal(err)
		}
		if err := (ackOffsetsScanPlan{}).Scan(src, &got); err != nil {
			t.Fatal(err)
		}
		if (want == nil) != (got == nil) || len(want) != len(got) {
			t.Fatalf("%x: read %v, pgx reads %v", src, got, want)
		}
		for i := range want {
			if (want[i] == nil) != (got[i] == nil) || want[i] != nil && *want[i] != *got[i] {
				t.Fatalf("%x: element %d read %v, pgx reads %v", src, i, got[i], want[i])
			}
		}
	}
	for _, results := range [][]string{nil, {}, {"acked"}, {"acked", "alreadyAcked", "notInLease", ""}} {
		src, err := m.Encode(oidTextArray, pgtype.BinaryFormatCode, results, nil)
		if err != nil {
			t.Fatal(err)
		}
		var want []string
		var got AckResults
		if err := m.Scan(oidTextArray, pgtype.BinaryFormatCode, src, &want); err != nil {
			t.Fatal(err)
		}
		if err := (ackResultsScanPlan{}).Scan(src, &got); err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual([]string(got), want) {
			t.Fatalf("%x: read %q, pgx reads %q", src, got, want)
		}
	}
}
