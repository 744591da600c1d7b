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
// until the seal copies each slot once. Only the first chunk of an entry
// starts smaller, at the size needed, and doubles up to hotStep: a
// partition holding a handful of hashes carries a handful of slots.
const hotStep = 128

// smallMax is the most hashes an entry holds without a bloom front: up to
// it, a lookup scans the hot buffer (exact, at most 64 slots of one array)
// rather than paying a generation's filter (512 bytes at least) and
// struct. The entry's first generation is built from the hot buffer when
// it outgrows this, and dropped again when expiry empties the entry.
const smallMax = 64

// SkewSlackMs widens the window on the safe side wherever the broker's
// clock is compared with created_at from PostgreSQL's: hydration reads 5 s
// more, expiry drops 5 s later. Extra old hashes only widen coverage. It
// is model.ClockSkewSlack, which hydration reads by; dedup imports nothing
// of ours, so ingest's tests check that the two agree.
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
// Index of the frame (0-based), stored at Offset as far as the cache
// knows. SQL checks exactly these slots instead of the whole window.
type Candidate struct {
	Index  int32
	Offset int64
}

// Entry is one partition's cache. It vouches only while it knows every
// hash in (hydratedFrom, verifiedUpto] and hydratedFrom is at or below the
// window start. Not safe for concurrent use: the cache holds a mutex per
// entry.
//
// A small entry (at most smallMax hashes, none sealed) is its header and
// one array: its ring is nil. Everything else an entry may grow (sealed
// blocks, the hot buffer's full chunks, the bloom front) is in the ring,
// so the header stays at 96 bytes.
type Entry struct {
	windowMs     int64
	hydratedFrom int64
	verifiedUpto int64
	hot          hotBuffer
	ring         *ring // nil while the entry is small

	// Lookup counters since the cache last collected them (at every
	// decision, so 32 bits are plenty).
	misses, maybes, falsePositives int32

	// gap: another writer interleaved (a push returned a base above
	// verifiedUpto+1); rebuild: an impossible overlap, or the window
	// changed. Either way the entry answers -1 until rebuilt.
	gap, rebuild bool
	hotWide      bool // as block.wide, for the hot buffer
}

// ring is what a large entry holds beyond the hot buffer's open chunk.
type ring struct {
	sealed      []block     // oldest first
	full        [][]hashAt  // the hot buffer's full chunks, oldest first
	gens        []*bloomGen // oldest first; the last takes new hashes
	sealedCount int         // hashes in sealed blocks
}

// sealedBlocks are the entry's sorted blocks, oldest first.
func (e *Entry) sealedBlocks() []block {
	if e.ring == nil {
		return nil
	}
	return e.ring.sealed
}

// generations is the entry's bloom front, oldest first; none while small.
func (e *Entry) generations() []*bloomGen {
	if e.ring == nil {
		return nil
	}
	return e.ring.gens
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

// small reports an entry without a bloom front: its hot buffer is all it
// holds, and a lookup scans it.
func (e *Entry) small() bool { return e.ring == nil }

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
// at the tiers' sizes) all count as maybes. A small entry has no front:
// every hash is looked up in its array.
func (e *Entry) bloomMaybes(hashes []Hash, maybe []uint32) []uint32 {
	maybe = slices.Grow(maybe[:0], len(hashes))[:len(hashes)]
	if e.small() {
		for i := range maybe {
			maybe[i] = 1
		}
		return maybe
	}
	clear(maybe)
	for g, gen := range e.ring.gens {
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

// Fill heals a gap with what the entry missed: ranges are the hashes of
// every frame stored above verifiedUpto, in offset order, read in one snapshot
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
		if e.small() && e.hotLen() == smallMax {
			e.growFront(coming - i)
		}
		e.appendHot(&hashes[i], off, createdMs, max(coming, len(hashes))-i)
		if e.small() {
			continue
		}
		g := e.openGen(coming - i)
		g.add(&hashes[i], off, createdMs)
		if g.count > g.sized {
			g.grow(e)
		}
	}
	e.verifiedUpto = max(e.verifiedUpto, base+int64(len(hashes))-1)
}

// growFront makes a small entry large: a ring, and a first generation
// holding the hot buffer's hashes (sized for them and the coming ones,
// when known). Their created times are not kept per hash: the buffer's
// newest stands for all, which only keeps the generation longer.
func (e *Entry) growFront(coming int) {
	e.ring = &ring{}
	expected := 0 // unknown: the generation starts at bloomInitial
	if coming > 0 {
		expected = e.hotLen() + coming
	}
	g := e.openGen(expected)
	e.eachHot(func(s *hashAt, off int64) { g.add(&s.h, off, e.hot.maxCreatedMs) })
	// A wide buffer's deltas understate its offsets: its newest is known.
	g.maxOffset = max(g.maxOffset, e.hot.maxOffset)
}

// hotBuffer holds the newest hashes in arrival (offset) order: the open
// chunk here, the full ones (hotStep slots each) in the entry's ring.
type hotBuffer struct {
	open         []hashAt
	base         int64 // offset of the first slot
	maxOffset    int64
	maxCreatedMs int64
}

// hotLen is the number of hashes in the hot buffer.
func (e *Entry) hotLen() int {
	n := len(e.hot.open)
	if e.ring != nil {
		n += len(e.ring.full) * hotStep
	}
	return n
}

// eachHot calls f with every slot of the hot buffer, in arrival order,
// and its offset.
func (e *Entry) eachHot(f func(s *hashAt, off int64)) {
	visit := func(c []hashAt) {
		for i := range c {
			f(&c[i], e.hot.base+int64(c[i].delta))
		}
	}
	if e.ring != nil {
		for _, c := range e.ring.full {
			visit(c)
		}
	}
	visit(e.hot.open)
}

// appendHot puts one hash in the hot buffer, sealing it when full; this
// one and coming-1 more are about to be appended. The open chunk is sized
// for them, and grows by half at least, up to hotStep: a partition
// pushing a few hashes at a time carries little headroom.
func (e *Entry) appendHot(h *Hash, off, createdMs int64, coming int) {
	hot := &e.hot
	if e.hotLen() == 0 {
		hot.base, e.hotWide = off, false
	}
	if len(hot.open) == hotStep {
		// Only a large entry gets here (smallMax < hotStep).
		e.ring.full = append(e.ring.full, hot.open)
		hot.open = nil
	}
	if n := len(hot.open); n == cap(hot.open) {
		grown := make([]hashAt, n, chunkSlots(min(hotStep, max(n+coming, n+n/2, 1))))
		copy(grown, hot.open)
		hot.open = grown
	}
	d := off - hot.base
	if d > math.MaxUint16 {
		e.hotWide, d = true, 0
	}
	hot.open = append(hot.open, hashAt{h: *h, delta: uint16(d)})
	hot.maxOffset = off
	hot.maxCreatedMs = max(hot.maxCreatedMs, createdMs)
	if e.hotLen() == BlockCapacity {
		e.seal()
	}
}

// allocSizes are the Go allocator's size classes up to a full chunk
// (hotStep slots, 2304 bytes): an allocation takes the smallest class
// that holds it.
var allocSizes = [...]int{24, 48, 64, 80, 96, 112, 128, 144, 160, 176, 192, 208, 224, 240, 256, 288, 320,
	352, 384, 416, 448, 480, 512, 576, 640, 704, 768, 896, 1024, 1152, 1280, 1408, 1536, 1792, 2048, 2304}

// chunkSlots is the capacity to allocate for at least n slots (n <=
// hotStep): as many as the allocation's size class holds, so none of it
// is lost and all of it is accounted.
func chunkSlots(n int) int {
	for _, size := range allocSizes {
		if size >= n*hashAtBytes {
			return size / hashAtBytes
		}
	}
	return n
}

// openGen is the generation that takes the next hash, opening a new one
// (sized for coming hashes when that is known) when the last is full.
func (e *Entry) openGen(coming int) *bloomGen {
	r := e.ring
	if n := len(r.gens); n > 0 && !r.gens[n-1].full() {
		return r.gens[n-1]
	}
	prev := 0
	if n := len(r.gens); n > 0 {
		prev = r.gens[n-1].capacity
	}
	g := newBloomGen(nextCapacity(prev), coming)
	r.gens = append(r.gens, g)
	return g
}

// seal makes the full hot buffer a sorted block: its chunks copied into
// one array, sorted in place. Only a large entry fills one.
func (e *Entry) seal() {
	hot, r := &e.hot, e.ring
	b := block{hashes: make([]hashAt, 0, BlockCapacity), base: hot.base, maxOffset: hot.maxOffset,
		maxCreatedMs: hot.maxCreatedMs, wide: e.hotWide}
	for _, c := range r.full {
		b.hashes = append(b.hashes, c...)
	}
	b.hashes = append(b.hashes, hot.open...)
	sortBlock(b.hashes)
	r.sealed = append(r.sealed, b)
	r.sealedCount += len(b.hashes)
	r.full = nil
	e.hot, e.hotWide = hotBuffer{}, false
}

// Expire drops what is wholly older than the window (plus the skew slack)
// at broker time nowMs. A block goes only when its newest hash is pre-window,
// so the resident set stays a superset of the in-window hashes, and
// hydratedFrom rises only past pre-window offsets.
//
// An entry emptied this way is small again: with no hash resident, its
// bloom front has nothing to answer for.
func (e *Entry) Expire(nowMs int64) {
	start := nowMs - e.windowMs - SkewSlackMs
	if r := e.ring; r != nil {
		n := 0
		for n < len(r.sealed) && r.sealed[n].maxCreatedMs < start {
			e.hydratedFrom = max(e.hydratedFrom, r.sealed[n].maxOffset)
			r.sealedCount -= len(r.sealed[n].hashes)
			n++
		}
		if n > 0 {
			r.sealed = slices.Delete(r.sealed, 0, n)
		}
	}
	if len(e.sealedBlocks()) == 0 && e.hotLen() > 0 && e.hot.maxCreatedMs < start {
		e.hydratedFrom = max(e.hydratedFrom, e.hot.maxOffset)
		e.hot, e.hotWide = hotBuffer{}, false
		if e.ring != nil {
			e.ring.full = nil
		}
	}
	if e.ring == nil {
		return
	}
	if e.Len() == 0 {
		e.ring = nil
		return
	}
	g := 0
	// The newest generation stays: it takes the next hashes.
	for g < len(e.ring.gens)-1 && e.ring.gens[g].maxCreatedMs < start {
		g++
	}
	if g > 0 {
		e.ring.gens = slices.Delete(e.ring.gens, 0, g)
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
//
// A small entry's lookup is exact: a hash found counts as a maybe, one
// not found as a miss (never a false positive).
func (e *Entry) occurrencesIn(h *Hash, maybe uint32) (offsets []int64, ok bool) {
	hi, lo := split(h)
	if e.small() {
		offsets, ok = e.find(h, hi, lo, 0, 0)
		if len(offsets) == 0 && ok {
			e.misses++
		} else {
			e.maybes++
		}
		return offsets, ok
	}
	from, to := int64(math.MaxInt64), int64(math.MinInt64)
	for g, gen := range e.ring.gens {
		if maybe&(uint32(1)<<min(g, 31)) != 0 {
			from, to = min(from, gen.minOffset), max(to, gen.maxOffset)
		}
	}
	e.maybes++
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
	sealed := e.sealedBlocks()
	i, _ := slices.BinarySearchFunc(sealed, from, func(b block, off int64) int { return cmp.Compare(b.maxOffset, off) })
	for ; i < len(sealed); i++ {
		b := &sealed[i]
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
	inSealed := len(offsets)
	if e.ring != nil {
		for _, c := range e.ring.full {
			offsets = e.hot.scan(c, h, offsets)
		}
	}
	offsets = e.hot.scan(e.hot.open, h, offsets)
	if len(offsets) > inSealed && e.hotWide {
		return nil, false
	}
	return offsets, true
}

// scan appends the offsets of h's slots in c, a chunk of the hot buffer:
// a plain loop, as a small entry's every lookup runs it.
func (hb *hotBuffer) scan(c []hashAt, h *Hash, offsets []int64) []int64 {
	for i := range c {
		if c[i].h == *h {
			offsets = append(offsets, hb.base+int64(c[i].delta))
		}
	}
	return offsets
}

// takeCounters returns and resets the bloom front's lookup counters.
func (e *Entry) takeCounters() (misses, maybes, falsePositives int64) {
	misses, maybes, falsePositives = int64(e.misses), int64(e.maybes), int64(e.falsePositives)
	e.misses, e.maybes, e.falsePositives = 0, 0, 0
	return
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
func (e *Entry) Len() int {
	n := e.hotLen()
	if e.ring != nil {
		n += e.ring.sealedCount
	}
	return n
}

// hashAtBytes is a resident hash's footprint in the exact ring.
const hashAtBytes = 18

// Fixed costs an entry is charged beyond its slots and filters: its
// header with its cache slot and share of the cache's map (96 + 64 +
// ~30 bytes), and a large entry's ring with its generations' headers.
const (
	entryOverheadBytes = 192
	ringOverheadBytes  = 128
)

// Bytes is the entry's footprint: 18 bytes per slot of the exact ring
// (the hash and its offset, the hot buffer's headroom included), about 2
// per hash of bloom, and the fixed costs above.
func (e *Entry) Bytes() int64 {
	n := int64(cap(e.hot.open))*hashAtBytes + entryOverheadBytes
	if r := e.ring; r != nil {
		n += int64(len(r.sealed))*BlockCapacity*hashAtBytes + int64(len(r.full))*hotStep*hashAtBytes + ringOverheadBytes
		for _, g := range r.gens {
			n += g.bytes()
		}
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
	n := e.hotLen()
	for _, b := range e.sealedBlocks() {
		if b.maxCreatedMs >= start {
			n += len(b.hashes)
		}
	}
	return n
}

// eachSince calls f with every resident hash stored at or after offset
// from (a wide block's all: a superset does not matter to a bloom).
func (e *Entry) eachSince(from int64, f func(h *Hash)) {
	sealed := e.sealedBlocks()
	i, _ := slices.BinarySearchFunc(sealed, from, func(b block, off int64) int { return cmp.Compare(b.maxOffset, off) })
	visit := func(b *block) {
		for j := range b.hashes {
			if b.wide || b.offset(&b.hashes[j]) >= from {
				f(&b.hashes[j].h)
			}
		}
	}
	for ; i < len(sealed); i++ {
		visit(&sealed[i])
	}
	e.eachHot(func(s *hashAt, off int64) {
		if e.hotWide || off >= from {
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
