package dedup

import (
	"encoding/binary"
	"math/bits"
)

// Bloom front parameters (docs/design.md, "The bloom front").
const (
	bitsPerHash    = 16
	bloomProbes    = 7
	bloomBlockBits = 512 // one 64-byte cache line
	// Generation capacities tier up by 8× from BlockCapacity to this
	// ceiling.
	maxGenerationCapacity = 1_000_000
	generationTier        = 8
)

// bloomGen is one generation: a blocked bloom filter for up to capacity
// hashes, all seven probe bits of a hash inside one 64-byte block, so a
// definite miss costs one cache line. Its bits are allocated for sized
// hashes at 16 bits each: a generation filled as it opens is sized for
// what it will hold; the open one of a growing entry starts small and
// grows by half (rebuilt from the ring), so an entry never carries
// a large filter for a few hashes.
type bloomGen struct {
	blocks       [][8]uint64
	capacity     int
	sized        int // hashes the blocks are sized for, at most capacity
	count        int
	maxCreatedMs int64 // newest created_at among its hashes
	// The offsets its hashes were stored at: a "maybe" needs to search
	// only the sealed blocks overlapping them.
	minOffset, maxOffset int64
}

// bloomInitial is what an open generation is first sized for when its
// final count is unknown: 256 hashes, 512 bytes.
const bloomInitial = 256

// newBloomGen makes a generation of the given capacity, sized for
// expected hashes when that is known (> 0).
func newBloomGen(capacity, expected int) *bloomGen {
	sized := bloomInitial
	if expected > 0 {
		sized = expected
	}
	sized = min(capacity, sized)
	return &bloomGen{blocks: make([][8]uint64, blocksFor(sized)), capacity: capacity, sized: sized}
}

func blocksFor(hashes int) int {
	return (hashes*bitsPerHash + bloomBlockBits - 1) / bloomBlockBits
}

// grow resizes the generation for half as many hashes again (at most its
// capacity) and adds again every hash it holds, from the ring: resident
// hashes stored at or after its first offset (a superset is harmless).
// The generation is the newest, so its hashes are the ring's last ones.
func (g *bloomGen) grow(e *Entry) {
	g.sized = min(g.capacity, max(g.count, g.sized+g.sized/2))
	g.blocks = make([][8]uint64, blocksFor(g.sized))
	e.eachSince(g.minOffset, func(h *Hash) { g.set(h) })
}

// The hash itself picks the bits: xxh3 output is uniform, so no rehash is
// needed. The low 64 bits pick the block by multiply-shift (as uniform as
// a modulo, no division), the high 64 bits give seven 9-bit positions.
func (g *bloomGen) block(lo uint64) *[8]uint64 {
	top, _ := bits.Mul64(lo, uint64(len(g.blocks)))
	return &g.blocks[top]
}

func (g *bloomGen) add(h *Hash, offset, createdMs int64) {
	g.set(h)
	if g.count == 0 {
		g.minOffset = offset
	}
	g.count++
	g.maxOffset = offset
	g.maxCreatedMs = max(g.maxCreatedMs, createdMs)
}

// set sets h's seven bits.
func (g *bloomGen) set(h *Hash) {
	hi, lo := split(h)
	blk := g.block(lo)
	for range bloomProbes {
		blk[(hi>>6)&7] |= 1 << (hi & 63)
		hi >>= 9
	}
}

// mayContain is false only when the hash (hi, lo) was never added (no
// false negatives). Branch-free over the seven bits: an absent hash fails
// an unpredictable one of them, and a mispredicted early exit costs more
// than the six loads it saves, all from the one cache line.
func (g *bloomGen) mayContain(hi, lo uint64) bool {
	blk := g.block(lo)
	var missing uint64
	for range bloomProbes {
		missing |= ^blk[(hi>>6)&7] & (1 << (hi & 63))
		hi >>= 9
	}
	return missing == 0
}

// split gives a hash's two halves as integers, in the byte order SQL and
// the sealed blocks sort by.
func split(h *Hash) (hi, lo uint64) {
	return binary.BigEndian.Uint64(h[:8]), binary.BigEndian.Uint64(h[8:])
}

func (g *bloomGen) full() bool { return g.count >= g.capacity }

func (g *bloomGen) bytes() int64 { return int64(len(g.blocks)) * 64 }

// nextCapacity tiers a new generation up from the one that filled.
func nextCapacity(prev int) int {
	if prev == 0 {
		return BlockCapacity
	}
	return min(prev*generationTier, maxGenerationCapacity)
}
