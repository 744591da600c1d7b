package dedup

import (
	"encoding/binary"
	"math/bits"
)

// Bloom front parameters (deduplication.md, "The bloom front").
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
}

func newBloomGen(capacity int) *bloomGen {
	nblocks := (capacity*bitsPerHash + bloomBlockBits - 1) / bloomBlockBits
	return &bloomGen{blocks: make([][8]uint64, nblocks), capacity: capacity}
}

// bloomSpots derives the block and the seven bit positions from the hash
// itself: xxh3 output is uniform, so no rehash is needed. The low 64 bits
// pick the block, the high 64 bits give seven 9-bit positions.
func bloomSpots(h *Hash, nblocks int) (block int, spots [bloomProbes]uint16) {
	lo := binary.BigEndian.Uint64(h[8:])
	hi := binary.BigEndian.Uint64(h[:8])
	// Multiply-shift instead of a modulo: as uniform, no division.
	top, _ := bits.Mul64(lo, uint64(nblocks))
	block = int(top)
	for i := range spots {
		spots[i] = uint16(hi & (bloomBlockBits - 1))
		hi >>= 9
	}
	return block, spots
}

func (g *bloomGen) add(h *Hash, createdMs int64) {
	b, spots := bloomSpots(h, len(g.blocks))
	blk := &g.blocks[b]
	for _, bit := range spots {
		blk[bit>>6] |= 1 << (bit & 63)
	}
	g.count++
	g.maxCreatedMs = max(g.maxCreatedMs, createdMs)
}

// mayContain is false only when h was never added (no false negatives).
func (g *bloomGen) mayContain(h *Hash) bool {
	b, spots := bloomSpots(h, len(g.blocks))
	blk := &g.blocks[b]
	for _, bit := range spots {
		if blk[bit>>6]&(1<<(bit&63)) == 0 {
			return false
		}
	}
	return true
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
