package tail

import (
	"fmt"
	"testing"
	"time"

	"github.com/queengate/queengate/model"
)

func frameOf(base int64, ids ...string) *Frame {
	data := make([][]byte, len(ids))
	for i, id := range ids {
		data[i] = []byte(fmt.Sprintf("%q", id))
	}
	return NewFrame(base, ids, data, nil, time.Unix(1, 0))
}

// TestTheTailKeepsContiguousFramesOfItsEpoch: frames join when they
// follow the partition's last; one that does not restarts it; one of
// another epoch drops it; a reset empties everything.
func TestTheTailKeepsContiguousFramesOfItsEpoch(t *testing.T) {
	tl := New(DefaultBudgetBytes)
	tl.Reset(3)
	tl.Add(3, 1, frameOf(0, "a", "b"))
	tl.Add(3, 1, frameOf(2, "c"))
	if a, b, n, ok := tl.Window(1, 1); !ok || n != 3 || a.Base != 0 || b == nil || b.Base != 2 {
		t.Fatalf("window at 1: %v %v %d %v", a, b, n, ok)
	}
	tl.Add(3, 1, frameOf(5, "f")) // 3 and 4 written by another
	if _, _, _, ok := tl.Window(1, 0); ok {
		t.Fatal("a frame that did not follow kept the old ones")
	}
	if a, _, _, ok := tl.Window(1, 5); !ok || a.TxnIDs[0] != "f" {
		t.Fatal("the frame that restarted the tail is not held")
	}
	tl.Add(2, 1, frameOf(6, "g")) // committed under an older epoch
	if _, _, _, ok := tl.Window(1, 5); ok {
		t.Fatal("a frame of another epoch left the partition's tail")
	}
	tl.Add(3, 2, frameOf(0, "x"))
	tl.Reset(4)
	if _, _, n, ok := tl.Window(2, 0); ok || n != 4 || tl.Bytes() != 0 {
		t.Fatalf("after a reset: held %v, epoch %d, %d bytes", ok, n, tl.Bytes())
	}
}

// TestTheTailEvictsTheOldestFramesOverBudget: over budget, the frames
// added longest ago go, whichever partition's, and the bytes counted
// follow.
func TestTheTailEvictsTheOldestFramesOverBudget(t *testing.T) {
	one := frameOf(0, "a").size
	tl := New(3 * one)
	tl.Reset(1)
	tl.Add(1, 1, frameOf(0, "a"))
	tl.Add(1, 2, frameOf(0, "b"))
	tl.Add(1, 1, frameOf(1, "c"))
	tl.Add(1, 2, frameOf(1, "d"))
	if _, _, _, ok := tl.Window(1, 0); ok {
		t.Fatal("the oldest frame was kept over budget")
	}
	for _, at := range [][2]int64{{2, 0}, {1, 1}, {2, 1}} {
		if _, _, _, ok := tl.Window(at[0], at[1]); !ok {
			t.Fatalf("partition %d offset %d evicted, the oldest only should be", at[0], at[1])
		}
	}
	if tl.Bytes() != 3*one {
		t.Fatalf("%d bytes counted, want %d", tl.Bytes(), 3*one)
	}
	tl.Drop(2)
	if tl.Bytes() != one {
		t.Fatalf("%d bytes counted after a drop, want %d", tl.Bytes(), one)
	}
}

// TestWholeLeaseIsConsumerAckIsWholeLeasesRule: all completed, one item
// per message, all by offset in order or all by transactionId in order
// with no hash twice; anything else is not.
func TestWholeLeaseIsConsumerAckIsWholeLeasesRule(t *testing.T) {
	l := &Lease{From: 5, To: 7, TxnIDs: []string{"a", "b", "c"}}
	byID := func(ids ...string) []model.Settlement {
		var out []model.Settlement
		for _, id := range ids {
			out = append(out, model.Settlement{Offset: -1, TxnID: id, Completed: true})
		}
		return out
	}
	byOff := func(offs ...int64) []model.Settlement {
		var out []model.Settlement
		for _, o := range offs {
			out = append(out, model.Settlement{Offset: o, Completed: true})
		}
		return out
	}
	failed := byID("a", "b", "c")
	failed[1].Completed = false
	mixed := append(byID("a", "b"), byOff(7)...)
	cases := []struct {
		name  string
		items []model.Settlement
		want  bool
	}{
		{"by transactionId", byID("a", "b", "c"), true},
		{"by offset", byOff(5, 6, 7), true},
		{"out of order", byID("a", "c", "b"), false},
		{"offsets out of order", byOff(5, 7, 6), false},
		{"short", byID("a", "b"), false},
		{"one failed", failed, false},
		{"mixed", mixed, false},
		{"another id", byID("a", "b", "z"), false},
	}
	for _, c := range cases {
		if got := WholeLease(l, c.items); got != c.want {
			t.Errorf("%s: %v, want %v", c.name, got, c.want)
		}
	}
	twice := &Lease{From: 0, To: 1, TxnIDs: []string{"a", "a"}}
	if WholeLease(twice, byID("a", "a")) {
		t.Error("a hash named twice makes a whole lease")
	}
}

// TestASliceIsMeasuredAsPgColumnSizeMeasuresIt: the bound of data "x",
// "xx", "xxx" (json strings of 3 to 5 bytes) and transactionIds "y",
// "yy", "yyy" is what PostgreSQL 15 answered for pg_column_size of such
// slices (52 and 48 bytes), six times the second, and the envelope per
// message; two frames are read, no third.
func TestASliceIsMeasuredAsPgColumnSizeMeasuresIt(t *testing.T) {
	a := NewFrame(0, []string{"y", "yy"}, [][]byte{[]byte(`"x"`), []byte(`"xx"`)}, nil, time.Unix(1, 0))
	b := NewFrame(2, []string{"yyy", "z"}, [][]byte{[]byte(`"xxx"`), []byte(`"z"`)}, nil, time.Unix(2, 0))
	want := int64(52 + 6*48 + 3*256)
	s, ok := NextSlice(a, b, false, 0, 3, want, 256)
	if !ok || s.Hi != 2 || s.bound(256) != want {
		t.Fatalf("slice %+v fits %v, bound %d; want 0..2 bounded by %d", s, ok, s.bound(256), want)
	}
	if _, ok := NextSlice(a, b, false, 0, 3, want-1, 256); ok {
		t.Fatal("a slice over its budget fits")
	}
	if _, ok := NextSlice(a, b, true, 1, 10, 1<<20, 256); ok {
		t.Fatal("a pop reaching into a third frame the tail holds is planned: consumer_cycle leaves it to the general pop")
	}
	s, ok = NextSlice(a, b, false, 1, 10, 1<<20, 256)
	if !ok || s.Hi != 3 {
		t.Fatalf("wanting more than two frames hold: %+v %v, want up to their end", s, ok)
	}
	ds := s.Deliveries(9)
	if len(ds) != 3 || ds[0].TxnID != "yy" || ds[2].TxnID != "z" || !ds[2].CreatedAt.Equal(time.Unix(2, 0)) || ds[1].Attempts != 1 {
		t.Fatalf("deliveries %+v", ds)
	}
}

// TestLeasesAreForgottenWhenSettledOrRunOutAndBounded: a lease taken is
// gone; one run out is not handed out; a full map makes room.
func TestLeasesAreForgottenWhenSettledOrRunOutAndBounded(t *testing.T) {
	now := time.Unix(100, 0)
	s := NewLeases(2)
	s.clock = func() time.Time { return now }
	s.Remember(&Lease{ID: "a"}, now.Add(time.Minute))
	s.Remember(&Lease{ID: "b"}, now.Add(-time.Second)) // run out
	if _, live := s.Take("b"); live {
		t.Fatal("a lease run out was handed out")
	}
	s.Remember(&Lease{ID: "b"}, now.Add(time.Minute))
	s.Remember(&Lease{ID: "c"}, now.Add(time.Minute))
	if n := s.Len(); n != 2 {
		t.Fatalf("%d leases remembered, the bound is 2", n)
	}
	if _, live := s.Take("c"); !live {
		t.Fatal("the lease remembered last was not kept")
	}
	if _, live := s.Take("c"); live {
		t.Fatal("a lease taken twice")
	}
	s.Forget("a")
	s.Forget("b")
	if s.Len() != 0 {
		t.Fatalf("%d leases left after forgetting", s.Len())
	}
}
