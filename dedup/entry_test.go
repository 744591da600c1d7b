package dedup

import (
	"bytes"
	"encoding/binary"
	"math/rand/v2"
	"slices"
	"testing"
)

// h makes a distinct, well-mixed hash from n (the bloom front relies on
// uniform hashes, as xxh3's are).
func h(n uint64) Hash {
	var out Hash
	x := n*0x9e3779b97f4a7c15 + 0x632be59bd9b4e019
	y := (n ^ 0xdeadbeefcafef00d) * 0xbf58476d1ce4e5b9
	x ^= x >> 31
	y ^= y >> 29
	binary.BigEndian.PutUint64(out[:8], x)
	binary.BigEndian.PutUint64(out[8:], y)
	return out
}

func hashes(from, n uint64) []Hash {
	out := make([]Hash, n)
	for i := range out {
		out[i] = h(from + uint64(i))
	}
	return out
}

const (
	minute = int64(60_000)
	t0     = int64(1_000_000_000_000)
)

// contains reports whether h is resident (bloom front, then exact).
func (e *Entry) contains(h *Hash) bool {
	offs, ok := e.occurrences(h)
	return len(offs) > 0 || !ok
}

func TestNewEntryKnowsTheHydratedWindow(t *testing.T) {
	t.Parallel()
	e := NewEntry(Hydration{LastOffset: 9, WindowMs: 10 * minute, Ranges: []Range{
		{Base: 5, CreatedMs: t0, Hashes: hashes(5, 3)},
		{Base: 8, CreatedMs: t0 + 1, Hashes: hashes(8, 2)},
	}})
	from, upto := e.Watermarks()
	if from != 4 || upto != 9 || e.Len() != 5 {
		t.Fatalf("watermarks (%d, %d], %d resident; want (4, 9], 5", from, upto, e.Len())
	}
	if v, cands, hit := e.Verified(hashes(100, 10), t0+2); v != 9 || hit || cands != nil {
		t.Errorf("absent hashes: verified %d hit %v candidates %v, want 9 and no hit", v, hit, cands)
	}
	v, cands, hit := e.Verified([]Hash{h(100), h(6)}, t0+2)
	if v != 9 || !hit || len(cands) != 1 || cands[0] != (Candidate{Index: 1, Offset: 6}) {
		t.Errorf("a resident hash: verified %d hit %v candidates %v, want 9, a hit, and message 1 at offset 6", v, hit, cands)
	}
	empty := NewEntry(Hydration{LastOffset: 41, WindowMs: minute})
	if v, _, _ := empty.Verified(hashes(1, 3), t0); v != 41 {
		t.Errorf("an empty window vouches for the allocator: %d", v)
	}
}

func TestLearnAppendsGapsAndOverlaps(t *testing.T) {
	t.Parallel()
	e := NewEntry(Hydration{LastOffset: -1, WindowMs: minute})
	e.Learn(0, 2, hashes(0, 3), t0)
	if v, _, _ := e.Verified(hashes(10, 1), t0); v != 2 {
		t.Fatalf("after a contiguous push: %d, want 2", v)
	}
	// All duplicates, nothing written, allocator unchanged: still vouching.
	e.Learn(-1, 2, nil, t0)
	if v, _, _ := e.Verified(hashes(10, 1), t0); v != 2 {
		t.Fatalf("after a push that wrote nothing: %d, want 2", v)
	}
	// Another broker wrote 3..4; our push landed at 5.
	e.Learn(5, 6, hashes(5, 2), t0)
	if v, _, _ := e.Verified(hashes(10, 1), t0); v != -1 || !e.Gap() || e.Vouching() {
		t.Fatalf("after an interleave: verified %d gap %v, want -1 and a gap", v, e.Gap())
	}

	o := NewEntry(Hydration{LastOffset: 9, WindowMs: minute})
	o.Learn(5, 9, hashes(5, 5), t0)
	if !o.NeedsRebuild() {
		t.Error("an overlap must mark the entry for a rebuild")
	}
	if v, _, _ := o.Verified(nil, t0); v != -1 {
		t.Errorf("an entry to rebuild vouched %d", v)
	}

	w := NewEntry(Hydration{LastOffset: 3, WindowMs: minute})
	w.Learn(-1, 7, nil, t0)
	if !w.Gap() {
		t.Error("a push that wrote nothing while the allocator moved must record a gap")
	}
	c := NewEntry(Hydration{LastOffset: 3, WindowMs: minute})
	c.WindowChanged()
	if v, _, _ := c.Verified(nil, t0); v != -1 || !c.NeedsRebuild() {
		t.Error("a window change must stop vouching until rebuilt")
	}
}

func TestFillHealsAGapWithExactlyTheMissedRows(t *testing.T) {
	t.Parallel()
	gapped := func() *Entry {
		e := NewEntry(Hydration{LastOffset: 2, WindowMs: minute, Ranges: []Range{{Base: 0, CreatedMs: t0, Hashes: hashes(0, 3)}}})
		e.Learn(5, 6, hashes(5, 2), t0) // another writer stored 3..4
		e.Learn(7, 7, hashes(7, 1), t0) // learned while gapped: ignored, the fill reads it
		return e
	}
	e := gapped()
	if _, upto := e.Watermarks(); upto != 2 {
		t.Fatalf("a gapped entry moved its watermark to %d; it knows everything only up to 2", upto)
	}
	missed := []Range{{Base: 3, CreatedMs: t0, Hashes: hashes(3, 2)}, {Base: 5, CreatedMs: t0, Hashes: hashes(5, 3)}}
	if !e.Fill(missed, 7) || e.Gap() {
		t.Fatal("a contiguous fill up to the allocator must heal the gap")
	}
	v, cands, hit := e.Verified([]Hash{h(4), h(7), h(99)}, t0)
	if v != 7 || !hit || len(cands) != 2 || cands[0].Offset != 4 || cands[1].Offset != 7 {
		t.Fatalf("after the fill: verified %d, candidates %+v, hit %v; want 7 with the other writer's 4 and our 7", v, cands, hit)
	}

	for name, c := range map[string]struct {
		ranges []Range
		last   int64
	}{
		"a hole (purged rows)":        {[]Range{{Base: 3, CreatedMs: t0, Hashes: hashes(3, 2)}, {Base: 6, CreatedMs: t0, Hashes: hashes(6, 2)}}, 7},
		"rows short of the allocator": {missed[:1], 7},
		"nothing read":                {nil, 7},
		"not from the watermark":      {[]Range{{Base: 4, CreatedMs: t0, Hashes: hashes(4, 4)}}, 7},
	} {
		e := gapped()
		if e.Fill(c.ranges, c.last) {
			t.Errorf("%s: the fill vouched", name)
		}
		if v, _, _ := e.Verified(nil, t0); v != -1 || !e.Gap() {
			t.Errorf("%s: after a refused fill the entry vouches %d; it must wait for a hydration", name, v)
		}
	}

	r := NewEntry(Hydration{LastOffset: 2, WindowMs: minute})
	r.WindowChanged()
	if r.Fill(nil, 2) {
		t.Error("an entry to rebuild must not be healed by a fill")
	}
}

func TestHotBufferGrowsByChunksAndSealsAtBlockCapacity(t *testing.T) {
	t.Parallel()
	e := NewEntry(Hydration{LastOffset: -1, WindowMs: minute})
	e.Learn(0, BlockCapacity-2, hashes(0, BlockCapacity-1), t0)
	if e.hotLen() != BlockCapacity-1 || len(e.sealedBlocks()) != 0 || cap(e.hot.open)-len(e.hot.open) >= hotStep {
		t.Fatalf("hot buffer holds %d in %d chunks with %d sealed: want %d, headroom under one chunk, none sealed",
			e.hotLen(), len(e.ring.full), len(e.sealedBlocks()), BlockCapacity-1)
	}
	e.Learn(BlockCapacity-1, BlockCapacity-1, hashes(BlockCapacity-1, 1), t0)
	if len(e.sealedBlocks()) != 1 || len(e.sealedBlocks()[0].hashes) != BlockCapacity || cap(e.sealedBlocks()[0].hashes) != BlockCapacity || e.hotLen() != 0 {
		t.Fatalf("%d sealed blocks, hot %d", len(e.sealedBlocks()), e.hotLen())
	}
	for i := 1; i < BlockCapacity; i++ {
		a, b := e.sealedBlocks()[0].hashes[i-1].h, e.sealedBlocks()[0].hashes[i].h
		if string(a[:]) >= string(b[:]) {
			t.Fatalf("sealed block not sorted at %d", i)
		}
	}
	for _, x := range hashes(0, BlockCapacity) {
		if !e.contains(&x) {
			t.Fatalf("%x lost in sealing", x)
		}
	}
}

func TestExpiryDropsWholeBlocksAndRaisesHydratedFrom(t *testing.T) {
	t.Parallel()
	e := NewEntry(Hydration{LastOffset: -1, WindowMs: minute})
	// Block 1: offsets 0..4095, the old ones; block 2 straddles; hot is new.
	e.Learn(0, BlockCapacity-1, hashes(0, BlockCapacity), t0)
	e.Learn(BlockCapacity, BlockCapacity+9, hashes(BlockCapacity, 10), t0)
	e.Learn(BlockCapacity+10, 2*BlockCapacity-1, hashes(BlockCapacity+10, BlockCapacity-10), t0+2*minute)
	e.Learn(2*BlockCapacity, 2*BlockCapacity, hashes(2*BlockCapacity, 1), t0+3*minute)

	// At t0 + 1 min + slack nothing is wholly pre-window yet.
	e.Expire(t0 + minute + SkewSlackMs)
	if from, _ := e.Watermarks(); from != -1 || len(e.sealedBlocks()) != 2 {
		t.Fatalf("expired too early: hydratedFrom %d, %d blocks", from, len(e.sealedBlocks()))
	}
	// Later, block 1 is wholly pre-window; block 2 holds old and new hashes
	// and stays, keeping its old ones known (a superset is safe).
	e.Expire(t0 + minute + SkewSlackMs + 1)
	from, _ := e.Watermarks()
	if from != BlockCapacity-1 || len(e.sealedBlocks()) != 1 {
		t.Fatalf("hydratedFrom %d with %d blocks, want %d and 1", from, len(e.sealedBlocks()), BlockCapacity-1)
	}
	old := h(BlockCapacity + 1)
	if !e.contains(&old) {
		t.Error("a pre-window hash in a retained block must stay known")
	}
	if v, _, _ := e.Verified(hashes(1<<40, 1), t0+minute+SkewSlackMs+1); v != 2*BlockCapacity {
		t.Errorf("still vouching for %d, want %d", v, 2*BlockCapacity)
	}
}

func TestCrossBlockDuplicateStaysKnownUntilItsLastBlockDrops(t *testing.T) {
	t.Parallel()
	e := NewEntry(Hydration{LastOffset: -1, WindowMs: minute})
	dup := h(7)
	first := hashes(0, BlockCapacity)
	second := hashes(1<<20, BlockCapacity)
	second[100] = dup // stored again later, e.g. while deduplication was off
	e.Learn(0, BlockCapacity-1, first, t0)
	e.Learn(BlockCapacity, 2*BlockCapacity-1, second, t0+2*minute)
	e.Expire(t0 + 2*minute) // drops the first block only
	if len(e.sealedBlocks()) != 1 || !e.contains(&dup) {
		t.Fatalf("the duplicate must stay known through its second block (%d blocks)", len(e.sealedBlocks()))
	}
	e.Expire(t0 + 4*minute)
	if e.contains(&dup) {
		t.Error("known after its last block dropped")
	}
}

func TestBloomGenerationsTierUpAndDrop(t *testing.T) {
	t.Parallel()
	e := NewEntry(Hydration{LastOffset: -1, WindowMs: 10 * minute})
	var caps []int
	off := int64(0)
	for n, created := range []int64{t0, t0 + minute, t0 + 2*minute} {
		size := []int{BlockCapacity, 8 * BlockCapacity, 64 * BlockCapacity}[n]
		e.Learn(off, off+int64(size)-1, hashes(uint64(off), uint64(size)), created)
		off += int64(size)
	}
	for _, g := range e.generations() {
		caps = append(caps, g.capacity)
	}
	if len(caps) != 3 || caps[0] != 4096 || caps[1] != 32768 || caps[2] != 262144 {
		t.Fatalf("generation capacities %v, want [4096 32768 262144]", caps)
	}
	if nextCapacity(262144) != 1_000_000 || nextCapacity(1_000_000) != 1_000_000 {
		t.Errorf("tiers past 262144: %d, %d; want the 1,000,000 ceiling", nextCapacity(262144), nextCapacity(1_000_000))
	}
	// The first generation's newest hash is pre-window at t0 + 10 min + slack + 1.
	e.Expire(t0 + 10*minute + SkewSlackMs + 1)
	if len(e.generations()) != 2 || e.generations()[0].capacity != 32768 {
		t.Fatalf("after expiry: %d generations", len(e.generations()))
	}
}

func TestBloomHasNoFalseNegativesAndFewFalsePositives(t *testing.T) {
	t.Parallel()
	g := newBloomGen(BlockCapacity, BlockCapacity)
	for _, x := range hashes(0, BlockCapacity) {
		g.add(&x, 0, 0)
	}
	for _, x := range hashes(0, BlockCapacity) {
		if !g.mayContain(split(&x)) {
			t.Fatal("false negative")
		}
	}
	fp := 0
	const probes = 200_000
	for _, x := range hashes(1<<32, probes) {
		if g.mayContain(split(&x)) {
			fp++
		}
	}
	// 16 bits per hash, k = 7: ~0.05 % in theory, a little more blocked.
	if rate := float64(fp) / probes; rate > 0.005 {
		t.Errorf("false positive rate %.4f at full capacity", rate)
	}
}

// FuzzMembership checks block + bloom membership against a map.
func FuzzMembership(f *testing.F) {
	f.Add([]byte{1, 2, 3, 200, 7, 7, 9})
	f.Fuzz(func(t *testing.T, ops []byte) {
		e := NewEntry(Hydration{LastOffset: -1, WindowMs: minute})
		ref := map[Hash]bool{}
		off := int64(0)
		for i, op := range ops {
			// Frames of op%64+1 hashes, some repeating earlier ones.
			n := int(op%64) + 1
			frame := make([]Hash, n)
			for j := range frame {
				id := uint64(i*64 + j)
				if op&0x40 != 0 && j%3 == 0 {
					id = uint64(j) // a repeat of an early hash
				}
				frame[j] = h(id)
				ref[frame[j]] = true
			}
			e.Learn(off, off+int64(n)-1, frame, t0)
			off += int64(n)
		}
		for x := range ref {
			if !e.contains(&x) {
				t.Fatalf("false negative for %x", x)
			}
		}
		for _, x := range hashes(1<<40, 64) {
			if e.contains(&x) != ref[x] {
				t.Fatalf("absent hash %x reported present", x)
			}
		}
	})
}

func TestBloomFalsePositiveRateAtOneMillion(t *testing.T) {
	t.Parallel()
	e := NewEntry(Hydration{LastOffset: -1, WindowMs: minute})
	for off := 0; off < 1_000_000; off += 1000 {
		e.Learn(int64(off), int64(off+999), hashes(uint64(off), 1000), t0)
	}
	maybe := 0
	const probes = 100_000
	for _, x := range hashes(1<<40, probes) {
		for _, g := range e.generations() {
			if g.mayContain(split(&x)) {
				maybe++
				break
			}
		}
	}
	rate := float64(maybe) / probes
	t.Logf("%d generations, false positive rate over all of them %.4f%%", len(e.generations()), rate*100)
	if len(e.generations()) != 4 || rate > 0.01 {
		t.Errorf("%d generations, false positive rate %.4f", len(e.generations()), rate)
	}
}

func TestSortBlockMatchesAComparisonSort(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(1, 2))
	for _, skew := range []string{"uniform", "one-first-byte", "few-first-bytes", "duplicates"} {
		hs := make([]hashAt, BlockCapacity)
		for i := range hs {
			binary.BigEndian.PutUint64(hs[i].h[:8], rng.Uint64())
			binary.BigEndian.PutUint64(hs[i].h[8:], rng.Uint64())
			hs[i].delta = uint16(i)
			switch skew {
			case "one-first-byte":
				hs[i].h[0] = 7
			case "few-first-bytes":
				hs[i].h[0] = byte(i % 3)
			case "duplicates":
				hs[i].h = hs[i%100].h
			}
		}
		orig := slices.Clone(hs)
		want := slices.Clone(hs)
		slices.SortFunc(want, func(a, b hashAt) int { return bytes.Compare(a.h[:], b.h[:]) })
		sortBlock(hs)
		for i := range hs {
			if hs[i].h != want[i].h {
				t.Fatalf("%s: sortBlock order differs from bytes.Compare order at %d", skew, i)
			}
			if hs[i].h != orig[hs[i].delta].h {
				t.Fatalf("%s: a hash lost its offset in the sort", skew)
			}
		}
	}
}

// ringScan is the reference for occurrences: every resident slot of every
// block, sealed and hot, compared with each of xs. For each query, its
// offsets in order, or wide when one of its occurrences is in a wide
// block (offsets unknown there) and then no offsets. One pass over the
// ring serves every query: a pass per query made the test slow under
// -race.
func ringScan(e *Entry, xs []Hash) (offsets [][]int64, wide []bool) {
	at := map[Hash][]int{} // the queries asking for each hash
	for i, x := range xs {
		at[x] = append(at[x], i)
	}
	offsets, wide = make([][]int64, len(xs)), make([]bool, len(xs))
	found := func(h *Hash, off int64, inWide bool) {
		for _, i := range at[*h] {
			wide[i] = wide[i] || inWide
			offsets[i] = append(offsets[i], off)
		}
	}
	for _, b := range e.sealedBlocks() {
		for i := range b.hashes {
			found(&b.hashes[i].h, b.offset(&b.hashes[i]), b.wide)
		}
	}
	e.eachHot(func(s *hashAt, off int64) { found(&s.h, off, e.hotWide) })
	for i := range xs {
		if wide[i] {
			offsets[i] = nil
		}
		slices.Sort(offsets[i])
	}
	return offsets, wide
}

// TestCandidatesMatchABruteForceScan drives an entry through pushes with
// repeats (within and across blocks), expiry and gaps, and checks after
// every step that the candidates named for a lookup are exactly the
// ring's occurrences (a brute-force scan), and that every in-window
// occurrence is among them: the superset a narrowed probe relies on.
func TestCandidatesMatchABruteForceScan(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(3, 4))
	type stored struct {
		h         Hash
		off       int64
		createdMs int64
	}
	for round := range 10 {
		e := NewEntry(Hydration{LastOffset: -1, WindowMs: minute})
		var all []stored
		// byHash indexes all: the in-window check looks at a query's own
		// occurrences, not at every hash stored (under -race, a scan of
		// all per query was most of the package's time).
		byHash := map[Hash][]stored{}
		now, off := t0, int64(0)
		for step := range 200 {
			n := 1 + rng.IntN(300)
			frame := make([]Hash, n)
			for i := range frame {
				if len(all) > 0 && rng.IntN(10) == 0 {
					frame[i] = all[rng.IntN(len(all))].h // stored again: window 0, or another writer
				} else {
					frame[i] = h(uint64(round)<<32 | uint64(step)<<16 | uint64(i))
				}
				all = append(all, stored{frame[i], off + int64(i), now})
				byHash[frame[i]] = append(byHash[frame[i]], all[len(all)-1])
			}
			e.Learn(off, off+int64(n)-1, frame, now)
			off += int64(n)
			now += int64(rng.IntN(3000))
			e.Expire(now)

			queries := make([]Hash, 0, 16)
			for range 12 {
				queries = append(queries, all[rng.IntN(len(all))].h)
			}
			queries = append(queries, h(1<<50+uint64(step)), h(1<<51+uint64(step)))
			verified, cands, hit := e.Verified(queries, now)
			if verified != off-1 {
				t.Fatalf("round %d step %d: verified %d, want %d", round, step, verified, off-1)
			}
			got := byIndex(cands)
			anyHit := false
			inRing, _ := ringScan(e, queries)
			for i, q := range queries {
				want := inRing[i]
				have := slices.Sorted(slices.Values(got[int32(i)]))
				if !slices.Equal(have, want) {
					t.Fatalf("round %d step %d query %d: candidates %v, ring holds %v", round, step, i, have, want)
				}
				anyHit = anyHit || len(want) > 0
				for _, s := range byHash[q] {
					if s.createdMs >= now-minute && !slices.Contains(have, s.off) {
						t.Fatalf("round %d step %d: in-window occurrence at %d of query %d not named", round, step, s.off, i)
					}
				}
			}
			if hit != anyHit {
				t.Fatalf("round %d step %d: hit %v, ring says %v", round, step, hit, anyHit)
			}
		}
	}
}

// TestAWideBlockIsNotNarrowed: a hydration whose frames skip more than a
// block's deltas can span leaves a block whose offsets are not known; a
// hash resident there sends the frame to the full probe.
func TestAWideBlockIsNotNarrowed(t *testing.T) {
	t.Parallel()
	e := NewEntry(Hydration{LastOffset: 100_009, WindowMs: 10 * minute, Ranges: []Range{
		{Base: 0, CreatedMs: t0, Hashes: hashes(0, 10)},
		{Base: 100_000, CreatedMs: t0, Hashes: hashes(100_000, 10)},
	}})
	if v, cands, hit := e.Verified(hashes(1<<40, 3), t0); v != 100_009 || hit || cands != nil {
		t.Errorf("absent hashes: %d %v %v, want to vouch for 100009", v, cands, hit)
	}
	if v, cands, hit := e.Verified([]Hash{h(100_005)}, t0); v != -1 || !hit || cands != nil {
		t.Errorf("a hash of the wide block: %d %v %v, want -1 (full probe)", v, cands, hit)
	}
	// Once that block is sealed and newer blocks follow, their hashes narrow.
	e.Learn(100_010, 100_010+BlockCapacity, hashes(200_000, BlockCapacity+1), t0)
	if v, cands, _ := e.Verified([]Hash{h(200_000 + BlockCapacity)}, t0); v < 0 || len(cands) != 1 || cands[0].Offset != 100_010+BlockCapacity {
		t.Errorf("a hash of a later block: %d %v", v, cands)
	}
}

// TestMemoryPerHashAtEveryEntrySize: at most 21 bytes per resident hash
// by the cache's accounting (16 for the hash, 2 for its offset, the bloom
// front and the hot buffer's headroom), from one block up: checked after
// every 100-hash push of an entry growing to 1.2M, and for hydrated
// entries of several sizes.
func TestMemoryPerHashAtEveryEntrySize(t *testing.T) {
	t.Parallel()
	grown := NewEntry(Hydration{LastOffset: -1, WindowMs: minute})
	worst, worstAt := 0.0, 0
	for off := 0; off < 1_200_000; off += 100 {
		grown.Learn(int64(off), int64(off+99), hashes(uint64(off), 100), t0)
		if n := off + 100; n >= BlockCapacity {
			if perHash := float64(grown.Bytes()) / float64(n); perHash > worst {
				worst, worstAt = perHash, n
			}
		}
	}
	t.Logf("grown by pushes: at most %.2f B/hash (at %d hashes)", worst, worstAt)
	if worst > 21 {
		t.Errorf("an entry grown by pushes reached %.2f B/hash at %d hashes, want at most 21", worst, worstAt)
	}
	for _, n := range []int{4096, 4097, 5000, 8191, 12_000, 36_865, 100_000, 300_001, 1_000_000} {
		var ranges []Range
		for off := 0; off < n; off += 1000 {
			ranges = append(ranges, Range{Base: int64(off), CreatedMs: t0, Hashes: hashes(uint64(off), uint64(min(1000, n-off)))})
		}
		e := NewEntry(Hydration{LastOffset: int64(n - 1), WindowMs: minute, Ranges: ranges})
		if perHash := float64(e.Bytes()) / float64(n); e.Len() != n || perHash > 21 {
			t.Errorf("hydrated entry of %d hashes (%d resident): %.2f B/hash, want at most 21", n, e.Len(), perHash)
		}
	}
}

// TestEntryAnswersLikeAMapAcrossSizes drives entries through every change
// of representation (small, growing a bloom front past smallMax, chunked
// hot buffer, sealed blocks past BlockCapacity, expiry emptying the entry
// back to small and regrowing), born of hydrations of sizes around each
// threshold, with repeats of stored hashes. After every step each lookup
// is compared with a plain map of hash -> stored offsets: the candidates
// name only offsets the hash was stored at, every one of them still in the
// window, and the entry vouches for the allocator.
func TestEntryAnswersLikeAMapAcrossSizes(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(5, 6))
	type stored struct {
		off       int64
		createdMs int64
	}
	sizes := []int{0, 1, 16, smallMax - 1, smallMax, smallMax + 1, hotStep, hotStep + 1, BlockCapacity - 1, BlockCapacity, BlockCapacity + 1}
	var sawSmall, sawFront, sawSealed, sawShrunk bool
	for round, size := range sizes {
		now := t0
		ref := map[Hash][]stored{}
		var all []Hash
		fresh := uint64(round) << 40
		newHash := func() Hash { fresh++; return h(fresh) }
		var ranges []Range
		off := int64(0)
		for off < int64(size) {
			n := min(int64(1+rng.IntN(50)), int64(size)-off)
			r := Range{Base: off, CreatedMs: now, Hashes: make([]Hash, n)}
			for i := range r.Hashes {
				r.Hashes[i] = newHash()
				ref[r.Hashes[i]] = append(ref[r.Hashes[i]], stored{off + int64(i), now})
				all = append(all, r.Hashes[i])
			}
			ranges = append(ranges, r)
			off += n
		}
		e := NewEntry(Hydration{LastOffset: off - 1, WindowMs: minute, Ranges: ranges})
		for step := range 120 {
			// A push: mostly new hashes, some repeats (stored again, as with
			// the window off or from another writer).
			n := 1 + rng.IntN(20)
			if rng.IntN(15) == 0 {
				n = 1 + rng.IntN(3*BlockCapacity/2)
			}
			frame := make([]Hash, n)
			for i := range frame {
				if len(all) > 0 && rng.IntN(8) == 0 {
					frame[i] = all[rng.IntN(len(all))]
				} else {
					frame[i] = newHash()
					all = append(all, frame[i])
				}
				ref[frame[i]] = append(ref[frame[i]], stored{off + int64(i), now})
			}
			e.Learn(off, off+int64(n)-1, frame, now)
			off += int64(n)
			if rng.IntN(10) == 0 {
				now += minute + SkewSlackMs + 1 // everything so far leaves the window
			} else {
				now += int64(rng.IntN(2000))
			}
			e.Expire(now)
			sawSmall = sawSmall || e.small() && e.Len() > 0
			sawFront = sawFront || !e.small() && len(e.sealedBlocks()) == 0
			sawSealed = sawSealed || len(e.sealedBlocks()) > 0
			sawShrunk = sawShrunk || e.small() && off > smallMax

			queries := []Hash{newHash(), newHash()}
			for range 14 {
				if len(all) > 0 {
					queries = append(queries, all[rng.IntN(len(all))])
				}
			}
			verified, cands, hit := e.Verified(queries, now)
			if verified != off-1 {
				t.Fatalf("size %d step %d: verified %d, want the allocator %d", size, step, verified, off-1)
			}
			named := byIndex(cands)
			anyHit := false
			for i, q := range queries {
				at := map[int64]bool{}
				for _, s := range ref[q] {
					at[s.off] = true
					if s.createdMs >= now-minute && !slices.Contains(named[int32(i)], s.off) {
						t.Fatalf("size %d step %d: %x stored in the window at %d, not named (named %v)", size, step, q, s.off, named[int32(i)])
					}
				}
				for _, o := range named[int32(i)] {
					if !at[o] {
						t.Fatalf("size %d step %d: %x named at %d, where it was never stored", size, step, q, o)
					}
				}
				anyHit = anyHit || len(named[int32(i)]) > 0
			}
			if hit != anyHit {
				t.Fatalf("size %d step %d: hit %v, candidates say %v", size, step, hit, anyHit)
			}
			if scanned := e.hotLen() + countSealed(e); e.Len() != scanned {
				t.Fatalf("size %d step %d: Len %d, the ring holds %d", size, step, e.Len(), scanned)
			}
		}
	}
	if !sawSmall || !sawFront || !sawSealed || !sawShrunk {
		t.Errorf("representations met: small %v, bloom front without sealed blocks %v, sealed %v, small again after expiry %v; want all",
			sawSmall, sawFront, sawSealed, sawShrunk)
	}
}

// byIndex groups candidates' offsets by the message they name.
func byIndex(cands []Candidate) map[int32][]int64 {
	named := map[int32][]int64{}
	for _, c := range cands {
		named[c.Index] = append(named[c.Index], c.Offset)
	}
	return named
}

func countSealed(e *Entry) int {
	n := 0
	for _, b := range e.sealedBlocks() {
		n += len(b.hashes)
	}
	return n
}

// TestSmallEntryHasNoBloomFrontAndGrowsOne: up to smallMax hashes an
// entry is one array with no generation; the next hash builds the first
// generation holding them all, and a wide small entry (a hydration that
// skipped offsets) sends a resident hash to the full probe either way.
func TestSmallEntryHasNoBloomFrontAndGrowsOne(t *testing.T) {
	t.Parallel()
	e := NewEntry(Hydration{LastOffset: -1, WindowMs: minute})
	e.Learn(0, smallMax-1, hashes(0, smallMax), t0)
	if !e.small() || len(e.generations()) != 0 || cap(e.hot.open) != smallMax {
		t.Fatalf("%d hashes: small %v, %d generations, %d slots; want one array of %d and no generation",
			smallMax, e.small(), len(e.generations()), cap(e.hot.open), smallMax)
	}
	e.Learn(smallMax, smallMax, hashes(smallMax, 1), t0)
	if e.small() || len(e.generations()) != 1 || e.generations()[0].count != smallMax+1 {
		t.Fatalf("past smallMax: small %v, generations %d", e.small(), len(e.generations()))
	}
	for _, x := range hashes(0, smallMax+1) {
		hi, lo := split(&x)
		if !e.generations()[0].mayContain(hi, lo) {
			t.Fatalf("%x missing from the first generation", x)
		}
	}
	w := NewEntry(Hydration{LastOffset: 100_000, WindowMs: minute, Ranges: []Range{
		{Base: 0, CreatedMs: t0, Hashes: hashes(0, 3)},
		{Base: 100_000, CreatedMs: t0, Hashes: hashes(100_000, 1)},
	}})
	if v, _, hit := w.Verified([]Hash{h(1)}, t0); !w.small() || v != -1 || !hit {
		t.Errorf("a wide small entry: verified %d hit %v, want -1 (full probe)", v, hit)
	}
	if v, _, _ := w.Verified(hashes(1<<40, 2), t0); v != 100_000 {
		t.Errorf("a wide small entry, absent hashes: verified %d, want 100000", v)
	}
}
