package pgwire

import (
	"bytes"
	"fmt"
	"testing"

	"github.com/jackc/pgx/v5/pgtype"
)

// codecMap is a type map with the codecs every pooled connection has.
func codecMap(t testing.TB) *pgtype.Map {
	t.Helper()
	m := pgtype.NewMap()
	if err := registerArrayCodecs(m); err != nil {
		t.Fatal(err)
	}
	return m
}

func strp(s string) *string { return &s }

// textArrays are text[] values a pop's answer may hold: none, empty,
// NULL elements, empty strings, multibyte text, JSON.
var textArrays = [][]*string{nil, {}, {strp("a")}, {strp(""), nil, strp("é€"), strp(`{"a":[1,"b"]}`)}, {nil}, {nil, nil, strp("z")}}

// TestTextArraysReadAsPgxReadsThem: a text[] read through TextArray or
// BytesArray (the codecs' plans for them, as a pooled connection scans)
// has the elements pgx's own codec reads, NULLs included.
func TestTextArraysReadAsPgxReadsThem(t *testing.T) {
	m := codecMap(t)
	for _, elems := range textArrays {
		src, err := pgtype.NewMap().Encode(oidTextArray, pgtype.BinaryFormatCode, elems, nil)
		if err != nil {
			t.Fatal(err)
		}
		var want []*string
		var texts TextArray
		var bs BytesArray
		for _, target := range []any{&want, &texts, &bs} {
			if err := m.Scan(oidTextArray, pgtype.BinaryFormatCode, src, target); err != nil {
				t.Fatalf("%x into %T: %v", src, target, err)
			}
		}
		if texts.Len() != len(want) || bs.Len() != len(want) {
			t.Fatalf("%x: %d and %d elements read, pgx reads %d", src, texts.Len(), bs.Len(), len(want))
		}
		for i, w := range want {
			s, ok := texts.At(i)
			b := bs.At(i)
			if ok != (w != nil) || (b == nil) != (w == nil) || w != nil && (s != *w || string(b) != *w) {
				t.Fatalf("%x: element %d read %q (%v) and %q, pgx reads %v", src, i, s, ok, b, w)
			}
		}
	}
}

// TestAnElementAppendedToLeavesTheNextAsItWas: a message's data is one
// slice of its answer's buffer; appending to it must not write over the
// next message's.
func TestAnElementAppendedToLeavesTheNextAsItWas(t *testing.T) {
	src, err := pgtype.NewMap().Encode(oidTextArray, pgtype.BinaryFormatCode, []string{"one", "two"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	var bs BytesArray
	if err := (bytesArrayScanPlan{}).Scan(src, &bs); err != nil {
		t.Fatal(err)
	}
	_ = append(bs.At(0), "XYZ"...)
	if got := bs.At(1); string(got) != "two" {
		t.Fatalf("the second element is %q after an append to the first", got)
	}
	src[len(src)-1] = 'X' // the driver's buffer, reused for the next row
	if got := bs.At(1); string(got) != "two" {
		t.Fatalf("the second element is %q after the driver's buffer changed", got)
	}
}

// TestATextArrayIsReadInTwoAllocations: reading a pop's text[] takes one
// copy of the array and one table of where its elements lie, however
// many elements it has (pgx's codec took one per element).
func TestATextArrayIsReadInTwoAllocations(t *testing.T) {
	elems := make([]string, 100)
	for i := range elems {
		elems[i] = fmt.Sprintf(`{"orderId":%d}`, i)
	}
	src, err := pgtype.NewMap().Encode(oidTextArray, pgtype.BinaryFormatCode, elems, nil)
	if err != nil {
		t.Fatal(err)
	}
	m := codecMap(t)
	var texts TextArray
	var bs BytesArray
	for _, target := range []any{&texts, &bs} {
		allocs := testing.AllocsPerRun(20, func() {
			if err := m.Scan(oidTextArray, pgtype.BinaryFormatCode, src, target); err != nil {
				t.Fatal(err)
			}
		})
		if allocs > 2 {
			t.Errorf("reading a text[] of %d elements into %T allocates %.0f times; want at most 2", len(elems), target, allocs)
		}
	}
}

// TestMalformedTextArraysAreRefused: arrays that do not add up are
// errors, never elements read out of place.
func TestMalformedTextArraysAreRefused(t *testing.T) {
	good, err := pgtype.NewMap().Encode(oidTextArray, pgtype.BinaryFormatCode, []string{"ab", "c"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	withLength := func(n uint32) []byte {
		b := bytes.Clone(good)
		b[12], b[13], b[14], b[15] = byte(n>>24), byte(n>>16), byte(n>>8), byte(n)
		return b
	}
	withFirstSize := func(size int32) []byte {
		b := bytes.Clone(good)
		u := uint32(size)
		b[20], b[21], b[22], b[23] = byte(u>>24), byte(u>>16), byte(u>>8), byte(u)
		return b
	}
	int8s, err := pgtype.NewMap().Encode(oidInt8Array, pgtype.BinaryFormatCode, []int64{1}, nil)
	if err != nil {
		t.Fatal(err)
	}
	for name, src := range map[string][]byte{
		"short":               good[:8],
		"cut":                 good[:len(good)-1],
		"trailing bytes":      append(bytes.Clone(good), 0),
		"more elements":       withLength(3),
		"fewer elements":      withLength(1),
		"huge length":         withLength(1 << 30),
		"element past end":    withFirstSize(100),
		"negative size":       withFirstSize(-2),
		"two dimensions":      append([]byte{0, 0, 0, 2}, good[4:]...),
		"another element oid": int8s,
		"no dimensions, more": []byte("\x00\x00\x00\x00000000000"),
		"empty, more":         []byte("\x00\x00\x00\x010000\x00\x00\x00\x19\x00\x00\x00\x0000000"),
	} {
		if err := (textArrayScanPlan{}).Scan(src, &TextArray{}); err == nil {
			t.Errorf("%s: %x read as a TextArray", name, src)
		}
		if err := (bytesArrayScanPlan{}).Scan(src, &BytesArray{}); err == nil {
			t.Errorf("%s: %x read as a BytesArray", name, src)
		}
	}
}

// FuzzTextArrayReadsAsPgx: whatever bytes TextArray and BytesArray take,
// pgx's own codec reads the same elements from.
func FuzzTextArrayReadsAsPgx(f *testing.F) {
	for _, elems := range textArrays {
		src, err := pgtype.NewMap().Encode(oidTextArray, pgtype.BinaryFormatCode, elems, nil)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(src)
	}
	f.Add([]byte("\x00\x00\x00\x00000000000"))
	f.Add([]byte("\x00\x00\x00\x010000\x00\x00\x00\x19\x00\x00\x00\x0000000"))
	m := pgtype.NewMap()
	f.Fuzz(func(t *testing.T, src []byte) {
		var texts TextArray
		var bs BytesArray
		textErr := (textArrayScanPlan{}).Scan(src, &texts)
		bytesErr := (bytesArrayScanPlan{}).Scan(src, &bs)
		if (textErr == nil) != (bytesErr == nil) {
			t.Fatalf("%x: TextArray says %v, BytesArray %v", src, textErr, bytesErr)
		}
		if textErr != nil {
			return
		}
		var want []*string
		if err := m.Scan(oidTextArray, pgtype.BinaryFormatCode, src, &want); err != nil {
			t.Fatalf("%x: read, but pgx refuses it: %v", src, err)
		}
		if texts.Len() != len(want) || bs.Len() != len(want) {
			t.Fatalf("%x: %d elements read, pgx reads %d", src, texts.Len(), len(want))
		}
		for i, w := range want {
			s, ok := texts.At(i)
			if ok != (w != nil) || (bs.At(i) == nil) != (w == nil) || w != nil && (s != *w || string(bs.At(i)) != *w) {
				t.Fatalf("%x: element %d read %q, pgx reads %v", src, i, s, w)
			}
		}
	})
}
