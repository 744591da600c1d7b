package ingest

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/queengate/queengate/dedup"
	"github.com/queengate/queengate/model"
)

// batch is one partition's fusion buffer: the requests it holds and, for
// every message, which leader it follows.
type batch struct {
	firstAt time.Time
	size    int   // messages
	bytes   int64 // their ids and data, as Submit counted them
	reqs    []*Request

	// Leaders in arrival order; what SQL receives when the window is on.
	txnIDs []string
	hashes []model.Hash
	data   [][]byte
	// leaderOf[i] is the leader index of the i-th message of the batch
	// (requests concatenated); leaderOf[i] == its own leader index for a
	// leader. isLeader marks them.
	leaderOf []int32
	isLeader []bool

	// Layers 1 and 2 in one map. Layer 1 compares
	// queue\x1fpartition\x1ftransactionId and layer 2 the xxh3_128 hash,
	// the identity SQL compares (so a collision here behaves like one
	// there). Every message of a batch has the same queue and partition,
	// and equal transactionIds have equal hashes: one lookup by the hash
	// answers both.
	byHash map[model.Hash]int32
}

// newBatch starts a buffer sized for about hint messages.
func newBatch(now time.Time, hint int) *batch {
	return &batch{firstAt: now, byHash: make(map[model.Hash]int32, hint),
		txnIDs: make([]string, 0, hint), hashes: make([]model.Hash, 0, hint), data: make([][]byte, 0, hint),
		leaderOf: make([]int32, 0, hint), isLeader: make([]bool, 0, hint)}
}

func (b *batch) add(req *Request) {
	b.reqs = append(b.reqs, req)
	b.size += len(req.Messages)
	b.bytes += req.bytes()
	for _, m := range req.Messages {
		h := model.HashTxnID(m.TxnID)
		if li, ok := b.byHash[h]; ok {
			b.leaderOf = append(b.leaderOf, li)
			b.isLeader = append(b.isLeader, false)
			continue
		}
		li := int32(len(b.txnIDs))
		b.byHash[h] = li
		b.txnIDs = append(b.txnIDs, m.TxnID)
		b.hashes = append(b.hashes, h)
		b.data = append(b.data, m.Data)
		b.leaderOf = append(b.leaderOf, li)
		b.isLeader = append(b.isLeader, true)
	}
}

// segment is the frame SQL receives. With the window on, only leaders are
// sent: followers inherit. With the window off (0), deduplication is off,
// so every message is stored, repeats included.
func (b *batch) segment(meta model.Partition) model.Segment {
	seg := model.Segment{PartitionID: meta.ID, Verified: -1}
	if meta.WindowSeconds > 0 {
		seg.TxnIDs, seg.Hashes, seg.Data = b.txnIDs, b.hashes, b.data
		return seg
	}
	seg.TxnIDs = make([]string, 0, b.size)
	seg.Hashes = make([]model.Hash, 0, b.size)
	seg.Data = make([][]byte, 0, b.size)
	for _, req := range b.reqs {
		for _, m := range req.Messages {
			seg.TxnIDs = append(seg.TxnIDs, m.TxnID)
			seg.Hashes = append(seg.Hashes, b.hashes[b.leaderOf[len(seg.TxnIDs)-1]])
			seg.Data = append(seg.Data, m.Data)
		}
	}
	return seg
}

// resolve maps the segment's outcomes back to every message and calls each
// request's Done. A follower inherits its leader's final result: a queued
// leader makes it a duplicate of the leader's offset, a duplicate leader
// passes on the stored original, a failed leader fails it too.
func (b *batch) resolve(meta model.Partition, res *model.SegmentResult, failure error, m *metrics, t *tally) {
	byLeader := meta.WindowSeconds > 0
	var counts [StatusFailed + 1]int64
	i := 0
	for _, req := range b.reqs {
		results := make([]Result, len(req.Messages))
		for k := range req.Messages {
			r := &results[k]
			r.PartitionID = meta.ID
			switch {
			case failure != nil:
				r.Status, r.Err = StatusFailed, failure
			case byLeader:
				o := res.Outcomes[b.leaderOf[i]]
				r.Offset = o.Offset
				r.Status = StatusQueued
				if o.Duplicate || !b.isLeader[i] {
					r.Status = StatusDuplicate
				}
			default:
				o := res.Outcomes[i]
				r.Offset, r.Status = o.Offset, StatusQueued
				if o.Duplicate {
					r.Status = StatusDuplicate
				}
			}
			counts[r.Status]++
			i++
		}
		req.Done(results)
	}
	for st := StatusQueued; st <= StatusFailed; st++ {
		if counts[st] > 0 {
			m.messages[st].Add(float64(counts[st]))
			if t != nil {
				t.addN(st, counts[st])
			}
		}
	}
}

// flight is one bundle on its way to PostgreSQL.
type flight struct {
	shard   *shard
	parts   []*partState
	batches []*batch
}

// errNoPartition marks a partition that could not be resolved; only its
// messages fail.
var errNoPartition = errors.New("ingest: partition could not be created or read")

func (f *flight) fly() {
	in := f.shard.ing
	start := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), in.cfg.PushTimeout)
	defer cancel()

	failures := make([]error, len(f.parts))
	segOf := make([]int, len(f.parts))   // index into segs, -1 for none
	windows := make([]int, len(f.parts)) // what a full probe would unroll, as the cache estimates it
	var segs []model.Segment
	messages := 0
	for i, p := range f.parts {
		segOf[i] = -1
		if p.resolvedAt.IsZero() || time.Since(p.resolvedAt) > in.cfg.PartitionTTL {
			meta, err := in.store.EnsurePartition(ctx, p.queue, p.partition)
			switch {
			case err == nil:
				p.meta, p.resolvedAt = meta, time.Now()
			case p.resolvedAt.IsZero():
				in.log.Warn().Err(err).Str("queue", p.queue).Str("partition", p.partition).Msg("resolve partition failed")
				failures[i] = errors.Join(errNoPartition, err)
				continue
			default:
				// A failed refresh keeps the id (it never changes) and the
				// last window read; the push below will tell if the
				// database is really away.
				in.log.Warn().Err(err).Str("queue", p.queue).Str("partition", p.partition).Msg("refresh partition failed")
			}
		}
		seg := f.batches[i].segment(p.meta)
		var window int
		seg.Verified, seg.Candidates, window = in.vouch(ctx, &p.meta, seg.Hashes)
		windows[i] = window
		// The cache vouches only under the window it was asked with (it
		// rebuilds on a change); SQL ignores the vouch if the window has
		// grown since this partition's memo was read.
		seg.VerifiedWindow = p.meta.WindowSeconds
		messages += len(seg.Hashes)
		segOf[i] = len(segs)
		segs = append(segs, seg)
	}

	var results []model.SegmentResult
	var pushErr error
	if len(segs) > 0 {
		results, pushErr = in.store.Push(ctx, segs)
		in.metrics.observeFlush(len(segs), messages, time.Since(start), pushErr)
		if pushErr != nil {
			in.log.Warn().Err(pushErr).Int("segments", len(segs)).Int("messages", messages).Msg("push failed")
			if !model.SafeToRetry(pushErr) {
				// The statement reached the server: if the connection broke
				// after COMMIT, the push may have been stored. Say so; a
				// retry of the same transactionId answers duplicate then.
				pushErr = fmt.Errorf("%w: %w", ErrOutcomeUnknown, pushErr)
			}
		}
	}
	if pushErr == nil {
		for j := range segs {
			in.learn(&segs[j], &results[j])
		}
	}
	type answer struct {
		meta    model.Partition
		res     *model.SegmentResult
		failure error
	}
	answers := make([]answer, len(f.parts))
	for i, p := range f.parts {
		answers[i] = answer{meta: p.meta, failure: failures[i]}
		if j := segOf[i]; j >= 0 {
			if pushErr != nil {
				answers[i].failure = pushErr
			} else {
				answers[i].res = &results[j]
				in.metrics.observeProbe(&results[j], windows[i])
			}
		}
	}
	// The outcome is known: hand the partitions back so the shard can fly
	// them again, then answer. Answering may wait on NATS (a reconnect);
	// the shard's buffered counts hold until it is done, so a long outage
	// ends in 503s rather than unbounded memory.
	batches := f.batches
	shard := f.shard
	shard.done <- f
	answered, answeredBytes := 0, int64(0)
	for i, b := range batches {
		b.resolve(answers[i].meta, answers[i].res, answers[i].failure, in.metrics, in.tallyOf(answers[i].meta.ID))
		answered += b.size
		answeredBytes += b.bytes
	}
	shard.buffered.Add(-int64(answered))
	shard.bufferedBytes.Add(-answeredBytes)
	in.metrics.bufferDepth.Sub(float64(answered))
	in.answering.Done()
}

// vouch asks the cache for the watermark a segment may send as
// p_verified and the stored slots SQL must check below it (the resident
// occurrences of its hashes), hydrating the partition's entry first when
// the cache asks for it; window estimates what a full probe would unroll.
// Any failure only costs the full probe (-1), never a verdict. A
// hydration reads the window too: when it differs from the memo's, the
// memo is stale (a /configure since it was read) and takes the fresher
// value, or the cache would see a window change on every flush until the
// memo's TTL and rehydrate each time.
func (in *Ingester) vouch(ctx context.Context, meta *model.Partition, hashes []model.Hash) (verified int64, candidates []model.Candidate, window int) {
	if in.cache == nil || meta.WindowSeconds == 0 {
		return -1, nil, 0 // window 0: the probe does not run anyway
	}
	d := in.cache.Decide(meta.ID, int64(meta.WindowSeconds)*1000, hashes)
	if d.Fill && in.fill(ctx, meta, d.FillFrom) {
		d = in.cache.Decide(meta.ID, int64(meta.WindowSeconds)*1000, hashes)
	}
	if d.Fill {
		// The fill could not heal the entry: only a hydration can.
		d.Hydrate = true
	}
	if d.Hydrate {
		h, err := in.store.Hydrate(ctx, meta.ID)
		if err != nil {
			in.log.Warn().Err(err).Int64("partition", meta.ID).Msg("dedup cache hydration failed")
			return -1, nil, 0
		}
		in.cache.Install(meta.ID, toDedupHydration(h, in.cache.NowMs()))
		if h.WindowSeconds == 0 {
			// Deduplication was turned off. The memo keeps its window until
			// its TTL: this frame was built (leaders only) for a window on,
			// and its answers must be resolved the same way.
			return -1, nil, 0
		}
		meta.WindowSeconds = h.WindowSeconds
		d = in.cache.Decide(meta.ID, int64(meta.WindowSeconds)*1000, hashes)
	}
	if d.Hit {
		in.metrics.cacheHits.Inc()
	}
	if d.Verified < 0 {
		return -1, nil, d.WindowHashes
	}
	candidates = make([]model.Candidate, len(d.Candidates))
	for i, c := range d.Candidates {
		candidates[i] = model.Candidate{Index: c.Index, Offset: c.Offset}
	}
	return d.Verified, candidates, d.WindowHashes
}

// fill reads what partition meta's entry missed above from and hands it
// to the cache; it reports whether the entry vouches again. Any failure
// leaves the way back to a full hydration.
func (in *Ingester) fill(ctx context.Context, meta *model.Partition, from int64) bool {
	h, err := in.store.HydrateAbove(ctx, meta.ID, from)
	if err != nil {
		in.log.Warn().Err(err).Int64("partition", meta.ID).Msg("dedup cache fill failed")
		return false
	}
	return in.cache.Fill(meta.ID, from, int64(h.WindowSeconds)*1000, toDedupHydration(h, in.cache.NowMs()).Ranges, h.LastOffset)
}

// learn tells the cache what a committed segment wrote: the hashes of the
// messages stored, in offset order.
func (in *Ingester) learn(seg *model.Segment, res *model.SegmentResult) {
	if in.cache == nil {
		return
	}
	written := seg.Hashes // the common case: everything was new
	if res.BaseOffset < 0 || res.LastOffset-res.BaseOffset+1 != int64(len(seg.Hashes)) {
		written = nil
		for k, o := range res.Outcomes {
			if !o.Duplicate {
				written = append(written, seg.Hashes[k])
			}
		}
	}
	in.cache.Learn(seg.PartitionID, res.BaseOffset, res.LastOffset, written)
}

// toDedupHydration moves created times onto the cache's clock by their
// age as PostgreSQL saw it at the snapshot (DBNow - created_at): expiry
// then compares ages, whatever the skew between the two clocks.
func toDedupHydration(h model.Hydration, nowMs int64) dedup.Hydration {
	out := dedup.Hydration{LastOffset: h.LastOffset, WindowMs: int64(h.WindowSeconds) * 1000}
	for _, r := range h.Txns {
		age := h.DBNow.Sub(r.CreatedAt).Milliseconds()
		out.Ranges = append(out.Ranges, dedup.Range{Base: r.BaseOffset, CreatedMs: nowMs - age, Hashes: r.Hashes})
	}
	return out
}
