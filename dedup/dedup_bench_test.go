package dedup

import (
	"fmt"
	"runtime"
	"testing"
	"time"
)

// A full-rate window: 1,000,000 resident hashes, hundreds of sealed
// blocks, four bloom generations (4096, 32768, 262144, 1M).
const benchResident = 1_000_000

func benchEntry(b *testing.B) *Entry {
	b.Helper()
	e := NewEntry(Hydration{LastOffset: -1, WindowMs: 3600_000})
	const frame = 1000
	for off := 0; off < benchResident; off += frame {
		e.Learn(int64(off), int64(off+frame-1), hashes(uint64(off), frame), t0)
	}
	return e
}

// containsExact looks h up in the exact ring alone, without the bloom
// front: a linear scan of the hot buffer and a binary search of every
// sealed block (the benchmark's ring-only baseline).
func (e *Entry) containsExact(h *Hash) bool {
	found := false
	e.eachHot(func(s *hashAt, _ int64) { found = found || s.h == *h })
	if found {
		return true
	}
	hi, lo := split(h)
	sealed := e.sealedBlocks()
	for i := range sealed {
		s := sealed[i].hashes
		if j := searchSorted(s, hi, lo); j < len(s) && s[j].h == *h {
			return true
		}
	}
	return false
}

// BenchmarkAbsentLookup compares a definite miss through the bloom front,
// through the exact ring alone, and in a Go map of the same hashes.
func BenchmarkAbsentLookup(b *testing.B) {
	e := benchEntry(b)
	absent := hashes(1<<40, 1<<16)
	b.Run("bloom+ring", func(b *testing.B) {
		i := 0
		for b.Loop() {
			if e.contains(&absent[i&(len(absent)-1)]) {
				b.Fatal("false hit")
			}
			i++
		}
	})
	b.Run("ring-only", func(b *testing.B) {
		i := 0
		for b.Loop() {
			if e.containsExact(&absent[i&(len(absent)-1)]) {
				b.Fatal("false hit")
			}
			i++
		}
	})
	b.Run("go-map", func(b *testing.B) {
		m := make(map[Hash]struct{}, benchResident)
		for _, x := range hashes(0, benchResident) {
			m[x] = struct{}{}
		}
		i := 0
		b.ResetTimer()
		for b.Loop() {
			if _, ok := m[absent[i&(len(absent)-1)]]; ok {
				b.Fatal("false hit")
			}
			i++
		}
	})
	// The two interleaved in small chunks, so machine noise (these runners
	// are shared) hits both alike: the ratio is the figure to quote.
	b.Run("bloom÷map", func(b *testing.B) {
		m := make(map[Hash]struct{}, benchResident)
		for _, x := range hashes(0, benchResident) {
			m[x] = struct{}{}
		}
		var inBloom, inMap time.Duration
		i := 0
		b.ResetTimer()
		for b.Loop() {
			t := time.Now()
			for range 1024 {
				if e.contains(&absent[i&(len(absent)-1)]) {
					b.Fatal("false hit")
				}
				i++
			}
			inBloom += time.Since(t)
			i -= 1024
			t = time.Now()
			for range 1024 {
				if _, ok := m[absent[i&(len(absent)-1)]]; ok {
					b.Fatal("false hit")
				}
				i++
			}
			inMap += time.Since(t)
		}
		b.ReportMetric(float64(inBloom)/float64(inMap), "bloom/map")
		b.ReportMetric(float64(inBloom.Nanoseconds())/float64(b.N*1024), "bloom-ns/lookup")
		b.ReportMetric(float64(inMap.Nanoseconds())/float64(b.N*1024), "map-ns/lookup")
	})
	maybe := 0
	for i := range absent {
		for _, g := range e.generations() {
			if g.mayContain(split(&absent[i])) {
				maybe++
				break
			}
		}
	}
	b.ReportMetric(float64(maybe)/float64(len(absent))*100, "bloom-false-positive-%")
	b.ReportMetric(float64(len(e.generations())), "generations")
}

func BenchmarkPresentLookup(b *testing.B) {
	e := benchEntry(b)
	present := hashes(0, 1<<16)
	i := 0
	for b.Loop() {
		if !e.contains(&present[i&(len(present)-1)]) {
			b.Fatal("miss")
		}
		i++
	}
}

func BenchmarkInsert(b *testing.B) {
	e := NewEntry(Hydration{LastOffset: -1, WindowMs: 3600_000})
	frame := hashes(0, 1000)
	off := int64(0)
	b.ReportAllocs()
	for b.Loop() {
		// Fresh hashes each frame, so the ring and the bloom grow.
		frame[0][0]++
		e.Learn(off, off+999, frame, t0)
		off += 1000
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*1000), "ns/hash")
}

// BenchmarkMemoryPerHash reports the resident bytes per hash, by the
// cache's own accounting and by the Go heap, at entry sizes from one
// block to 1M (grown by 100-hash pushes, as a busy partition's entry is),
// with a map baseline at 1M.
func BenchmarkMemoryPerHash(b *testing.B) {
	for _, n := range []int{4096, 5000, 13_000, 50_000, 300_000, benchResident} {
		b.Run(fmt.Sprintf("hashes=%d", n), func(b *testing.B) {
			for b.Loop() {
				var before, after runtime.MemStats
				runtime.GC()
				runtime.ReadMemStats(&before)
				e := NewEntry(Hydration{LastOffset: -1, WindowMs: 3600_000})
				for off := 0; off < n; off += 100 {
					k := min(100, n-off)
					e.Learn(int64(off), int64(off+k-1), hashes(uint64(off), uint64(k)), t0)
				}
				runtime.GC()
				runtime.ReadMemStats(&after)
				b.ReportMetric(float64(e.Bytes())/float64(n), "accounted-B/hash")
				b.ReportMetric(float64(after.HeapAlloc-before.HeapAlloc)/float64(n), "heap-B/hash")
				runtime.KeepAlive(e)
			}
		})
	}
	b.Run("map/hashes=1000000", func(b *testing.B) {
		for b.Loop() {
			var before, after runtime.MemStats
			runtime.GC()
			runtime.ReadMemStats(&before)
			m := make(map[Hash]struct{})
			for _, x := range hashes(0, benchResident) {
				m[x] = struct{}{}
			}
			runtime.GC()
			runtime.ReadMemStats(&after)
			b.ReportMetric(float64(after.HeapAlloc-before.HeapAlloc)/benchResident, "heap-B/hash")
			runtime.KeepAlive(m)
		}
	})
}

// BenchmarkCandidates is a lookup of a 100-hash push with 20 resident
// hashes (a retry share of 20 %) in a 1M-hash entry: what narrowing a
// probe costs the gateway.
func BenchmarkCandidates(b *testing.B) {
	e := benchEntry(b)
	push := hashes(1<<40, 100)
	for i := 0; i < 100; i += 5 {
		push[i] = h(uint64(i * 9973))
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, cands, _ := e.Verified(push, t0); len(cands) != 20 {
			b.Fatalf("%d candidates", len(cands))
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*100), "ns/hash")
}

// BenchmarkMemoryPerPartition is the whole cache's heap (map, slots,
// entries) per partition and per hash, for n partitions of k hashes each,
// every entry born of an empty hydration and grown by pushes (frames of 10
// hashes, 100 for large entries), as a partition's entry is on first
// contact. The budget is large enough that nothing is evicted.
func BenchmarkMemoryPerPartition(b *testing.B) {
	for _, k := range []int{1, 4, 16, 256, 4096, 5000} {
		for _, n := range []int{10_000, 100_000, 1_000_000} {
			if n*k > 50_000_000 {
				continue
			}
			b.Run(fmt.Sprintf("hashes=%d/partitions=%d", k, n), func(b *testing.B) {
				for b.Loop() {
					benchPartitions(b, n, k)
				}
			})
		}
	}
}

func benchPartitions(b *testing.B, n, k int) {
	clock := &fakeClock{now: time.UnixMilli(t0)}
	frame := min(k, 10)
	if k > 256 {
		frame = 100
	}
	push := hashes(0, uint64(frame))
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	c := New(Config{BudgetBytes: 1 << 40, Now: clock.Now})
	for pid := int64(1); pid <= int64(n); pid++ {
		if d := c.Decide(pid, minute, nil); !d.Hydrate {
			b.Fatalf("first contact: %+v", d)
		}
		c.Install(pid, Hydration{LastOffset: -1, WindowMs: minute})
		for off := 0; off < k; off += frame {
			m := min(frame, k-off)
			push[0][0], push[0][1] = byte(pid), byte(pid>>8) // distinct hashes per partition
			push[0][2] = byte(off)
			c.Learn(pid, int64(off), int64(off+m-1), push[:m])
		}
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	heap := float64(after.HeapAlloc - before.HeapAlloc)
	st := c.Stats()
	if st.ResidentHashes != int64(n*k) {
		b.Fatalf("%d resident hashes, want %d", st.ResidentHashes, n*k)
	}
	b.ReportMetric(heap/float64(n), "heap-B/partition")
	b.ReportMetric(heap/float64(n*k), "heap-B/hash")
	b.ReportMetric(float64(st.ResidentBytes)/float64(n), "accounted-B/partition")
	runtime.KeepAlive(c)
}

// BenchmarkMillionPartitions runs a million partitions of 16 hashes
// through the default budget (runManyPartitions): two rounds faster than
// the guard (suppression), then two slower (eviction), reporting what
// the gate did and the heap.
func BenchmarkMillionPartitions(b *testing.B) {
	for b.Loop() {
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		c, clock, _ := newTestCache(0)
		fast := runManyPartitions(b, c, clock, 1_000_000, 0, 2, time.Microsecond)
		clock.Add(time.Minute)
		slow := runManyPartitions(b, c, clock, 1_000_000, 2, 2, 10*time.Microsecond)
		runtime.GC()
		runtime.ReadMemStats(&after)
		b.ReportMetric(float64(fast.entries), "entries-after-fast")
		b.ReportMetric(float64(fast.suppressedDecisions), "suppressed-decisions")
		b.ReportMetric(float64(slow.evictions), "evictions")
		b.ReportMetric(float64(slow.hydrations), "hydrations")
		b.ReportMetric(float64(slow.peakResident)/(1<<20), "peak-resident-MiB")
		b.ReportMetric(float64(after.HeapAlloc-before.HeapAlloc)/(1<<20), "heap-MiB")
		runtime.KeepAlive(c)
	}
}

// BenchmarkSmallEntryVerified is a decision for a 10-hash push of new
// hashes on an entry of k hashes grown by 10-hash pushes: below smallMax
// a scan of one array, above it the bloom front.
func BenchmarkSmallEntryVerified(b *testing.B) {
	for _, k := range []int{4, 16, 64, 128} {
		b.Run(fmt.Sprintf("hashes=%d", k), func(b *testing.B) {
			e := NewEntry(Hydration{LastOffset: -1, WindowMs: 3600_000})
			for off := 0; off < k; off += 10 {
				n := min(10, k-off)
				e.Learn(int64(off), int64(off+n-1), hashes(uint64(off), uint64(n)), t0)
			}
			push := hashes(1<<40, 10)
			for b.Loop() {
				if v, _, _ := e.Verified(push, t0); v != int64(k-1) {
					b.Fatalf("verified %d", v)
				}
			}
		})
	}
}
