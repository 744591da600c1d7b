package ingest

import (
	"context"
	"fmt"
	"runtime"
	"strconv"
	"sync"
	"testing"

	"github.com/rs/zerolog"

	"github.com/queengate/queengate/model"
)

// memStore is an in-memory log for measuring ingest's own memory: every
// message is new, partitions exist beforehand. Its embedded Store is nil:
// nothing else is called.
type memStore struct {
	Store
	mu   sync.Mutex
	ids  map[string]int64
	last []int64 // by id
}

func newMemStore(queue string, partitions int) *memStore {
	s := &memStore{ids: make(map[string]int64, partitions), last: make([]int64, partitions+1)}
	for i := range partitions {
		s.ids[queue+"\x1f"+strconv.Itoa(i)] = int64(i + 1)
		s.last[i+1] = -1
	}
	return s
}

func (s *memStore) EnsurePartitions(_ context.Context, queues, partitions []string) ([]model.Partition, []bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	parts := make([]model.Partition, len(queues))
	for i := range queues {
		id := s.ids[queues[i]+"\x1f"+partitions[i]]
		parts[i] = model.Partition{ID: id, WindowSeconds: 3600, LastOffset: s.last[id]}
	}
	return parts, make([]bool, len(queues)), nil // they exist beforehand
}

// Epoch is always 1: the memory never changes.
func (s *memStore) Epoch(context.Context) (uint64, string) { return 1, "memory" }

func (s *memStore) PushUnder(_ context.Context, _ uint64, frames []model.Frame) ([]model.FrameResult, uint64, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]model.FrameResult, len(frames))
	for i, fr := range frames {
		base := s.last[fr.PartitionID] + 1
		r := model.FrameResult{BaseOffset: base, Outcomes: make([]model.Outcome, len(fr.Hashes))}
		for k := range fr.Hashes {
			r.Outcomes[k] = model.Outcome{Offset: base + int64(k)}
		}
		s.last[fr.PartitionID] += int64(len(fr.Hashes))
		r.LastOffset = s.last[fr.PartitionID]
		out[i] = r
	}
	return out, 1, nil
}

func (s *memStore) HydrateMany(_ context.Context, ids []int64) (map[int64]model.Hydration, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make(map[int64]model.Hydration, len(ids))
	for _, id := range ids {
		out[id] = model.Hydration{LastOffset: s.last[id], WindowSeconds: 3600, Epoch: 1}
	}
	return out, nil
}

// BenchmarkIdlePartitions is what partitions cost once idle: one
// 10-message request to each of n partitions, every answer in, then the
// heap held by the ingester (its shards' partition state, buffers,
// tallies; and the dedup cache's entries when it is on), per partition.
func BenchmarkIdlePartitions(b *testing.B) {
	for _, n := range []int{10_000, 100_000} {
		for _, cache := range []bool{false, true} {
			b.Run(fmt.Sprintf("partitions=%d/cache=%v", n, cache), func(b *testing.B) {
				for b.Loop() {
					b.ReportMetric(idleBytes(b, n, cache), "heap-B/partition")
				}
			})
		}
	}
}

// TestIdlePartitionsKeepNoBuffers: once its answers are out, a
// partition keeps neither its buffer nor its requests (about 3.4 KB for a
// 10-message request, before); what is left is its memo and tally. Over
// 100,000 partitions (about 465 bytes each): over 10,000 the fixed
// costs made it 942, too near the bound for a heap read on a busy machine.
func TestIdlePartitionsKeepNoBuffers(t *testing.T) {
	if perPartition := idleBytes(t, 100_000, false); perPartition > 1000 {
		t.Errorf("an idle partition holds %.0f bytes of the heap, want under 1000", perPartition)
	}
}

// idleBytes is the heap an ingester holds per partition after one
// 10-message request to each of n partitions, every answer in.
func idleBytes(b testing.TB, n int, cache bool) float64 {
	const queue = "idle"
	store := newMemStore(queue, n)
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	// No tail: it keeps committed messages on purpose, within its own
	// budget (--tail-mb), as the cache keeps hashes within its own.
	in, err := New(store, Config{NoCache: !cache, NoTail: true}, zerolog.Nop(), nil)
	if err != nil {
		b.Fatal(err)
	}
	if err := in.Start(context.Background()); err != nil {
		b.Fatal(err)
	}
	var answered sync.WaitGroup
	data := []byte(`{"n":1}`)
	for i := range n {
		req := &Request{Queue: queue, Partition: strconv.Itoa(i), Messages: make([]model.Incoming, 10)}
		for k := range req.Messages {
			req.Messages[k] = model.Incoming{TxnID: fmt.Sprintf("%d-%d", i, k), Data: data}
		}
		answered.Add(1)
		req.Done = func([]model.PushOutcome) { answered.Done() }
		for in.Submit(req) != nil {
			runtime.Gosched() // a full shard: wait for it to drain
		}
	}
	answered.Wait()
	for in.Buffered() > 0 {
		runtime.Gosched()
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	in.Stop()
	runtime.KeepAlive(store)
	return float64(int64(after.HeapAlloc)-int64(before.HeapAlloc)) / float64(n)
}
