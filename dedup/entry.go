package dedup

import (
	"bytes"
	"cmp"
	"encoding/binary"
	"math"
	"slices"
)

// Hash is the 16-byte identity SQL compares: xxh3_128 of the
// transactionId, high 64 bits first (the model's hash).
type Hash = [16]byte

// BlockCapacity is the size of a sealed block: 4096 hashes, a multiple of
// hotStep. It is the largest allocation the exact ring makes (72 KiB with
// the offsets).
const BlockCapacity = 4096

// hotStep is the size of the hot buffer's chunks: it grows a chunk at a
// time, so an entry's unused headroom stays under 128 slots (~2.3 KB),
// where doubling left up to half a block empty, and nothing is copied
// until the seal copies each slot once.
const hotStep = 128

// SkewSlackMs widens the window on the safe side wherever the broker's
// clock is compared with created_at from PostgreSQL's: hydration reads 5 s
// more, expiry drops 5 s later. Extra old hashes only widen coverage.
const SkewSlackMs = 5000

// Range is one committed frame: the hashes of offsets Base, Base+1, ….
type Range struct {
	Base      int64
	CreatedMs int64 // created_at, milliseconds since the Unix epoch
	Hashes    []Hash
}

// Hydration is the full-window read an entry is born from: every frame
// created within window + 5 s, with the allocator of the same snapshot.
type Hydration struct {
	LastOffset int64
	WindowMs   int64
	Ranges     []Range // in offset order
}

// hashAt is one resident hash and where it was stored: its offset's
// distance from its block's base offset (18 bytes, no padding).
type hashAt struct {
	h     Hash
	delta uint16
}

// block is a run of slots with the span it covers. Sealed blocks are
// sorted by hash and immutable; the hot buffer is in arrival (offset)
// order.
type block struct {
	hashes       []hashAt
	base         int64 // offset of the first slot appended
	maxOffset    int64
	maxCreatedMs int64
	// wide: some offset is more than 65535 past base (a hydration that
	// skipped rows), so the deltas do not locate this block's hashes.
	wide bool
}

func (b *block) offset(s *hashAt) int64 { return b.base + int64(s.delta) }

// Candidate is a resident occurrence of a hash a push carries: message
// Index of the segment (0-based), stored at Offset as far as the cache
// knows. SQL checks exactly these slots instead of the whole window.
type Candidate struct {
	Index  int32
	Offset int64
}

// Entry is one partition's cache. It vouches only while it knows every
// hash in (hydratedFrom, verifiedUpto] and hydratedFrom is at or below the
// window start. Not safe for concurrent use: the cache holds a mutex per
// entry.
type Entry struct {
	windowMs     int64
	hydratedFrom int64
	verifiedUpto int64
	// gap: another writer interleaved (a push returned a base above
	// verifiedUpto+1); rebuild: an impossible overlap, or the window
	// changed. Either way the entry answers -1 until rebuilt.
	gap, rebuild bool

	sealed []block // oldest first
	hot    hotBuffer
	gens   []*bloomGen // oldest first; the last takes new hashes
	count  int         // resident hashes

	// Lookup counters since the cache last collected them.
	misses, maybes, falsePositives int64
}

// NewEntry builds an entry from a full-window hydration: entries are only
// born complete. Bloom generations are sized for the hashes they will
// hold, so a hydration never regrows one.
func NewEntry(h Hydration) *Entry {
	e := &Entry{windowMs: h.WindowMs, verifiedUpto: h.LastOffset}
	// Everything below the first in-window frame is either purged (below
	// txns_start) or older than the window plus slack.
	e.hydratedFrom = h.LastOffset
	if len(h.Ranges) > 0 {
		e.hydratedFrom = h.Ranges[0].Base - 1
	}
	total := 0
	for _, r := range h.Ranges {
		total += len(r.Hashes)
	}
	for _, r := range h.Ranges {
		e.append(r.Base, r.Hashes, r.CreatedMs, total)
		total -= len(r.Hashes)
	}
	return e
}

// Verified is the watermark a push of hashes may send as p_verified, at
// broker time nowMs, and the resident occurrences of those hashes that SQL
// must check. It is verifiedUpto when the entry vouches (with the
// candidates, none when no hash is resident), and -1 when it cannot
// (then SQL probes the whole window, and candidates are nil). hit
// reports a resident hash.
func (e *Entry) Verified(hashes []Hash, nowMs int64) (verified int64, candidates []Candidate, hit bool) {
	e.Expire(nowMs)
	var buf [256]uint32
	maybe := e.bloomMaybes(hashes, buf[:0])
	for i := range hashes {
		if maybe[i] == 0 {
			e.misses++
			continue
		}
		offs, ok := e.occurrencesIn(&hashes[i], maybe[i])
		if len(offs) > 0 {
			hit = true
		}
		if !ok {
			// In a wide block: its offsets are not known, only the full
			// probe is exact.
			return -1, nil, true
		}
		for _, off := range offs {
			candidates = append(candidates, Candidate{Index: int32(i), Offset: off})
		}
	}
	if !e.Vouching() {
		return -1, nil, hit
	}
	return e.verifiedUpto, candidates, hit
}

// bloomMaybes asks every generation about every hash: bit g of maybe[i]
// says generation g may hold hashes[i]. Generation by generation, so the
// lookups of one generation are independent loads the CPU overlaps (one
// cache miss each in a large filter). More than 32 generations (never,
// at the tiers' sizes) all count as maybes.
func (e *Entry) bloomMaybes(hashes []Hash, maybe []uint32) []uint32 {
	maybe = slices.Grow(maybe[:0], len(hashes))[:len(hashes)]
	clear(maybe)
	for g, gen := range e.gens {
		bit := uint32(1) << min(g, 31)
		for i := range hashes {
			hi, lo := split(&hashes[i])
			if gen.mayContain(hi, lo) {
				maybe[i] |= bit
			}
		}
	}
	return maybe
}

// Vouching reports whether the entry can vouch at all.
func (e *Entry) Vouching() bool { return !e.gap && !e.rebuild }

// Gap reports an interleave seen since hydration.
func (e *Entry) Gap() bool { return e.gap }

// NeedsRebuild reports that only a full rehydration can make the entry
// vouch again (an overlap, or a window change).
func (e *Entry) NeedsRebuild() bool { return e.rebuild }

// WindowChanged marks the entry for a full rebuild: its expiry
// bookkeeping was computed under the old window.
func (e *Entry) WindowChanged() { e.rebuild = true }

// Learn records a committed push: written holds the hashes stored at
// base, base+1, … (the frame's new messages, in offset order; none when
// everything was a duplicate, base then being -1), and last is the
// allocator after the push. A push that does not follow verifiedUpto
// means another writer committed in between: the entry marks a gap and
// keeps verifiedUpto where it knows everything, so that Fill can read
// just what it missed (this push included).
func (e *Entry) Learn(base, last int64, written []Hash, createdMs int64) {
	switch {
	case e.gap || e.rebuild:
		// Already waiting for a fill or a rebuild, which reads this too.
	case len(written) == 0:
		// Nothing written: the allocator can only have moved if another
		// writer did, and then we no longer know everything below it.
		if last > e.verifiedUpto {
			e.gap = true
		}
	case base == e.verifiedUpto+1:
		e.append(base, written, createdMs, 0)
		if last > e.verifiedUpto {
			e.gap = true // another writer right after us, in the same bundle's wake
		}
	case base > e.verifiedUpto+1:
		// Another broker interleaved. The push itself was right (SQL
		// probed past our watermark), but we do not know what it wrote.
		e.gap = true
	default:
		// An overlap is impossible under a monotone allocator: rebuild.
		e.rebuild = true
	}
}

// Fill heals a gap with what the entry missed: ranges are every log_txns
// row stored above verifiedUpto, in offset order, read in one snapshot
// with last, the allocator then. It succeeds only if they are exactly the
// offsets verifiedUpto+1 … last, with no hole (a hole means retention
// purged rows the entry never saw: only a full hydration can vouch again).
// An entry vouches again only for what it has now seen completely.
func (e *Entry) Fill(ranges []Range, last int64) bool {
	if !e.gap || e.rebuild {
		return false
	}
	next := e.verifiedUpto + 1
	for _, r := range ranges {
		if r.Base != next || len(r.Hashes) == 0 {
			return false
		}
		next += int64(len(r.Hashes))
	}
	if next-1 != last {
		return false
	}
	coming := 0
	for _, r := range ranges {
		coming += len(r.Hashes)
	}
	for _, r := range ranges {
		e.append(r.Base, r.Hashes, r.CreatedMs, coming)
		coming -= len(r.Hashes)
	}
	e.verifiedUpto = max(e.verifiedUpto, last)
	e.gap = false
	return true
}

// append adds hashes stored at base, base+1, …. coming, when known, is
// how many hashes are about to be appended in all (a hydration): new
// bloom generations are then sized for what they will hold.
func (e *Entry) append(base int64, hashes []Hash, createdMs int64, coming int) {
	for i := range hashes {
		off := base + int64(i)
		e.appendHot(&hashes[i], off, createdMs)
		g := e.openGen(coming - i)
		g.add(&hashes[i], off, createdMs)
		if g.count > g.sized {
			g.grow(e)
		}
		e.count++
	}
	e.verifiedUpto = max(e.verifiedUpto, base+int64(len(hashes))-1)
}

// hotBuffer holds the newest hashes in arrival (offset) order, in chunks
// of hotStep slots: all full but the last.
type hotBuffer struct {
	chunks       [][]hashAt
	n            int
	base         int64 // offset of the first slot
	maxOffset    int64
	maxCreatedMs int64
	wide         bool // as block.wide
}

func (hb *hotBuffer) len() int { return hb.n }

// each calls f with every slot, in arrival order, and its offset.
func (hb *hotBuffer) each(f func(s *hashAt, off int64)) {
	for _, c := range hb.chunks {
		for i := range c {
			f(&c[i], hb.base+int64(c[i].delta))
		}
	}
}

// appendHot puts one hash in the hot buffer, sealing it when full.
func (e *Entry) appendHot(h *Hash, off, createdMs int64) {
	hot := &e.hot
	if hot.n == 0 {
		hot.base, hot.wide = off, false
	}
	if hot.n%hotStep == 0 {
		hot.chunks = append(hot.chunks, make([]hashAt, 0, hotStep))
	}
	d := off - hot.base
	if d > math.MaxUint16 {
		hot.wide, d = true, 0
	}
	last := &hot.chunks[len(hot.chunks)-1]
	*last = append(*last, hashAt{h: *h, delta: uint16(d)})
	hot.n++
	hot.maxOffset = off
	hot.maxCreatedMs = max(hot.maxCreatedMs, createdMs)
	if hot.n == BlockCapacity {
		e.seal()
	}
}

// openGen is the generation that takes the next hash, opening a new one
// (sized for coming hashes when that is known) when the last is full.
func (e *Entry) openGen(coming int) *bloomGen {
	if n := len(e.gens); n > 0 && !e.gens[n-1].full() {
		return e.gens[n-1]
	}
	prev := 0
	if n := len(e.gens); n > 0 {
		prev = e.gens[n-1].capacity
	}
	g := newBloomGen(nextCapacity(prev), coming)
	e.gens = append(e.gens, g)
	return g
}

// seal makes the full hot buffer a sorted block: its chunks copied into
// one array, sorted in place.
func (e *Entry) seal() {
	hot := &e.hot
	b := block{hashes: make([]hashAt, 0, BlockCapacity), base: hot.base, maxOffset: hot.maxOffset,
		maxCreatedMs: hot.maxCreatedMs, wide: hot.wide}
	for _, c := range hot.chunks {
		b.hashes = append(b.hashes, c...)
	}
	sortBlock(b.hashes)
	e.sealed = append(e.sealed, b)
	e.hot = hotBuffer{}
}

// Expire drops what is wholly older than the window (plus the skew slack)
// at broker time nowMs. A block goes only when its newest hash is pre-window,
// so the resident set stays a superset of the in-window hashes, and
// hydratedFrom rises only past pre-window offsets.
func (e *Entry) Expire(nowMs int64) {
	start := nowMs - e.windowMs - SkewSlackMs
	n := 0
	for n < len(e.sealed) && e.sealed[n].maxCreatedMs < start {
		e.hydratedFrom = max(e.hydratedFrom, e.sealed[n].maxOffset)
		e.count -= len(e.sealed[n].hashes)
		n++
	}
	if n > 0 {
		e.sealed = slices.Delete(e.sealed, 0, n)
	}
	if len(e.sealed) == 0 && e.hot.n > 0 && e.hot.maxCreatedMs < start {
		e.hydratedFrom = max(e.hydratedFrom, e.hot.maxOffset)
		e.count -= e.hot.n
		e.hot = hotBuffer{}
	}
	g := 0
	// The newest generation stays: it takes the next hashes.
	for g < len(e.gens)-1 && e.gens[g].maxCreatedMs < start {
		g++
	}
	if g > 0 {
		e.gens = slices.Delete(e.gens, 0, g)
	}
}

// occurrences finds the offsets at which h is resident, behind the bloom
// front: a definite miss touches one cache line per live generation and
// no block. ok is false when h sits in a wide block, whose offsets are
// not known.
func (e *Entry) occurrences(h *Hash) (offsets []int64, ok bool) {
	var buf [1]uint32
	maybe := e.bloomMaybes([]Hash{*h}, buf[:0])[0]
	if maybe == 0 {
		e.misses++
		return nil, true
	}
	return e.occurrencesIn(h, maybe)
}

// occurrencesIn finds h in the blocks holding the offsets of the
// generations that may hold it (bit g of maybe for generation g).
func (e *Entry) occurrencesIn(h *Hash, maybe uint32) (offsets []int64, ok bool) {
	from, to := int64(math.MaxInt64), int64(math.MinInt64)
	for g, gen := range e.gens {
		if maybe&(uint32(1)<<min(g, 31)) != 0 {
			from, to = min(from, gen.minOffset), max(to, gen.maxOffset)
		}
	}
	e.maybes++
	hi, lo := split(h)
	offsets, ok = e.find(h, hi, lo, from, to)
	if len(offsets) == 0 && ok {
		e.falsePositives++
	}
	return offsets, ok
}

// find collects the offsets of h in the blocks that overlap offsets
// [from, to]. Blocks are in offset order, each covering (previous
// maxOffset, maxOffset]; within a sealed block equal hashes are adjacent.
func (e *Entry) find(h *Hash, hi, lo uint64, from, to int64) (offsets []int64, ok bool) {
	i, _ := slices.BinarySearchFunc(e.sealed, from, func(b block, off int64) int { return cmp.Compare(b.maxOffset, off) })
	for ; i < len(e.sealed); i++ {
		b := &e.sealed[i]
		for j := searchSorted(b.hashes, hi, lo); j < len(b.hashes) && b.hashes[j].h == *h; j++ {
			if b.wide {
				return nil, false
			}
			offsets = append(offsets, b.offset(&b.hashes[j]))
		}
		if b.maxOffset >= to {
			return offsets, true
		}
	}
	wide := false
	e.hot.each(func(s *hashAt, off int64) {
		if s.h == *h {
			wide = wide || e.hot.wide
			offsets = append(offsets, off)
		}
	})
	if wide {
		return nil, false
	}
	return offsets, true
}

// contains reports whether h is resident (bloom front, then exact).
func (e *Entry) contains(h *Hash) bool {
	offs, ok := e.occurrences(h)
	return len(offs) > 0 || !ok
}

// takeCounters returns and resets the bloom front's lookup counters.
func (e *Entry) takeCounters() (misses, maybes, falsePositives int64) {
	misses, maybes, falsePositives = e.misses, e.maybes, e.falsePositives
	e.misses, e.maybes, e.falsePositives = 0, 0, 0
	return
}

// containsExact is the authority behind the front: a linear scan of the
// hot buffer and a binary search of every sealed block.
func (e *Entry) containsExact(h *Hash) bool {
	found := false
	e.hot.each(func(s *hashAt, _ int64) { found = found || s.h == *h })
	if found {
		return true
	}
	hi, lo := split(h)
	for i := range e.sealed {
		s := e.sealed[i].hashes
		if j := searchSorted(s, hi, lo); j < len(s) && s[j].h == *h {
			return true
		}
	}
	return false
}

// searchSorted is the index of the first slot not below (hi, lo) in slots
// sorted as big-endian (hi, lo) pairs, the order bytes.Compare gives;
// comparing two uint64s instead of 16 bytes through a closure is ~5×
// faster. xxh3 output is uniform, so the search starts in a narrow band
// around where hi should sit (±4σ of a full block's spread), and widens
// to the whole block only when the band's ends show hi lies outside it.
func searchSorted(s []hashAt, hi, lo uint64) int {
	const band = 128
	i, j := 0, len(s)
	if j > 4*band {
		guess := int((hi >> 32) * uint64(j) >> 32)
		a, b := max(0, guess-band), min(j, guess+band)
		if (a == 0 || lessHash(&s[a-1].h, hi, lo)) && (b == j || !lessHash(&s[b].h, hi, lo)) {
			i, j = a, b
		}
	}
	for i < j {
		m := int(uint(i+j) >> 1)
		if lessHash(&s[m].h, hi, lo) {
			i = m + 1
		} else {
			j = m
		}
	}
	return i
}

// lessHash reports x < (hi, lo).
func lessHash(x *Hash, hi, lo uint64) bool {
	xh := binary.BigEndian.Uint64(x[:8])
	return xh < hi || xh == hi && binary.BigEndian.Uint64(x[8:]) < lo
}

// Len is the number of resident hashes.
func (e *Entry) Len() int { return e.count }

// hashAtBytes is a resident hash's footprint in the exact ring.
const hashAtBytes = 18

// Bytes is the entry's footprint: 18 bytes per slot of the exact ring
// (the hash and its offset), about 2 per hash of bloom, and the hot
// buffer's headroom.
func (e *Entry) Bytes() int64 {
	n := int64(len(e.sealed))*BlockCapacity*hashAtBytes + int64(len(e.hot.chunks))*hotStep*hashAtBytes + 256
	for _, g := range e.gens {
		n += g.bytes()
	}
	return n
}

// Watermarks returns (hydratedFrom, verifiedUpto).
func (e *Entry) Watermarks() (hydratedFrom, verifiedUpto int64) {
	return e.hydratedFrom, e.verifiedUpto
}

// WindowHashes estimates what a full probe of this partition unrolls: the
// resident hashes of blocks not wholly pre-window at nowMs (the resident
// set is a block-granular superset of the window).
func (e *Entry) WindowHashes(nowMs int64) int {
	start := nowMs - e.windowMs
	n := e.hot.len()
	for i := range e.sealed {
		if e.sealed[i].maxCreatedMs >= start {
			n += len(e.sealed[i].hashes)
		}
	}
	return n
}

// eachSince calls f with every resident hash stored at or after offset
// from (a wide block's all: a superset does not matter to a bloom).
func (e *Entry) eachSince(from int64, f func(h *Hash)) {
	i, _ := slices.BinarySearchFunc(e.sealed, from, func(b block, off int64) int { return cmp.Compare(b.maxOffset, off) })
	visit := func(b *block) {
		for j := range b.hashes {
			if b.wide || b.offset(&b.hashes[j]) >= from {
				f(&b.hashes[j].h)
			}
		}
	}
	for ; i < len(e.sealed); i++ {
		visit(&e.sealed[i])
	}
	e.hot.each(func(s *hashAt, off int64) {
		if e.hot.wide || off >= from {
			f(&s.h)
		}
	})
}

// sortBlock sorts a full hot buffer in place into the order searchSorted
// expects. A comparison sort of 4096 keys was ~85 % of an insert's cost;
// xxh3 output is uniform, so an in-place radix pass on the first byte
// (American flag sort) leaves buckets of ~16 that insertion sort
// finishes. A bucket grown large (transactionIds chosen to share a first
// hash byte) falls back to the comparison sort, so no input is quadratic.
func sortBlock(s []hashAt) {
	var count, next [256]int
	for i := range s {
		count[s[i].h[0]]++
	}
	sum := 0
	for b := range count {
		next[b] = sum
		sum += count[b]
	}
	start := next
	for b := range 256 {
		end := start[b] + count[b]
		for next[b] < end {
			v := s[next[b]]
			for d := int(v.h[0]); d != b; d = int(v.h[0]) {
				s[next[d]], v = v, s[next[d]]
				next[d]++
			}
			s[next[b]] = v
			next[b]++
		}
	}
	for b := range 256 {
		bucket := s[start[b] : start[b]+count[b]]
		if len(bucket) > 64 {
			slices.SortFunc(bucket, func(a, b hashAt) int { return bytes.Compare(a.h[:], b.h[:]) })
			continue
		}
		for i := 1; i < len(bucket); i++ {
			v := bucket[i]
			hi, lo := split(&v.h)
			j := i
			for j > 0 && greaterHash(&bucket[j-1].h, hi, lo) {
				bucket[j] = bucket[j-1]
				j--
			}
			bucket[j] = v
		}
	}
}

// greaterHash reports x > (hi, lo).
func greaterHash(x *Hash, hi, lo uint64) bool {
	xh := binary.BigEndian.Uint64(x[:8])
	return xh > hi || xh == hi && binary.BigEndian.Uint64(x[8:]) > lo
}
