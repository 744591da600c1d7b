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

// bloomGen is one generation: a blocked bloom filter sized for capacity
// hashes, all seven probe bits of a hash inside one 64-byte block, so a
// definite miss costs one cache line.
type bloomGen struct {
	blocks       [][8]uint64
	capacity     int
	count        int
	maxCreatedMs int64 // newest created_at among its hashes
	// The offsets its hashes were stored at: a "maybe" needs to search
	// only the sealed blocks overlapping them.
	minOffset, maxOffset int64
}

func newBloomGen(capacity int) *bloomGen {
	nblocks := (capacity*bitsPerHash + bloomBlockBits - 1) / bloomBlockBits
	return &bloomGen{blocks: make([][8]uint64, nblocks), capacity: capacity}
}

// The hash itself picks the bits: xxh3 output is uniform, so no rehash is
// needed. The low 64 bits pick the block by multiply-shift (as uniform as
// a modulo, no division), the high 64 bits give seven 9-bit positions.
func (g *bloomGen) block(lo uint64) *[8]uint64 {
	top, _ := bits.Mul64(lo, uint64(len(g.blocks)))
	return &g.blocks[top]
}

func (g *bloomGen) add(h *Hash, offset, createdMs int64) {
	hi, lo := split(h)
	blk := g.block(lo)
	for range bloomProbes {
		blk[(hi>>6)&7] |= 1 << (hi & 63)
		hi >>= 9
	}
	if g.count == 0 {
		g.minOffset = offset
	}
	g.count++
	g.maxOffset = offset
	g.maxCreatedMs = max(g.maxCreatedMs, createdMs)
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
