package dedup

import (
	"bytes"
	"cmp"
	"encoding/binary"
	"slices"
)

// Hash is the 16-byte identity SQL compares: xxh3_128 of the
// transactionId, high 64 bits first (pgstore.HashTxnID).
type Hash = [16]byte

// BlockCapacity is the size of a sealed block: 4096 hashes, 64 KiB. A
// power of two, so the hot buffer, growing by doubling, is sealed with no
// copy at exactly this size; it is the largest allocation the exact ring
// makes.
const BlockCapacity = 4096

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

// Hydration is the full-window read an entry is born from
// (pgstore.Hydrate): every frame created within window + 5 s, with the
// allocator of the same snapshot.
type Hydration struct {
	LastOffset int64
	WindowMs   int64
	Ranges     []Range // in offset order
}

// block is a run of hashes with the span it covers. Sealed blocks are
// sorted and immutable; the hot buffer is in arrival order.
type block struct {
	hashes       []Hash
	maxOffset    int64
	maxCreatedMs int64
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
	hot    block
	gens   []*bloomGen // oldest first; the last takes new hashes
	count  int         // resident hashes

	// Lookup counters since the cache last collected them.
	misses, maybes, falsePositives int64
}

// NewEntry builds an entry from a full-window hydration: entries are only
// born complete.
func NewEntry(h Hydration) *Entry {
	e := &Entry{windowMs: h.WindowMs, verifiedUpto: h.LastOffset}
	// Everything below the first in-window frame is either purged (below
	// txns_start) or older than the window plus slack.
	e.hydratedFrom = h.LastOffset
	if len(h.Ranges) > 0 {
		e.hydratedFrom = h.Ranges[0].Base - 1
	}
	for _, r := range h.Ranges {
		e.append(r.Base, r.Hashes, r.CreatedMs)
	}
	return e
}

// Verified is the watermark a push of hashes may send as p_verified, at
// broker time nowMs: verifiedUpto when the entry vouches and none of the
// hashes is resident, else -1. hit reports a resident hash: a hint that
// the segment needs the full probe, never a verdict.
func (e *Entry) Verified(hashes []Hash, nowMs int64) (verified int64, hit bool) {
	e.Expire(nowMs)
	for i := range hashes {
		if e.contains(&hashes[i]) {
			return -1, true
		}
	}
	if !e.Vouching() {
		return -1, false
	}
	return e.verifiedUpto, false
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
// allocator after the push.
func (e *Entry) Learn(base, last int64, written []Hash, createdMs int64) {
	switch {
	case len(written) == 0:
		// Nothing written: the allocator can only have moved if another
		// writer did, and then we no longer know everything below it.
		if last > e.verifiedUpto {
			e.gap = true
		}
	case base == e.verifiedUpto+1:
		e.append(base, written, createdMs)
	case base > e.verifiedUpto+1:
		// Another broker interleaved. The push itself was right (SQL
		// probed past our watermark), but we do not know what it wrote.
		e.gap = true
	default:
		// An overlap is impossible under a monotone allocator: rebuild.
		e.rebuild = true
	}
	e.verifiedUpto = max(e.verifiedUpto, last)
}

func (e *Entry) append(base int64, hashes []Hash, createdMs int64) {
	for i := range hashes {
		if len(e.hot.hashes) == cap(e.hot.hashes) {
			// Explicit doubling from 16 (append's growth is not a power
			// of two past 256): the capacity reaches BlockCapacity exactly.
			grown := make([]Hash, len(e.hot.hashes), max(16, 2*cap(e.hot.hashes)))
			copy(grown, e.hot.hashes)
			e.hot.hashes = grown
		}
		e.hot.hashes = append(e.hot.hashes, hashes[i])
		e.hot.maxOffset = base + int64(i)
		e.hot.maxCreatedMs = max(e.hot.maxCreatedMs, createdMs)
		if len(e.hot.hashes) == BlockCapacity {
			e.seal()
		}
		if len(e.gens) == 0 || e.gens[len(e.gens)-1].full() {
			prev := 0
			if len(e.gens) > 0 {
				prev = e.gens[len(e.gens)-1].capacity
			}
			e.gens = append(e.gens, newBloomGen(nextCapacity(prev)))
		}
		e.gens[len(e.gens)-1].add(&hashes[i], base+int64(i), createdMs)
		e.count++
	}
	e.verifiedUpto = max(e.verifiedUpto, base+int64(len(hashes))-1)
}

// seal hands the full hot buffer over as a sorted block: the same backing
// array, sorted in place, no copy.
func (e *Entry) seal() {
	sortBlock(e.hot.hashes)
	e.sealed = append(e.sealed, e.hot)
	e.hot = block{}
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
	if len(e.sealed) == 0 && len(e.hot.hashes) > 0 && e.hot.maxCreatedMs < start {
		e.hydratedFrom = max(e.hydratedFrom, e.hot.maxOffset)
		e.count -= len(e.hot.hashes)
		e.hot = block{}
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

// contains is exact membership behind the bloom front: a definite bloom
// miss touches one cache line per live generation and neither the hot
// buffer nor any sealed block.
func (e *Entry) contains(h *Hash) bool {
	hi, lo := split(h)
	maybe := false
	for _, g := range e.gens {
		if !g.mayContain(hi, lo) {
			continue
		}
		// Only the blocks holding this generation's offsets can hold h
		// if the generation does: a false positive in a small generation
		// costs one or two block searches, not the whole ring's.
		maybe = true
		if e.containsIn(h, hi, lo, g.minOffset, g.maxOffset) {
			e.maybes++
			return true
		}
	}
	if !maybe {
		e.misses++
		return false
	}
	e.maybes++
	e.falsePositives++
	return false
}

// containsIn searches the blocks that overlap offsets [from, to]. Blocks
// are in offset order, each covering (previous maxOffset, maxOffset].
func (e *Entry) containsIn(h *Hash, hi, lo uint64, from, to int64) bool {
	i, _ := slices.BinarySearchFunc(e.sealed, from, func(b block, off int64) int { return cmp.Compare(b.maxOffset, off) })
	for ; i < len(e.sealed); i++ {
		if searchSorted(e.sealed[i].hashes, hi, lo) {
			return true
		}
		if e.sealed[i].maxOffset >= to {
			return false
		}
	}
	for i := range e.hot.hashes {
		if e.hot.hashes[i] == *h {
			return true
		}
	}
	return false
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
	for i := range e.hot.hashes {
		if e.hot.hashes[i] == *h {
			return true
		}
	}
	hi, lo := binary.BigEndian.Uint64(h[:8]), binary.BigEndian.Uint64(h[8:])
	for i := range e.sealed {
		if searchSorted(e.sealed[i].hashes, hi, lo) {
			return true
		}
	}
	return false
}

// searchSorted is a binary search over hashes sorted as big-endian
// (hi, lo) pairs, the order bytes.Compare gives; comparing two uint64s
// instead of 16 bytes through a closure is ~5× faster. xxh3 output is
// uniform, so the search starts in a narrow band around where hi should
// sit (±4σ of a full block's spread), and widens to the whole block only
// when the band's ends show hi lies outside it.
func searchSorted(hs []Hash, hi, lo uint64) bool {
	const band = 128
	i, j := 0, len(hs)
	if j > 4*band {
		guess := int((hi >> 32) * uint64(j) >> 32)
		a, b := max(0, guess-band), min(j, guess+band)
		if (a == 0 || lessHash(hs[a-1], hi, lo)) && (b == j || !lessHash(hs[b], hi, lo)) {
			i, j = a, b
		}
	}
	for i < j {
		m := int(uint(i+j) >> 1)
		mh := binary.BigEndian.Uint64(hs[m][:8])
		if mh < hi || mh == hi && binary.BigEndian.Uint64(hs[m][8:]) < lo {
			i = m + 1
		} else {
			j = m
		}
	}
	return i < len(hs) && binary.BigEndian.Uint64(hs[i][:8]) == hi && binary.BigEndian.Uint64(hs[i][8:]) == lo
}

// lessHash reports x < (hi, lo).
func lessHash(x Hash, hi, lo uint64) bool {
	xh := binary.BigEndian.Uint64(x[:8])
	return xh < hi || xh == hi && binary.BigEndian.Uint64(x[8:]) < lo
}

// Len is the number of resident hashes.
func (e *Entry) Len() int { return e.count }

// Bytes is the entry's footprint, dominated by the 16 bytes per hash of
// the exact ring plus about 2 per hash of bloom.
func (e *Entry) Bytes() int64 {
	n := int64(len(e.sealed))*BlockCapacity*16 + int64(cap(e.hot.hashes))*16 + 256
	for _, g := range e.gens {
		n += g.bytes()
	}
	return n
}

// Watermarks returns (hydratedFrom, verifiedUpto).
func (e *Entry) Watermarks() (hydratedFrom, verifiedUpto int64) {
	return e.hydratedFrom, e.verifiedUpto
}

// sortBlock sorts a full hot buffer in place into the order searchSorted
// expects. A comparison sort of 4096 16-byte keys was ~85 % of an insert's
// cost; xxh3 output is uniform, so an in-place radix pass on the first
// byte (American flag sort) leaves buckets of ~16 that insertion sort
// finishes. A bucket grown large (transactionIds chosen to share a first
// hash byte) falls back to the comparison sort, so no input is quadratic.
func sortBlock(hs []Hash) {
	var count, next [256]int
	for i := range hs {
		count[hs[i][0]]++
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
			v := hs[next[b]]
			for d := int(v[0]); d != b; d = int(v[0]) {
				hs[next[d]], v = v, hs[next[d]]
				next[d]++
			}
			hs[next[b]] = v
			next[b]++
		}
	}
	for b := range 256 {
		bucket := hs[start[b] : start[b]+count[b]]
		if len(bucket) > 64 {
			slices.SortFunc(bucket, func(a, b Hash) int { return bytes.Compare(a[:], b[:]) })
			continue
		}
		for i := 1; i < len(bucket); i++ {
			v := bucket[i]
			hi, lo := split(&v)
			j := i
			for j > 0 && greaterHash(&bucket[j-1], hi, lo) {
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
