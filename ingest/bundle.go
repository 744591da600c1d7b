package ingest

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/queengate/queengate/dedup"
	"github.com/queengate/queengate/model"
)

// bundle is one flush of a shard on its way to PostgreSQL: the oldest
// buffer of each partition it took, sent as frames in one statement and
// one transaction.
type bundle struct {
	shard   *shard
	parts   []*partState
	buffers []*buffer
}

// errNoPartition marks a partition that could not be resolved; only its
// messages fail.
var errNoPartition = errors.New("ingest: partition could not be created or read")

// sent is a bundle's frames and, per partition, what became of it.
type sent struct {
	frames  []model.Frame
	frameOf []int   // index into frames by partition, -1 for none
	windows []int   // what a full probe would unroll, as the cache estimates it
	failed  []error // a partition that could not be resolved
	results []model.FrameResult
	pushErr error
}

// fly sends the bundle and answers its requests: resolve the partitions,
// build the frames (with what the cache vouches for), push them, teach
// the cache what was written, hand the partitions back to the shard, and
// answer.
func (b *bundle) fly() {
	in := b.shard.ing
	start := time.Now()
	ctx, cancel := context.WithTimeout(in.reach.current(), in.cfg.PushTimeout)
	defer cancel()
	s := b.build(ctx)
	b.push(ctx, s, start)
	b.answer(ctx, s)
}

// resolve refreshes partition p's memo (id and window) when it is older
// than the TTL; it fails only for a partition never resolved.
func (in *Ingester) resolve(ctx context.Context, p *partState) error {
	if !p.resolvedAt.IsZero() && time.Since(p.resolvedAt) <= in.cfg.PartitionTTL {
		return nil
	}
	meta, err := in.store.EnsurePartition(ctx, p.queue, p.partition)
	switch {
	case err == nil:
		p.meta, p.resolvedAt = meta, time.Now()
	case p.resolvedAt.IsZero():
		in.log.Warn().Err(err).Str("queue", p.queue).Str("partition", p.partition).Msg("resolve partition failed")
		return errors.Join(errNoPartition, err)
	default:
		// A failed refresh keeps the id (it never changes) and the last
		// window read; the push will tell if the database is really away.
		in.log.Warn().Err(err).Str("queue", p.queue).Str("partition", p.partition).Msg("refresh partition failed")
	}
	return nil
}

// build makes a frame of each resolved partition's buffer, vouched for by
// the cache where it can.
func (b *bundle) build(ctx context.Context) *sent {
	in := b.shard.ing
	n := len(b.parts)
	s := &sent{frameOf: make([]int, n), windows: make([]int, n), failed: make([]error, n)}
	for i, p := range b.parts {
		s.frameOf[i] = -1
		if s.failed[i] = in.resolve(ctx, p); s.failed[i] != nil {
			continue
		}
		fr := b.buffers[i].frame(p.meta)
		fr.DataHashes = dataHashes(p.meta, fr.Data)
		fr.Verified, fr.Candidates, s.windows[i] = in.vouch(ctx, &p.meta, fr.Hashes)
		// The cache vouches only under the window it was asked with (it
		// rebuilds on a change); SQL ignores the vouch if the window has
		// grown since this partition's memo was read.
		fr.VerifiedWindow = p.meta.WindowSeconds
		s.frameOf[i] = len(s.frames)
		s.frames = append(s.frames, fr)
	}
	return s
}

// push sends the frames in one statement; on success the cache learns
// what they wrote.
func (b *bundle) push(ctx context.Context, s *sent, start time.Time) {
	in := b.shard.ing
	if len(s.frames) == 0 {
		return
	}
	messages := 0
	for _, fr := range s.frames {
		messages += len(fr.Hashes)
	}
	s.results, s.pushErr = in.store.Push(ctx, s.frames)
	in.metrics.observeFlush(len(s.frames), messages, time.Since(start), s.pushErr)
	if s.pushErr != nil {
		in.log.Warn().Err(s.pushErr).Int("frames", len(s.frames)).Int("messages", messages).Msg("push failed")
		if model.NotStored(s.pushErr) {
			s.pushErr = fmt.Errorf("%w: %w", ErrNotStored, s.pushErr)
		} else {
			// The statement reached the server and the outcome could not
			// be settled: the push may have been stored. Say so; a retry
			// of the same transactionId answers duplicate then.
			s.pushErr = fmt.Errorf("%w: %w", ErrOutcomeUnknown, s.pushErr)
		}
		return
	}
	in.reach.lastCommit.Store(time.Now().UnixNano())
	for j := range s.frames {
		in.learn(&s.frames[j], &s.results[j])
	}
	in.announce(b.parts, s)
}

// answer hands the partitions back to the shard, so that it can send
// them again, then answers every request. Answering may wait on NATS (a
// reconnect); the shard's buffered counts hold until it is done, so a long
// outage ends in 503s rather than unbounded memory.
func (b *bundle) answer(ctx context.Context, s *sent) {
	in := b.shard.ing
	type outcome struct {
		meta    model.Partition
		res     *model.FrameResult
		failure error
		tally   *tally
		clash   *conflicts
	}
	outcomes := make([]outcome, len(b.parts))
	for i, p := range b.parts {
		outcomes[i] = outcome{meta: p.meta, failure: s.failed[i], tally: in.tallyOf(p.meta.ID)}
		if j := s.frameOf[i]; j >= 0 {
			if s.pushErr != nil {
				outcomes[i].failure = s.pushErr
			} else {
				outcomes[i].res = &s.results[j]
				if r := &s.results[j]; !r.Settled { // a settled push reports no probe
					in.metrics.observeProbe(r, s.windows[i])
					outcomes[i].tally.probed(r.Probe)
				}
			}
		}
	}
	buffers, shard := b.buffers, b.shard
	shard.done <- b
	answered, answeredBytes := 0, int64(0)
	for i, buf := range buffers {
		// Read after the partitions are handed back: a conflict check
		// does not hold up the partition's next flush.
		outcomes[i].clash = in.findConflicts(ctx, outcomes[i].res)
		buf.resolve(outcomes[i].meta, outcomes[i].res, outcomes[i].failure, outcomes[i].clash, in.metrics, outcomes[i].tally)
		answered += buf.size
		answeredBytes += buf.bytes
	}
	shard.buffered.Add(-int64(answered))
	shard.bufferedBytes.Add(-answeredBytes)
	in.metrics.bufferDepth.Sub(float64(answered))
	in.answering.Done()
}

// vouch asks the cache for the watermark a frame may send as
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

// learn tells the cache what a committed frame wrote: the hashes of the
// messages stored, in offset order.
func (in *Ingester) learn(fr *model.Frame, res *model.FrameResult) {
	if in.cache == nil {
		return
	}
	written := fr.Hashes // the common case: everything was new
	if res.BaseOffset < 0 || res.LastOffset-res.BaseOffset+1 != int64(len(fr.Hashes)) {
		written = nil
		for k, o := range res.Outcomes {
			if !o.Duplicate {
				written = append(written, fr.Hashes[k])
			}
		}
	}
	in.cache.Learn(fr.PartitionID, res.BaseOffset, res.LastOffset, written)
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
