package ingest_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/queengate/queengate/dedup"
	"github.com/queengate/queengate/ingest"
	"github.com/queengate/queengate/internal/checkfor"
	"github.com/queengate/queengate/internal/pgtest"
	"github.com/queengate/queengate/model"
	"github.com/queengate/queengate/pgstore"
)

func TestMain(m *testing.M) { pgtest.Run(m) }

// countingStore is the real store, counting the bundles sent through it.
type countingStore struct {
	*pgstore.Store
	pushes   atomic.Int64
	frames   atomic.Int64
	probes   atomic.Int64 // frames whose SQL probe ran
	verified atomic.Int64 // frames sent with p_verified >= 0
	hydrates atomic.Int64 // partitions hydrated
	// round trips resolving partitions and hydrating them
	ensureCalls, hydrateCalls atomic.Int64
}

func (s *countingStore) HydrateMany(ctx context.Context, pids []int64) (map[int64]model.Hydration, error) {
	s.hydrates.Add(int64(len(pids)))
	s.hydrateCalls.Add(1)
	return s.Store.HydrateMany(ctx, pids)
}

func (s *countingStore) EnsurePartitions(ctx context.Context, queues, partitions []string) ([]model.Partition, []bool, error) {
	s.ensureCalls.Add(1)
	return s.Store.EnsurePartitions(ctx, queues, partitions)
}

func (s *countingStore) PushUnder(ctx context.Context, n uint64, frames []model.Frame) ([]model.FrameResult, uint64, error) {
	s.pushes.Add(1)
	s.frames.Add(int64(len(frames)))
	for _, fr := range frames {
		if fr.Verified >= 0 {
			s.verified.Add(1)
		}
	}
	res, at, err := s.Store.PushUnder(ctx, n, frames)
	for _, r := range res {
		if r.Probed() {
			s.probes.Add(1)
		}
	}
	return res, at, err
}

type testBundle struct {
	store *countingStore
	ing   *ingest.Ingester
	queue string
}

func setup(t *testing.T, cfg ingest.Config) *testBundle {
	t.Helper()
	return setupLogged(t, cfg, zerolog.New(zerolog.NewTestWriter(t)))
}

// setupLogged is setup with the ingester logging to log.
func setupLogged(t *testing.T, cfg ingest.Config, log zerolog.Logger) *testBundle {
	t.Helper()
	store := &countingStore{Store: pgtest.Store(t, pgtest.SharedURL(t))}
	ing, err := ingest.New(store, cfg, log, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := ing.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(ing.Stop)
	return &testBundle{store: store, ing: ing, queue: pgtest.UniqueName(t)}
}

// submit sends a request and returns a channel with its results.
func (b *testBundle) submit(t *testing.T, partition string, ids ...string) <-chan []model.PushOutcome {
	t.Helper()
	ch, err := b.trySubmit(partition, ids...)
	if err != nil {
		t.Fatal(err)
	}
	return ch
}

func (b *testBundle) trySubmit(partition string, ids ...string) (<-chan []model.PushOutcome, error) {
	ch := make(chan []model.PushOutcome, 1)
	req := &ingest.Request{Queue: b.queue, Partition: partition, Done: func(r []model.PushOutcome) { ch <- r }}
	for _, id := range ids {
		req.Messages = append(req.Messages, model.Incoming{TxnID: id, Data: []byte(`{"id":"` + id + `"}`)})
	}
	return ch, b.ing.Submit(req)
}

func wait(t *testing.T, ch <-chan []model.PushOutcome) []model.PushOutcome {
	t.Helper()
	select {
	case r := <-ch:
		return r
	case <-time.After(30 * time.Second):
		t.Fatal("no answer within 30 s")
		return nil
	}
}

func statuses(rs []model.PushOutcome) string {
	s := ""
	for i, r := range rs {
		if i > 0 {
			s += ","
		}
		s += r.Status.String()
	}
	return s
}

func TestLeaderAndFollowersAcrossFusedRequests(t *testing.T) {
	t.Parallel()
	b := setup(t, ingest.Config{Shards: 1, FlushSize: 6, Linger: time.Hour})
	// Three requests fused into one buffer of six messages: "a" repeats
	// across requests (layer 1), and every result follows the leader.
	r1 := b.submit(t, "p", "a", "b")
	r2 := b.submit(t, "p", "a", "c")
	r3 := b.submit(t, "p", "c", "a")
	got1, got2, got3 := wait(t, r1), wait(t, r2), wait(t, r3)
	if s := statuses(got1) + "|" + statuses(got2) + "|" + statuses(got3); s != "queued,queued|duplicate,queued|duplicate,duplicate" {
		t.Fatalf("statuses %s", s)
	}
	if got2[0].Offset != got1[0].Offset || got3[1].Offset != got1[0].Offset || got3[0].Offset != got2[1].Offset {
		t.Errorf("followers do not name their leaders: %+v %+v %+v", got1, got2, got3)
	}
	if n := b.store.pushes.Load(); n != 1 {
		t.Errorf("%d bundles for one full buffer, want 1", n)
	}
}

func TestFullBufferFlushesEveryReadyPartitionInOneBundle(t *testing.T) {
	t.Parallel()
	b := setup(t, ingest.Config{Shards: 1, FlushSize: 2, Linger: time.Hour})
	r1 := b.submit(t, "one", "x")
	r2 := b.submit(t, "two", "y")
	r3 := b.submit(t, "one", "z") // fills "one": the flush carries "two" too
	for _, r := range []<-chan []model.PushOutcome{r1, r2, r3} {
		if s := statuses(wait(t, r)); s != "queued" {
			t.Errorf("status %s", s)
		}
	}
	if p, s := b.store.pushes.Load(), b.store.frames.Load(); p != 1 || s != 2 {
		t.Errorf("%d bundles with %d frames, want 1 bundle of 2", p, s)
	}
}

func TestLingerFlushesAPartialBuffer(t *testing.T) {
	t.Parallel()
	b := setup(t, ingest.Config{Shards: 1, FlushSize: 1000, Linger: 5 * time.Millisecond})
	if s := statuses(wait(t, b.submit(t, "p", "lonely"))); s != "queued" {
		t.Errorf("status %s", s)
	}
}

func TestArrivalOrderIsOffsetOrder(t *testing.T) {
	t.Parallel()
	b := setup(t, ingest.Config{FlushSize: 7, Linger: time.Millisecond})
	var chans []<-chan []model.PushOutcome
	for i := range 200 {
		chans = append(chans, b.submit(t, "ordered", fmt.Sprintf("o%d-a", i), fmt.Sprintf("o%d-b", i)))
	}
	last := int64(-1)
	for i, ch := range chans {
		for _, r := range wait(t, ch) {
			if r.Status != model.StatusQueued || r.Offset != last+1 {
				t.Fatalf("request %d: %v at %d after %d; want queued at %d", i, r.Status, r.Offset, last, last+1)
			}
			last = r.Offset
		}
	}
}

func TestWindowZeroStoresRepeats(t *testing.T) {
	t.Parallel()
	b := setup(t, ingest.Config{Shards: 1, FlushSize: 4, Linger: time.Hour})
	ctx := context.Background()
	if _, err := b.store.EnsurePartition(ctx, b.queue, "p"); err != nil {
		t.Fatal(err)
	}
	if _, _, err := b.store.Configure(ctx, b.queue, model.OptionsPatch{DedupWindowSeconds: ptr(0)}, false); err != nil {
		t.Fatal(err)
	}
	got := wait(t, b.submit(t, "p", "r", "r", "s", "r"))
	if s := statuses(got); s != "queued,queued,queued,queued" {
		t.Fatalf("window 0: statuses %s, want every repeat stored", s)
	}
	for i, r := range got {
		if r.Offset != int64(i) {
			t.Errorf("message %d at offset %d", i, r.Offset)
		}
	}
}

func TestOverloadRefusesAtOnceAndRecovers(t *testing.T) {
	t.Parallel()
	b := setup(t, ingest.Config{Shards: 1, MaxBuffered: 5, Linger: time.Millisecond})
	ctx := context.Background()
	// Hold the partition's row lock so the first flush stays in flight.
	p, err := b.store.EnsurePartition(ctx, b.queue, "p")
	if err != nil {
		t.Fatal(err)
	}
	tx, err := b.store.Pool().Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(ctx, "SELECT 1 FROM queen.log_partitions WHERE id = $1 FOR UPDATE", p.ID); err != nil {
		t.Fatal(err)
	}
	held := b.submit(t, "p", "1", "2", "3", "4")
	if _, err := b.trySubmit("p", "5", "6"); !errors.Is(err, ingest.ErrOverloaded) {
		t.Fatalf("submit past MaxBuffered: err = %v, want ErrOverloaded", err)
	}
	fits := b.submit(t, "p", "5")
	if err := tx.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	if s := statuses(wait(t, held)) + "|" + statuses(wait(t, fits)); s != "queued,queued,queued,queued|queued" {
		t.Errorf("statuses %s", s)
	}
	// The buffer is released just after the answers are handed over.
	checkfor.Check(t, time.Minute, checkfor.Cond("nothing buffered once every answer is in", func() bool { return b.ing.Buffered() == 0 }))
	if s := statuses(wait(t, b.submit(t, "p", "6"))); s != "queued" {
		t.Errorf("after the overload cleared: %s", s)
	}
}

func TestStopAnswersEverythingAcceptedThenRefuses(t *testing.T) {
	t.Parallel()
	b := setup(t, ingest.Config{Shards: 2, FlushSize: 1 << 20, Linger: time.Hour})
	var (
		chans []<-chan []model.PushOutcome
		mu    sync.Mutex
	)
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := range 50 {
				ch := b.submit(t, fmt.Sprintf("p%d", i%5), fmt.Sprintf("stop-%d-%d", g, i))
				mu.Lock()
				chans = append(chans, ch)
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	// Nothing is due (an hour's linger): Stop must flush it all.
	b.ing.Stop()
	for _, ch := range chans {
		select {
		case r := <-ch:
			if r[0].Status != model.StatusQueued {
				t.Fatalf("answer %v", r[0])
			}
		default:
			t.Fatal("Stop returned before answering an accepted request")
		}
	}
	if _, err := b.trySubmit("p0", "late"); !errors.Is(err, ingest.ErrStopped) {
		t.Errorf("submit after Stop: err = %v, want ErrStopped", err)
	}
	var stored int
	if err := b.store.Pool().QueryRow(context.Background(), `
		SELECT count(*) FROM queen.log_segments t JOIN queen.log_partitions p ON p.id = t.partition_id
		JOIN queen.queues q ON q.id = p.queue_id WHERE q.name = $1`, b.queue).Scan(&stored); err != nil {
		t.Fatal(err)
	}
	if stored == 0 {
		t.Error("nothing stored")
	}
}

func TestUnresolvablePartitionFailsOnlyItsMessages(t *testing.T) {
	t.Parallel()
	b := setup(t, ingest.Config{Shards: 1, FlushSize: 2, Linger: time.Hour})
	bad := b.submit(t, "bad name", "x") // the schema refuses the name
	good := b.submit(t, "good", "y", "z")
	gotBad, gotGood := wait(t, bad), wait(t, good)
	if statuses(gotBad) != "failed" || gotBad[0].Err == nil {
		t.Errorf("unresolvable partition: %+v", gotBad)
	}
	if statuses(gotGood) != "queued,queued" {
		t.Errorf("other partition: %s", statuses(gotGood))
	}
}

func TestByteBoundRefusesAtOnce(t *testing.T) {
	t.Parallel()
	b := setup(t, ingest.Config{Shards: 1, MaxBufferedBytes: 100, Linger: time.Hour, FlushSize: 1000})
	held := b.submit(t, "p", "first-with-a-long-id-of-about-forty-bytes")
	if _, err := b.trySubmit("p", "second-with-a-long-id-of-about-forty-bytes"); !errors.Is(err, ingest.ErrOverloaded) {
		t.Fatalf("submit past MaxBufferedBytes: err = %v, want ErrOverloaded", err)
	}
	b.ing.Stop()
	if s := statuses(wait(t, held)); s != "queued" {
		t.Errorf("held request: %s", s)
	}
}

func TestBundleCapSplitsABacklog(t *testing.T) {
	t.Parallel()
	b := setup(t, ingest.Config{Shards: 1, FlushSize: 10, MaxBundleMessages: 2, Linger: time.Hour})
	var chans []<-chan []model.PushOutcome
	for i := range 5 {
		chans = append(chans, b.submit(t, fmt.Sprintf("p%d", i), fmt.Sprintf("m%d", i)))
	}
	b.ing.Stop() // drains everything, at most two messages per bundle
	for _, ch := range chans {
		if s := statuses(wait(t, ch)); s != "queued" {
			t.Errorf("status %s", s)
		}
	}
	if n := b.store.pushes.Load(); n != 3 {
		t.Errorf("%d bundles for 5 one-message partitions capped at 2 messages, want 3", n)
	}
}

func TestCacheSkipsTheProbeInSteadyStateAndSurvivesAnotherWriter(t *testing.T) {
	t.Parallel()
	b := setup(t, ingest.Config{Shards: 1, Linger: time.Millisecond})
	ctx := context.Background()
	// A partition with history, so the first push needs a real hydration.
	p, err := b.store.EnsurePartition(ctx, b.queue, "p")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.store.Push(ctx, []model.Frame{newFrame(p.ID, "old-1", "old-2")}); err != nil {
		t.Fatal(err)
	}
	for i := range 20 {
		if s := statuses(wait(t, b.submit(t, "p", fmt.Sprintf("s%d", i)))); s != "queued" {
			t.Fatalf("push %d: %s", i, s)
		}
	}
	if probes := b.store.probes.Load(); probes != 0 {
		t.Errorf("%d of 20 steady-state pushes probed; the cache vouches for all", probes)
	}
	// A retry of a stored id is a local hit: routed to the full probe,
	// answered with the original.
	got := wait(t, b.submit(t, "p", "old-2", "s3", "new"))
	if statuses(got) != "duplicate,duplicate,queued" || got[0].Offset != 1 {
		t.Fatalf("retries: %+v", got)
	}
	// Another writer (a second gateway) interleaves: our next push must not
	// vouch past what it cannot know, and stays exact.
	if _, err := b.store.Push(ctx, []model.Frame{newFrame(p.ID, "theirs")}); err != nil {
		t.Fatal(err)
	}
	got = wait(t, b.submit(t, "p", "theirs", "mine"))
	if statuses(got) != "duplicate,queued" {
		t.Fatalf("after an interleave: %+v", got)
	}
	before := b.store.probes.Load()
	for i := range 5 {
		wait(t, b.submit(t, "p", fmt.Sprintf("later%d", i)))
	}
	if n := b.store.probes.Load() - before; n != 0 {
		t.Errorf("%d probes after the rebuild; the entry vouches again", n)
	}
}

// TestCacheSlackIsTheHydrationSlack: the cache drops a hash SkewSlackMs
// after its window, and hydration reads ClockSkewSlack beyond the window;
// dedup imports nothing of ours, so the two constants are written twice
// and must agree.
func TestCacheSlackIsTheHydrationSlack(t *testing.T) {
	if got, want := int64(dedup.SkewSlackMs), model.ClockSkewSlack.Milliseconds(); got != want {
		t.Errorf("dedup.SkewSlackMs is %d ms, model.ClockSkewSlack %d ms; want them equal", got, want)
	}
}

// TestHydrationUnderAStaleMemoAdoptsTheWindow: a hydration made while the
// partition's memo still holds an old window (a /configure since) reads the
// new one; the memo takes it, so the entry vouches at once instead of being
// rebuilt on every flush until the memo expires.
func TestHydrationUnderAStaleMemoAdoptsTheWindow(t *testing.T) {
	t.Parallel()
	b := setup(t, ingest.Config{Shards: 1, Linger: time.Millisecond, PartitionTTL: time.Hour})
	ctx := context.Background()
	if s := statuses(wait(t, b.submit(t, "p", "a"))); s != "queued" {
		t.Fatal(s)
	}
	if _, _, err := b.store.Configure(ctx, b.queue, model.OptionsPatch{DedupWindowSeconds: ptr(600)}, false); err != nil {
		t.Fatal(err)
	}
	p, err := b.store.EnsurePartition(ctx, b.queue, "p")
	if err != nil {
		t.Fatal(err)
	}
	// Another writer: the push after it learns of the gap, and the one
	// after that hydrates, under the memo still saying 3600.
	if _, err := b.store.Push(ctx, []model.Frame{newFrame(p.ID, "theirs")}); err != nil {
		t.Fatal(err)
	}
	hydrated := b.store.hydrates.Load()
	for _, id := range []string{"b1", "b2"} {
		if s := statuses(wait(t, b.submit(t, "p", id))); s != "queued" {
			t.Fatal(s)
		}
	}
	if b.store.hydrates.Load() != hydrated+1 {
		t.Fatalf("%d hydrations for the gap, want 1", b.store.hydrates.Load()-hydrated)
	}
	hydrated, probes := b.store.hydrates.Load(), b.store.probes.Load()
	for i := range 5 {
		if s := statuses(wait(t, b.submit(t, "p", fmt.Sprint("c", i)))); s != "queued" {
			t.Fatal(s)
		}
	}
	if n := b.store.hydrates.Load() - hydrated; n != 0 {
		t.Errorf("%d hydrations in 5 flushes after the one that read the new window, want 0", n)
	}
	if n := b.store.probes.Load() - probes; n != 0 {
		t.Errorf("%d probes in 5 flushes: the entry should vouch under the new window", n)
	}
}

func newFrame(pid int64, ids ...string) model.Frame {
	s := model.Frame{PartitionID: pid, Verified: -1}
	for _, id := range ids {
		s.TxnIDs = append(s.TxnIDs, id)
		s.Hashes = append(s.Hashes, model.HashTxnID(id))
		s.Data = append(s.Data, nil)
	}
	return s
}

// TestHydrationFindingTheWindowOffKeepsTheFrameShape: a hydration that
// reads window 0 under a memo still saying 3600 must not change how the
// frame (leaders only) is answered (it crashed the process once).
func TestHydrationFindingTheWindowOffKeepsTheFrameShape(t *testing.T) {
	t.Parallel()
	b := setup(t, ingest.Config{Shards: 1, Linger: time.Millisecond, PartitionTTL: time.Hour})
	ctx := context.Background()
	if s := statuses(wait(t, b.submit(t, "p", "a"))); s != "queued" {
		t.Fatal(s)
	}
	p, err := b.store.EnsurePartition(ctx, b.queue, "p")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.store.Push(ctx, []model.Frame{newFrame(p.ID, "theirs")}); err != nil {
		t.Fatal(err)
	}
	if s := statuses(wait(t, b.submit(t, "p", "b"))); s != "queued" { // learns the gap
		t.Fatal(s)
	}
	if _, _, err := b.store.Configure(ctx, b.queue, model.OptionsPatch{DedupWindowSeconds: ptr(0)}, false); err != nil {
		t.Fatal(err)
	}
	hydrated := b.store.hydrates.Load()
	got := wait(t, b.submit(t, "p", "x", "x", "y"))
	if b.store.hydrates.Load() != hydrated+1 {
		t.Fatalf("%d hydrations, want the one that reads window 0", b.store.hydrates.Load()-hydrated)
	}
	// The frame was built for the memo's window: the repeat follows its
	// leader, as it would have a moment earlier.
	if statuses(got) != "queued,duplicate,queued" || got[1].Offset != got[0].Offset {
		t.Errorf("answers %+v", got)
	}
}

// TestLearnFiredKeepsTheEntryVouching: messages a timer fire of this
// process committed, reported in order, are appended to the entry instead
// of making it rehydrate; their ids are then local hits.
func TestLearnFiredKeepsTheEntryVouching(t *testing.T) {
	t.Parallel()
	b := setup(t, ingest.Config{Shards: 1, Linger: time.Millisecond})
	ctx := context.Background()
	if s := statuses(wait(t, b.submit(t, "p", "a", "b"))); s != "queued,queued" {
		t.Fatal(s)
	}
	p, err := b.store.EnsurePartition(ctx, b.queue, "p")
	if err != nil {
		t.Fatal(err)
	}
	res, err := b.store.Push(ctx, []model.Frame{newFrame(p.ID, "fired-1", "fired-2")})
	if err != nil {
		t.Fatal(err)
	}
	n, _ := b.store.Epoch(ctx)
	b.ing.LearnFired([]model.FiredTimer{
		{PartitionID: p.ID, Offset: res[0].BaseOffset, TxnID: "fired-1", Epoch: n},
		{PartitionID: p.ID, Offset: res[0].BaseOffset + 1, TxnID: "fired-2", Epoch: n},
	})
	hydrated, probes := b.store.hydrates.Load(), b.store.probes.Load()
	for i := range 3 {
		if s := statuses(wait(t, b.submit(t, "p", fmt.Sprint("c", i)))); s != "queued" {
			t.Fatal(s)
		}
	}
	if h, n := b.store.hydrates.Load()-hydrated, b.store.probes.Load()-probes; h != 0 || n != 0 {
		t.Errorf("%d hydrations and %d probes after the reported writes, want none", h, n)
	}
	got := wait(t, b.submit(t, "p", "fired-2"))
	if statuses(got) != "duplicate" || got[0].Offset != 3 {
		t.Errorf("retry of a reported id: %+v, want duplicate of offset 3", got)
	}
}

func ptr(n int) *int { return &n }

// TestFirstContactIsOneRoundTripPerBundle: a flush over partitions never
// seen resolves them all in one round trip; the ones it created are born
// in the cache with no hydration, and a later gateway meeting them
// (existing, with messages) hydrates them all in one round trip, and its
// entries then vouch and find the stored duplicates.
func TestFirstContactIsOneRoundTripPerBundle(t *testing.T) {
	t.Parallel()
	const n = 20
	flushAll := func(b *testBundle, ids func(i int) []string) [][]model.PushOutcome {
		var chans []<-chan []model.PushOutcome
		for i := range n {
			chans = append(chans, b.submit(t, fmt.Sprint("p", i), ids(i)...))
		}
		b.ing.Stop() // one bundle: the linger never ran out, the drain takes everything
		var out [][]model.PushOutcome
		for _, ch := range chans {
			out = append(out, wait(t, ch))
		}
		return out
	}
	cfg := ingest.Config{Shards: 1, Linger: time.Hour}
	b := setup(t, cfg)
	for i, res := range flushAll(b, func(i int) []string { return []string{fmt.Sprint("a", i), fmt.Sprint("b", i)} }) {
		if s := statuses(res); s != "queued,queued" || res[1].Offset != 1 {
			t.Errorf("new partition %d: %s up to %d", i, s, res[1].Offset)
		}
	}
	if p, e, h := b.store.pushes.Load(), b.store.ensureCalls.Load(), b.store.hydrateCalls.Load(); p != 1 || e != 1 || h != 0 {
		t.Errorf("creating %d partitions: %d pushes, %d resolutions, %d hydrations; want 1, 1, 0", n, p, e, h)
	}
	if st, _ := b.ing.CacheSummary(); st.Births != n || st.Hydrations != 0 {
		t.Errorf("creating %d partitions: the cache counts %d births and %d hydrations; want %d and 0", n, st.Births, st.Hydrations, n)
	}

	later := setup(t, cfg)
	later.queue = b.queue
	got := flushAll(later, func(i int) []string { return []string{fmt.Sprint("b", i), fmt.Sprint("c", i)} })
	for i, res := range got {
		if s := statuses(res); s != "duplicate,queued" || res[0].Offset != 1 || res[1].Offset != 2 {
			t.Errorf("existing partition %d: %s at %d, %d; want duplicate of 1, queued at 2", i, s, res[0].Offset, res[1].Offset)
		}
	}
	st := later.store
	if e, h, hs, v := st.ensureCalls.Load(), st.hydrateCalls.Load(), st.hydrates.Load(), st.verified.Load(); e != 1 || h != 1 || hs != n || v != n {
		t.Errorf("meeting %d existing partitions: %d resolutions, %d hydration round trips for %d partitions, %d frames vouched; want 1, 1, %d, %d",
			n, e, h, hs, v, n, n)
	}
}

// TestUnresolvablePartitionFailsAlone: in a bundle resolved in one call,
// a partition the store cannot create (a name the schema refuses) fails
// its own messages only; the others are stored.
func TestUnresolvablePartitionFailsAlone(t *testing.T) {
	t.Parallel()
	b := setup(t, ingest.Config{Shards: 1, Linger: time.Hour})
	good := b.submit(t, "good", "g1")
	bad := b.submit(t, "bad name", "b1")
	b.ing.Stop() // one bundle
	if s := statuses(wait(t, good)); s != "queued" {
		t.Errorf("the valid partition: %s, want queued", s)
	}
	if r := wait(t, bad); r[0].Status != model.StatusFailed || r[0].Err == nil {
		t.Errorf("the refused name: %v (%v), want failed with an error", r[0].Status, r[0].Err)
	}
	if n := b.store.ensureCalls.Load(); n != 1 {
		t.Errorf("%d resolutions for one bundle, want 1", n)
	}
}
