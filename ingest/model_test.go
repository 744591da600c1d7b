package ingest_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"maps"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/rs/zerolog"

	"github.com/queengate/queengate/dedup"
	"github.com/queengate/queengate/ingest"
	"github.com/queengate/queengate/internal/pgtest"
	"github.com/queengate/queengate/model"
	"github.com/queengate/queengate/pgstore"
)

// soundStore is the real store, asserting on every frame it pushes the
// two claims that let SQL skip work, against the database as it is just
// before the push:
//   - sound vouch: with p_verified = v >= 0 (under a window at least the
//     queue's, as SQL requires to honour it), every in-window occurrence of
//     a frame hash at or below v is among the frame's candidates for
//     that message (so checking them, and the rows above v, finds the
//     earliest occurrence);
//   - equal verdict: what SQL answers (duplicate of which offset, or new
//     at which offset) is what a full-window probe computed from the
//     database gives at the instant SQL probed (see probeInstants).
//
// Pushes are serialized through it, so nothing writes between the check
// and the push. Only PostgreSQL's clock moves meanwhile: a stored hash
// may leave the window between the read and the probe.
type soundStore struct {
	*pgstore.Store
	t                      *testing.T
	mu                     sync.Mutex
	violations, mismatches int
	vouched, narrowed      int
	// probed is, per partition, the instants its last push may have
	// probed at (expected judges a request's answers there).
	probed map[int64][]time.Time
	// beforePush, when set, runs between the reads and the push; its
	// error is returned, nothing pushed.
	beforePush func() error
}

// occurrence is a stored hash: where, and when it was stored (whether it
// is in the window depends on the instant asked about).
type occurrence struct {
	off     int64
	created time.Time
}

// stored is what a partition holds of some hashes, read just before a
// push: every occurrence, the allocator, the window, and PostgreSQL's
// clock at the read.
type stored struct {
	last   int64
	window int
	read   time.Time
	occ    map[model.Hash][]occurrence
}

// readStored reads partition pid's occurrences of hashes, whatever their
// age.
func readStored(ctx context.Context, pool *pgxpool.Pool, pid int64, hashes []model.Hash) (stored, error) {
	st := stored{occ: map[model.Hash][]occurrence{}}
	if err := pool.QueryRow(ctx, `
		SELECT p.last_offset, q.dedup_window_seconds, now() FROM queen.log_partitions p
		  JOIN queen.queues q ON q.id = p.queue_id WHERE p.id = $1`, pid).Scan(&st.last, &st.window, &st.read); err != nil {
		return st, err
	}
	if st.window == 0 {
		return st, nil
	}
	// Read from the tables, not through the store's queen.log_hashes: a
	// frame's hashes are beside its data or, once its data is gone, in
	// log_txns; none below txns_start is stored any more.
	rows, err := pool.Query(ctx, `
		SELECT th.h, t.base_offset + th.idx - 1, t.created_at
		  FROM queen.log_partitions p
		 CROSS JOIN LATERAL (SELECT x.base_offset, x.created_at, x.hashes FROM queen.log_txns x
		                      WHERE x.partition_id = p.id AND x.base_offset >= p.txns_start
		                     UNION ALL
		                     SELECT s.base_offset, s.created_at, s.hashes FROM queen.log_segments s
		                      WHERE s.partition_id = p.id AND s.base_offset >= p.txns_start) AS t
		 CROSS JOIN LATERAL queen.log_unnest_hashes(t.hashes) th
		 WHERE p.id = $1 AND th.h = ANY ($2)`, pid, hashes)
	if err != nil {
		return st, err
	}
	for rows.Next() {
		var (
			h model.Hash
			o occurrence
		)
		if err := rows.Scan(&h, &o.off, &o.created); err != nil {
			return st, err
		}
		st.occ[h] = append(st.occ[h], o)
	}
	return st, rows.Err()
}

// inWindow reports whether o is in the window at instant at, as SQL
// tells it (created_at >= at - window).
func (st *stored) inWindow(o occurrence, at time.Time) bool {
	return st.window > 0 && !o.created.Before(at.Add(-time.Duration(st.window)*time.Second))
}

// leaving are the instants in (from, to] at which an occurrence leaves the
// window (a microsecond past its last, PostgreSQL's precision): the only
// instants at which the full probe's verdict changes.
func (st *stored) leaving(from, to time.Time) []time.Time {
	var at []time.Time
	for _, occ := range st.occ {
		for _, o := range occ {
			if gone := o.created.Add(time.Duration(st.window)*time.Second + time.Microsecond); gone.After(from) && !gone.After(to) {
				at = append(at, gone)
			}
		}
	}
	return at
}

// fullProbe is the verdict of the whole window at instant at: a stored
// hash is a duplicate of its earliest in-window occurrence, a repeat
// within the frame follows its first occurrence, and the rest take the
// next offsets. Window 0 stores everything.
func (st *stored) fullProbe(hashes []model.Hash, at time.Time) []model.Outcome {
	out := make([]model.Outcome, len(hashes))
	seen := map[model.Hash]int64{}
	last := st.last
	for k, h := range hashes {
		if st.window > 0 {
			earliest := int64(-1)
			for _, o := range st.occ[h] {
				if st.inWindow(o, at) && (earliest < 0 || o.off < earliest) {
					earliest = o.off
				}
			}
			if earliest >= 0 {
				out[k] = model.Outcome{Offset: earliest, Duplicate: true}
				continue
			}
			if off, ok := seen[h]; ok {
				out[k] = model.Outcome{Offset: off, Duplicate: true}
				continue
			}
		}
		last++
		seen[h] = last
		out[k] = model.Outcome{Offset: last}
	}
	return out
}

func (s *soundStore) PushUnder(ctx context.Context, n uint64, frames []model.Frame) ([]model.FrameResult, uint64, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	before := make([]stored, len(frames))
	latest, _ := s.Epoch(ctx)
	for i := range frames {
		st, err := readStored(ctx, s.Pool(), frames[i].PartitionID, frames[i].Hashes)
		if err != nil {
			return nil, 0, err
		}
		if n == latest {
			// Under an older epoch the push is refused whole, unsent.
			s.checkVouch(&frames[i], &st)
		}
		before[i] = st
	}
	if s.beforePush != nil {
		if err := s.beforePush(); err != nil {
			return nil, 0, err
		}
	}
	res, conn, err := s.Store.PushUnder(ctx, n, frames)
	if err != nil {
		return nil, conn, err
	}
	if err := s.judgePush(ctx, frames, res, before); err != nil {
		return nil, conn, err
	}
	return res, conn, nil
}

// Push is PushUnder at the latest epoch: a direct push, checked as every
// push is.
func (s *soundStore) Push(ctx context.Context, frames []model.Frame) ([]model.FrameResult, error) {
	n, _ := s.Epoch(ctx)
	res, _, err := s.PushUnder(ctx, n, frames)
	return res, err
}

// judgePush checks SQL's verdicts against the full probe of the database
// as it was before the push.
func (s *soundStore) judgePush(ctx context.Context, frames []model.Frame, res []model.FrameResult, before []stored) error {
	at, err := s.probeInstants(ctx, frames, res, before)
	if err != nil {
		return err
	}
	outcomes := make([][]model.Outcome, len(res))
	for i := range res {
		outcomes[i] = res[i].Outcomes
		if res[i].Probe == model.ProbeNarrowed {
			s.narrowed++
		}
	}
	if when, want, agree := judge(frames, outcomes, before, at); !agree {
		for i := range frames {
			for k, o := range outcomes[i] {
				if o != want[i][k] {
					s.mismatches++
					s.t.Errorf("partition %d message %d (probe %v): SQL answered %+v, a full probe at %v gives %+v",
						frames[i].PartitionID, k, res[i].Probe, o, when.Format(time.RFC3339Nano), want[i][k])
				}
			}
		}
	}
	if s.probed == nil {
		s.probed = map[int64][]time.Time{}
	}
	for i := range frames {
		s.probed[frames[i].PartitionID] = at
	}
	return nil
}

// probeInstants are the instants at which the push's probe may have read
// PostgreSQL's clock (log_push_bundle reads it once, after its locks, and
// stamps what it writes with it). A push that wrote tells it exactly.
// Otherwise it is at or after the reads and before the push returned: the
// latest read, and each instant in between at which an occurrence left
// the window, cover every verdict a probe could give then.
func (s *soundStore) probeInstants(ctx context.Context, frames []model.Frame, res []model.FrameResult, before []stored) ([]time.Time, error) {
	for i := range res {
		if res[i].BaseOffset >= 0 {
			var at time.Time
			err := s.Pool().QueryRow(ctx, "SELECT created_at FROM queen.log_segments WHERE partition_id = $1 AND base_offset = $2",
				frames[i].PartitionID, res[i].BaseOffset).Scan(&at)
			return []time.Time{at}, err
		}
	}
	var after time.Time
	if err := s.Pool().QueryRow(ctx, "SELECT now()").Scan(&after); err != nil {
		return nil, err
	}
	from := before[0].read
	for i := range before {
		if before[i].read.After(from) {
			from = before[i].read
		}
	}
	at := []time.Time{from}
	for i := range before {
		at = append(at, before[i].leaving(from, after)...)
	}
	slices.SortFunc(at, time.Time.Compare)
	return at, nil
}

// judge looks for an instant of at at which the full probe gives every
// frame the outcomes SQL answered (one instant for all: one statement
// probed them). Without one, it returns the full probe at the first
// instant.
func judge(frames []model.Frame, outcomes [][]model.Outcome, before []stored, at []time.Time) (time.Time, [][]model.Outcome, bool) {
	probe := func(when time.Time) ([][]model.Outcome, bool) {
		want, agree := make([][]model.Outcome, len(frames)), true
		for i := range frames {
			want[i] = before[i].fullProbe(frames[i].Hashes, when)
			agree = agree && slices.Equal(want[i], outcomes[i])
		}
		return want, agree
	}
	for _, when := range at {
		if want, agree := probe(when); agree {
			return when, want, true
		}
	}
	want, _ := probe(at[0])
	return at[0], want, false
}

// checkVouch asserts the vouch against what was stored at the read: the
// earliest instant the probe may have run at, so the window then holds
// every occurrence it can hold later.
func (s *soundStore) checkVouch(fr *model.Frame, st *stored) {
	// SQL honours a vouch only under a window no larger than the one it
	// was made under (after the window grew it probes the whole window):
	// a memo older than a /configure sends such vouches, harmlessly.
	if st.window == 0 || fr.Verified < 0 || st.window > fr.VerifiedWindow {
		return
	}
	s.vouched++
	named := map[model.Candidate]bool{}
	for _, c := range fr.Candidates {
		named[c] = true
	}
	for k, h := range fr.Hashes {
		for _, o := range st.occ[h] {
			if st.inWindow(o, st.read) && o.off <= fr.Verified && !named[model.Candidate{Index: int32(k), Offset: o.off}] {
				s.violations++
				s.t.Errorf("unsound: partition %d vouched %d (window %d, vouched under %d), message %d is stored in the window at %d, not named",
					fr.PartitionID, fr.Verified, st.window, fr.VerifiedWindow, k, o.off)
			}
		}
	}
}

// TestModelCacheNeverChangesAVerdict drives random pushes through the real
// ingest path with the cache on, interleaved with a second writer pushing
// straight into the same partitions, window changes, retention, clock
// advances past the window, and a budget small enough to evict and
// suppress. Every answer is checked against the outcome computed from the
// database alone before the push, and the soundness invariant is checked
// on every frame.
func TestModelCacheNeverChangesAVerdict(t *testing.T) {
	t.Parallel()
	runModel(t, 1)
}

// TestModelTwoGatewaysShareAndHandOverPartitions is the model with two
// ingesters (two gateways' caches) over the same partitions: each
// partition is owned by one, ownership moves (a handover), and for a while
// both serve it at once, concurrently (make-before-break, or a stale
// view of the fleet). Every gap this leaves is healed by a fill or a
// hydration; neither may change a verdict.
func TestModelTwoGatewaysShareAndHandOverPartitions(t *testing.T) {
	t.Parallel()
	m := runModel(t, 2)
	if m.fills == 0 {
		t.Error("no gap was ever healed by a fill: the model exercised nothing new")
	}
}

// startIngesters starts n ingesters (n gateways' caches) over store,
// stopped when the test ends.
func startIngesters(t *testing.T, store ingest.Store, n int, cfg ingest.Config) []*ingest.Ingester {
	ings := make([]*ingest.Ingester, n)
	for i := range ings {
		ing, err := ingest.New(store, cfg, zerolog.New(zerolog.NewTestWriter(t)).Level(zerolog.ErrorLevel), nil)
		if err != nil {
			t.Fatal(err)
		}
		if err := ing.Start(context.Background()); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(ing.Stop)
		ings[i] = ing
	}
	return ings
}

// modelRun is what a model run counted.
type modelRun struct {
	fills, hydrations int64
}

// runModel is the model of one server. The suite's run is 25,000
// messages (over a thousand vouched frames, hundreds of narrowed probes,
// fills and hydrations); `go tool task test:model` runs 400,000.
func runModel(t *testing.T, gateways int) modelRun { return runModelWith(t, gateways, 0, 25_000) }

// runModelWith is the model with failovers (0: one server, else a primary
// and an asynchronous standby; see TestModelFailoverToAnAsyncStandby), of
// ops messages unless QUEEN_MODEL_OPS says.
func runModelWith(t *testing.T, gateways, failovers, ops int) modelRun {
	if v, err := strconv.Atoi(os.Getenv("QUEEN_MODEL_OPS")); err == nil {
		ops = v
	}
	var h *haPair
	if failovers > 0 {
		h = startHAPair(t)
	}
	url := pgtest.NewDB(t)
	if h != nil {
		url = h.url
	}
	store := &soundStore{Store: pgtest.Store(t, url), t: t}
	clock := &modelClock{now: time.Now()}
	cfg := ingest.Config{
		Shards: 1, Linger: time.Millisecond, PartitionTTL: time.Nanosecond,
		// Room for two or three partitions' entries: the others are
		// evicted or suppressed as their windows grow.
		Cache: dedup.Config{BudgetBytes: 200 << 10, Now: clock.Now, Guard: time.Nanosecond, Cooldown: time.Second},
	}
	var fo *failoverModel
	if h != nil {
		fo = newFailoverModel(h, store, ops, failovers)
		cfg.OnLost = fo.onLost
	}
	ings := startIngesters(t, store, gateways, cfg)

	ctx := context.Background()
	queue := "model"
	parts := []string{"a", "b", "c", "d"}
	pids := map[string]int64{}
	owner := map[string]int{}
	for i, name := range parts {
		p, err := store.EnsurePartition(ctx, queue, name)
		if err != nil {
			t.Fatal(err)
		}
		pids[name] = p.ID
		owner[name] = i % gateways
	}
	r := rand.New(rand.NewPCG(7, 11))
	window := 60
	setWindow := func(w int) {
		if _, _, err := store.Configure(ctx, queue, model.OptionsPatch{DedupWindowSeconds: &w}, false); err != nil {
			t.Fatal(err)
		}
		window = w
	}
	setWindow(window)
	// Mostly fresh ids, and a small hot set that keeps coming back.
	id := func(part string) string {
		if r.IntN(100) < 3 {
			return part + "-hot-" + strconv.Itoa(r.IntN(20))
		}
		return part + "-" + strconv.Itoa(r.IntN(1_000_000))
	}
	request := func(part string, n int) *ingest.Request {
		req := &ingest.Request{Queue: queue, Partition: part}
		for range n {
			txnID := id(part)
			data, meta := modelPayload(txnID)
			req.Messages = append(req.Messages, model.Incoming{TxnID: txnID, Data: data, Meta: meta})
		}
		return req
	}
	submit := func(ing *ingest.Ingester, req *ingest.Request) <-chan []model.PushOutcome {
		ch := make(chan []model.PushOutcome, 1)
		req.Done = func(res []model.PushOutcome) { ch <- res }
		if err := ing.Submit(req); err != nil {
			t.Fatal(err)
		}
		return ch
	}

	sent, mismatches, handovers := 0, 0, 0
	for sent < ops && !t.Failed() {
		fo.step(t, sent, ings, queue)
		switch x := r.IntN(100); {
		case x < 70: // a request through the partition's owner
			part := parts[r.IntN(len(parts))]
			req := request(part, 1+r.IntN(30))
			ids := make([]string, len(req.Messages))
			hashes := make([]model.Hash, len(req.Messages))
			for i, m := range req.Messages {
				ids[i], hashes[i] = m.TxnID, model.HashTxnID(m.TxnID)
			}
			before, err := readStored(ctx, store.Pool(), pids[part], hashes)
			if err != nil {
				t.Fatal(err)
			}
			got := <-submit(ings[owner[part]], req)
			fo.ack(pids[part], req, got)
			want := expected(&before, pids[part], hashes, got, store.probedAt(pids[part]))
			for i := range got {
				if got[i].Status != want[i].Status || got[i].Offset != want[i].Offset {
					mismatches++
					t.Errorf("op %d, %s[%d] %s: got %v@%d, want %v@%d (window %d)", sent, part, i, ids[i],
						got[i].Status, got[i].Offset, want[i].Status, want[i].Offset, window)
				}
			}
			sent += len(ids)
		case x < 75 && gateways > 1: // every gateway serving one partition at once
			part := parts[r.IntN(len(parts))]
			var answers []<-chan []model.PushOutcome
			var reqs []*ingest.Request
			for _, ing := range ings {
				req := request(part, 1+r.IntN(10))
				sent += len(req.Messages)
				reqs = append(reqs, req)
				answers = append(answers, submit(ing, req))
			}
			for k, ch := range answers {
				fo.ack(pids[part], reqs[k], <-ch) // soundStore checked every frame against the database
			}
		case x < 77 && gateways > 1: // a handover
			part := parts[r.IntN(len(parts))]
			owner[part] = (owner[part] + 1 + r.IntN(gateways-1)) % gateways
			handovers++
		case x < 85: // a writer outside any gateway
			part := parts[r.IntN(len(parts))]
			ids := []string{id(part), id(part)}
			if _, err := store.Store.Push(ctx, []model.Frame{newFrame(pids[part], ids...)}); err != nil {
				t.Fatal(err)
			}
			sent += len(ids)
		case x < 89: // a window change
			setWindow([]int{0, 30, 60, 600}[r.IntN(4)])
		case x < 90: // retention purges what is wholly past the window
			if _, err := store.Retain(ctx, model.RetainOptions{Slack: 5 * time.Second, PartitionsPerStep: 10, MaxRowsPerPartition: 1000}); err != nil {
				t.Fatal(err)
			}
		default: // time passes: the cache's clock, and the rows' ages in SQL
			d := time.Duration(1+r.IntN(40)) * time.Second
			clock.Add(d)
			ageLiveFrames(t, store.Pool(), d)
		}
	}
	checkPayloads(t, store.Store, queue, parts)
	var m modelRun
	for _, ing := range ings {
		st, _ := ing.CacheSummary()
		m.fills += st.Fills
		m.hydrations += st.Hydrations
	}
	t.Logf("%d gateways, %d messages, %d handovers, %d frames vouched for (p_verified >= 0), %d narrowed, %d fills, %d hydrations, %d unsound, %d SQL verdicts unlike the full probe, %d mismatching answers",
		gateways, sent, handovers, store.vouched, store.narrowed, m.fills, m.hydrations, store.violations, store.mismatches, mismatches)
	if sent >= ops && (store.vouched == 0 || store.narrowed == 0) { // else cut short by the failures reported
		t.Error("the cache never vouched, or never narrowed a probe: the model exercised nothing")
	}
	if fo != nil && !t.Failed() && fo.done < failovers {
		t.Errorf("%d failovers of %d", fo.done, failovers)
	}
	return m
}

// modelPayload is the data and meta the model sends with txnID, the same
// every time: JSON data alone, JSON data with headers, or binary data
// with headers, by the id's hash.
func modelPayload(txnID string) (data, meta []byte) {
	headers := []model.Header{{Name: "traceparent", Values: []string{"00-" + txnID}}, {Name: "x-tags", Values: []string{"a", `"b"`}}}
	switch model.HashTxnID(txnID)[0] % 3 {
	case 0:
		return []byte(`{"id":` + strconv.Quote(txnID) + `}`), nil
	case 1:
		return []byte(`[1, ` + strconv.Quote(txnID) + `]`), model.AppendMeta(nil, headers, false)
	}
	return []byte(`"` + base64.StdEncoding.EncodeToString([]byte(txnID)) + `"`), model.AppendMeta(nil, headers[:1], true)
}

// checkPayloads reads every message the partitions still store and finds
// each byte for byte as the model sent it: its data and its meta (or
// neither, written by the outside writer, which sends none).
func checkPayloads(t *testing.T, store *pgstore.Store, queue string, parts []string) {
	t.Helper()
	checked := 0
	for _, part := range parts {
		res, err := store.Read(context.Background(), model.ReadQuery{Queue: queue, Partition: part, Max: 1 << 30, MaxBytes: 1 << 40})
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range res.Messages {
			data, meta := modelPayload(m.TxnID)
			if m.Meta == nil && string(m.Data) == "null" {
				continue // the outside writer's
			}
			if !bytes.Equal(m.Data, data) || !bytes.Equal(m.Meta, meta) {
				t.Errorf("%s@%d (%s) stored as %s %s, sent as %s %s", part, m.Offset, m.TxnID, m.Data, m.Meta, data, meta)
			}
			checked++
		}
	}
	if checked == 0 {
		t.Error("no message was read back to compare")
	}
}

// expected is a request's outcome computed from the database alone: what
// was stored before the push (before), judged at an instant the push may
// have probed at (at) — the one giving got, if any, else the first.
// Within the window a stored id is a duplicate of its first occurrence, a
// repeat within the request follows its first occurrence, anything else
// takes the next offset.
func expected(before *stored, pid int64, hashes []model.Hash, got []model.PushOutcome, at []time.Time) []model.PushOutcome {
	results := func(when time.Time) []model.PushOutcome {
		out := make([]model.PushOutcome, len(hashes))
		for i, o := range before.fullProbe(hashes, when) {
			out[i] = model.PushOutcome{Status: model.StatusQueued, Offset: o.Offset, PartitionID: pid}
			if o.Duplicate {
				out[i].Status = model.StatusDuplicate
			}
		}
		return out
	}
	if len(at) == 0 { // no push of pid came back: judged at the read
		at = []time.Time{before.read}
	}
	same := func(want []model.PushOutcome) bool {
		return slices.EqualFunc(got, want, func(g, w model.PushOutcome) bool { return g.Status == w.Status && g.Offset == w.Offset })
	}
	for _, when := range at {
		if want := results(when); same(want) {
			return want
		}
	}
	return results(at[0])
}

// probedAt is the instants partition pid's last push may have probed at.
func (s *soundStore) probedAt(pid int64) []time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.probed[pid]
}

type modelClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *modelClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *modelClock) Add(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

// firstContactStore is the sound store counting first contacts: the
// partitions created by a flush's resolution, the hydrations and the
// round trips they took. Right after some creations, before the creating
// flush pushes, it has another writer push into the new partition (the
// race a born entry must survive: two writers, one creating).
type firstContactStore struct {
	*soundStore
	r                                  *rand.Rand // under soundStore.mu
	created, interloped                int
	hydrateCalls, hydrated, maxBatched int
}

func (s *firstContactStore) EnsurePartitions(ctx context.Context, queues, partitions []string) ([]model.Partition, []bool, error) {
	parts, created, err := s.soundStore.EnsurePartitions(ctx, queues, partitions)
	if err != nil {
		return nil, nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for i, p := range parts {
		if !created[i] {
			continue
		}
		s.created++
		if s.r.IntN(3) == 0 {
			// The same names the gateways send: a later push may find them
			// stored (duplicates of the interloper's offsets).
			ids := []string{partitions[i] + "-hot-" + strconv.Itoa(s.r.IntN(20)), partitions[i] + "-" + strconv.Itoa(s.r.IntN(1_000_000))}
			if _, err := s.soundStore.Store.Push(ctx, []model.Frame{newFrame(p.ID, ids...)}); err != nil {
				return nil, nil, err
			}
			s.interloped++
		}
	}
	return parts, created, nil
}

func (s *firstContactStore) HydrateMany(ctx context.Context, pids []int64) (map[int64]model.Hydration, error) {
	s.mu.Lock()
	s.hydrateCalls++
	s.hydrated += len(pids)
	s.maxBatched = max(s.maxBatched, len(pids))
	s.mu.Unlock()
	return s.soundStore.HydrateMany(ctx, pids)
}

// TestModelFirstContactAcrossManyPartitions is the model over many
// partitions met for the first time: each round, requests for a few dozen
// partitions (new names, and existing ones a gateway has not seen or has
// evicted) go to two gateways at once, so that bundles resolve and hydrate
// many partitions together and partitions are born in the cache as their
// flush creates them; some are pushed to by another writer right after
// their creation, some are created by one gateway while the other pushes
// to them too. Window changes, retention, time passing and a small
// budget (eviction, suppression) as in the model above. soundStore checks
// every frame's vouch and verdict against the full probe; every
// request must be answered stored or duplicate.
func TestModelFirstContactAcrossManyPartitions(t *testing.T) {
	t.Parallel()
	ops := 25_000 // messages; QUEEN_MODEL_OPS overrides
	if v, err := strconv.Atoi(os.Getenv("QUEEN_MODEL_OPS")); err == nil {
		ops = v
	}
	url := pgtest.NewDB(t)
	r := rand.New(rand.NewPCG(3, 5))
	store := &firstContactStore{soundStore: &soundStore{Store: pgtest.Store(t, url), t: t}, r: rand.New(rand.NewPCG(13, 17))}
	clock := &modelClock{now: time.Now()}
	ings := startIngesters(t, store, 2, ingest.Config{
		Shards: 1, Linger: 5 * time.Millisecond, PartitionTTL: 50 * time.Millisecond,
		// Room for some 80 small entries: the first rounds' new partitions
		// fill it (it evicts from about round 15 of some 350), so that
		// evictions do not hang on how far the history gets.
		Cache: dedup.Config{BudgetBytes: 32 << 10, Now: clock.Now, Guard: time.Nanosecond, Cooldown: time.Second},
	})
	ctx := context.Background()
	queue := "first"
	window := 60
	if _, err := store.EnsurePartition(ctx, queue, "seed"); err != nil {
		t.Fatal(err)
	}
	setWindow := func(w int) {
		if _, _, err := store.Configure(ctx, queue, model.OptionsPatch{DedupWindowSeconds: &w}, false); err != nil {
			t.Fatal(err)
		}
		window = w
	}
	setWindow(window)
	var names []string // partitions created so far
	request := func(part string) *ingest.Request {
		req := &ingest.Request{Queue: queue, Partition: part}
		for range 1 + r.IntN(10) {
			id := part + "-" + strconv.Itoa(r.IntN(1_000_000))
			if r.IntN(100) < 20 {
				id = part + "-hot-" + strconv.Itoa(r.IntN(20))
			}
			req.Messages = append(req.Messages, model.Incoming{TxnID: id})
		}
		return req
	}
	sent, failed := 0, 0
	for round := 0; sent < ops && !t.Failed(); round++ {
		var answers []chan []model.PushOutcome
		submit := func(ing *ingest.Ingester, req *ingest.Request) {
			ch := make(chan []model.PushOutcome, 1)
			req.Done = func(res []model.PushOutcome) { ch <- res }
			if err := ing.Submit(req); err != nil {
				t.Fatal(err)
			}
			sent += len(req.Messages)
			answers = append(answers, ch)
		}
		chosen := map[string]bool{}
		for range 1 + r.IntN(40) {
			part := "n" + strconv.Itoa(len(names)+len(chosen)) // a new partition
			if len(names) > 0 && r.IntN(2) == 0 {
				part = names[r.IntN(len(names))]
			}
			if chosen[part] {
				continue // one request per partition and gateway a round
			}
			chosen[part] = true
			switch x := r.IntN(10); {
			case x < 2: // both gateways at once: one creates, the other meets it
				submit(ings[0], request(part))
				submit(ings[1], request(part))
			default:
				submit(ings[x%2], request(part))
			}
		}
		for _, ch := range answers {
			for _, res := range <-ch {
				if res.Status != model.StatusQueued && res.Status != model.StatusDuplicate {
					failed++
					t.Errorf("round %d: %v (%v)", round, res.Status, res.Err)
				}
			}
		}
		// In order, not the map's: the requests are one function of the seed.
		for _, part := range slices.Sorted(maps.Keys(chosen)) {
			if !slices.Contains(names, part) {
				names = append(names, part)
			}
		}
		switch x := r.IntN(100); {
		case x < 5:
			setWindow([]int{0, 30, 60, 600}[r.IntN(4)])
		case x < 8:
			if _, err := store.Retain(ctx, model.RetainOptions{Slack: 5 * time.Second, PartitionsPerStep: 100, MaxRowsPerPartition: 1000}); err != nil {
				t.Fatal(err)
			}
		case x < 20:
			d := time.Duration(1+r.IntN(40)) * time.Second
			clock.Add(d)
			ageLiveFrames(t, store.Pool(), d)
		}
	}
	var hydrations, births, evictions int64
	for _, ing := range ings {
		st, _ := ing.CacheSummary()
		hydrations += st.Hydrations
		births += st.Births
		evictions += st.Evictions
	}
	t.Logf("%d messages over %d partitions: %d created by a flush (%d pushed to by another writer first), %d hydrated in %d round trips (at most %d at once), %d installs and %d births, %d evictions, %d frames vouched for, %d narrowed, %d unsound, %d SQL verdicts unlike the full probe, %d failed",
		sent, len(names), store.created, store.interloped, store.hydrated, store.hydrateCalls, store.maxBatched,
		hydrations, births, evictions, store.vouched, store.narrowed, store.violations, store.mismatches, failed)
	switch {
	case sent < ops:
		// Cut short by the failures reported above: what the history
		// would have exercised is beside the point.
	case store.created == 0 || store.interloped == 0 || births == 0:
		t.Error("no partition was created by a flush, or none was pushed to by another writer first: the model exercised no birth")
	case store.maxBatched < 2:
		t.Error("no bundle hydrated two partitions at once: the model exercised no batched hydration")
	case store.vouched == 0 || store.narrowed == 0 || evictions == 0:
		t.Error("the cache never vouched, never narrowed a probe, or never evicted: the model exercised nothing")
	}
}

// ageLiveFrames moves back the creation time of every frame whose
// transactionIds are still read (at or above its partition's
// txns_start): what a clock advancing past them would do. Retired frames
// are left as they are: nothing reads their time, and rewriting every
// stored frame on each advance made the model quadratic.
func ageLiveFrames(t *testing.T, db pgtest.DB, d time.Duration) {
	t.Helper()
	pgtest.AgeFrames(t, db, d, "base_offset >= (SELECT p.txns_start FROM queen.log_partitions p WHERE p.id = partition_id)")
}
