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
	// epoch is the store epoch the frames were built under: their
	// partition ids and vouches come from it.
	epoch uint64
}

// messages counts the messages of the frames.
func (s *sent) messages() int {
	n := 0
	for _, fr := range s.frames {
		n += len(fr.Hashes)
	}
	return n
}

// maxLoggedTraces bounds the trace ids one log line names.
const maxLoggedTraces = 32

// traceIDs are the trace ids (model.TraceID) of the bundle's messages
// that carry a traceparent header, up to maxLoggedTraces: a failed
// push's log line names them, so that a trace leads to it.
func (s *sent) traceIDs() []string {
	var ids []string
	for _, fr := range s.frames {
		for _, m := range fr.Meta {
			if id := model.TraceID(m); id != "" && len(ids) < maxLoggedTraces {
				ids = append(ids, id)
			}
		}
	}
	return ids
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
	if errors.Is(s.pushErr, model.ErrPartitionNotFound) || errors.Is(s.pushErr, model.ErrStoreChanged) {
		// A queue was deleted since its partitions were resolved, or
		// PostgreSQL changed since the bundle was built (a failover: the
		// ids and the vouches speak of another log). The bundle was
		// refused whole, before it wrote anything: resolve every name
		// again (a deleted queue's is made afresh, with new ids) and push
		// once more, built under the store as it is now. Info, not warn:
		// it is expected, and the retry answers it.
		in.log.Info().Err(s.pushErr).Int("frames", len(s.frames)).
			Msg("push refused before writing anything (a queue deleted, or PostgreSQL changed); resolving the partitions again and pushing once more")
		for _, p := range b.parts {
			p.resolvedAt = time.Time{}
		}
		s = b.build(ctx)
		b.push(ctx, s, start)
	}
	if s.pushErr != nil {
		e := in.log.Warn().Err(s.pushErr).Int("frames", len(s.frames)).Int("messages", s.messages())
		if ids := s.traceIDs(); len(ids) > 0 {
			e = e.Strs("trace_ids", ids)
		}
		e.Msg("push failed")
	}
	b.answer(ctx, s)
}

// resolve refreshes, in one round trip, the memo (id and window) of every
// partition of parts never resolved or resolved longer than the TTL ago;
// created[i] says this very call created parts[i]. A failure fails only
// the partitions never resolved (failed[i]); a failed refresh keeps the
// id (it never changes) and the last window read, and the push will tell
// if the database is really away.
//
// A memo resolved under another store epoch than n is due too, and is not
// kept if its refresh fails: after a failover a partition id may name
// another partition (ids come from a sequence, and the new primary may
// lack the old one's last creations).
func (in *Ingester) resolve(ctx context.Context, parts []*partState, failed []error, n uint64) (created []bool) {
	created = make([]bool, len(parts))
	var due []int
	var queues, names []string
	for i, p := range parts {
		if p.resolvedAt.IsZero() || p.epoch != n || time.Since(p.resolvedAt) > in.cfg.PartitionTTL {
			due = append(due, i)
			queues, names = append(queues, p.queue), append(names, p.partition)
		}
	}
	if len(due) == 0 {
		return created
	}
	metas, made, err := in.store.EnsurePartitions(ctx, queues, names)
	if err != nil {
		in.log.Warn().Err(err).Int("partitions", len(due)).Msg("resolve partitions failed")
	}
	now := time.Now()
	for k, i := range due {
		p := parts[i]
		switch {
		case err == nil && metas[k].ID != 0:
			p.meta, p.resolvedAt, p.epoch, created[i] = metas[k], now, n, made[k]
		case p.resolvedAt.IsZero() || p.epoch != n:
			failure := err
			if failure == nil {
				failure = errNotEnsured
				in.log.Warn().Str("queue", p.queue).Str("partition", p.partition).Msg("resolve partition failed")
			}
			failed[i] = errors.Join(errNoPartition, failure)
		}
	}
	return created
}

// errNotEnsured is a partition the store left out of its answer (a name
// the schema refuses).
var errNotEnsured = errors.New("ingest: the store did not create or read the partition")

// build makes a frame of each resolved partition's buffer, vouched for by
// the cache where it can.
func (b *bundle) build(ctx context.Context) *sent {
	in := b.shard.ing
	n := len(b.parts)
	s := &sent{frames: make([]model.Frame, 0, n), frameOf: make([]int, n), windows: make([]int, n), failed: make([]error, n),
		epoch: in.epoch(ctx)}
	created := in.resolve(ctx, b.parts, s.failed, s.epoch)
	for i, p := range b.parts {
		s.frameOf[i] = -1
		if s.failed[i] != nil {
			continue
		}
		fr := b.buffers[i].frame(p.meta)
		fr.DataHashes = dataHashes(p.meta, &fr)
		s.frameOf[i] = len(s.frames)
		s.frames = append(s.frames, fr)
	}
	in.vouchAll(ctx, b.parts, s, created)
	return s
}

// push sends the frames in one statement; on success the cache learns
// what they wrote.
func (b *bundle) push(ctx context.Context, s *sent, start time.Time) {
	in := b.shard.ing
	if len(s.frames) == 0 {
		return
	}
	var at uint64
	s.results, at, s.pushErr = in.store.PushUnder(ctx, s.epoch, s.frames)
	in.metrics.observeFlush(len(s.frames), s.messages(), time.Since(start), s.pushErr)
	if s.pushErr != nil {
		// Logged by fly, which knows whether it retries.
		if model.NotStored(s.pushErr) {
			s.pushErr = fmt.Errorf("%w: %w", ErrNotStored, s.pushErr)
		} else {
			// The statement reached the server and the outcome could not
			// be settled: the push may have been stored. Say so; a retry
			// of the same transactionId answers duplicate then.
			s.pushErr = fmt.Errorf("%w: %w", ErrOutcomeUnknown, s.pushErr)
		}
		in.dropTails(s.frames)
		return
	}
	in.reach.lastCommit.Store(time.Now().UnixNano())
	// A settled push (at 0) was answered from wherever the settling read:
	// journaled under the bundle's epoch, checked against any later one.
	in.journal.record(s.epoch, s.frames, s.results)
	for j := range s.frames {
		in.learn(at, &s.frames[j], &s.results[j])
		in.feedTail(at, &s.frames[j], &s.results[j])
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
		tally   counted
		clash   *conflicts
	}
	outcomes := make([]outcome, len(b.parts))
	for i, p := range b.parts {
		outcomes[i] = outcome{meta: p.meta, failure: s.failed[i], tally: in.tallyOf(p.meta.ID, p.meta.QueueID)}
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

// vouchAll asks the cache, for each frame of s, for the watermark it may
// send as p_verified and the stored slots SQL must check below it (the
// resident occurrences of its hashes); windows estimate what a full probe
// would unroll. The entries that need a hydration are hydrated together,
// in one round trip, before their frames are decided. Any failure only
// costs the full probe (-1), never a verdict.
func (in *Ingester) vouchAll(ctx context.Context, parts []*partState, s *sent, created []bool) {
	var hydrate []int // parts waiting for a hydration
	for i, p := range parts {
		j := s.frameOf[i]
		if j < 0 {
			continue
		}
		fr := &s.frames[j]
		if in.cache == nil || p.meta.WindowSeconds == 0 {
			s.windows[i] = 0 // window 0: the probe does not run anyway
		} else if d := in.decide(ctx, s.epoch, &p.meta, fr.Hashes, created[i]); d.Hydrate {
			hydrate = append(hydrate, i)
			continue
		} else {
			s.windows[i] = in.apply(d, fr)
		}
		// The cache vouches only under the window it was asked with (it
		// rebuilds on a change); SQL ignores the vouch if the window has
		// grown since this partition's memo was read.
		fr.VerifiedWindow = p.meta.WindowSeconds
	}
	if len(hydrate) > 0 {
		in.hydrate(ctx, parts, s, hydrate)
	}
}

// decide is the cache's answer for a frame of partition meta before any
// hydration: a fill heals a gap where it can, and a partition this flush
// created is born an entry without a read.
//
// A created partition held no message when created, so its entry is what
// a hydration then would have read: nothing, at allocator -1. That stays
// exact even if another gateway pushes to the partition right after its
// creation, before this push: the entry vouches for (-1, -1], which holds
// no offset, so its first push goes with p_verified -1 and SQL probes
// whatever is stored (log_push_bundle probes above the purge watermark
// without a vouch). The entry then only grows by Learn and Fill, which
// extend it only when the push's offsets follow its watermark exactly
// (another writer's rows first make a gap, healed by a fill or a
// hydration). Births pass the cache's admission gate like hydrations:
// only an entry the gate admits is installed.
func (in *Ingester) decide(ctx context.Context, n uint64, meta *model.Partition, hashes []model.Hash, created bool) dedup.Decision {
	windowMs := int64(meta.WindowSeconds) * 1000
	d := in.cache.Decide(meta.ID, windowMs, hashes)
	if d.Fill && in.fill(ctx, n, meta, d.FillFrom) {
		d = in.cache.Decide(meta.ID, windowMs, hashes)
	}
	if d.Fill {
		// The fill could not heal the entry: only a hydration can.
		d.Hydrate = true
	}
	if d.Hydrate && created {
		// Created by this flush's resolution, under epoch n or later.
		in.underEpoch(n, func() { in.cache.Birth(meta.ID, windowMs) })
		d = in.cache.Decide(meta.ID, windowMs, hashes)
	}
	return d
}

// hydrate reads the windows of the partitions waiting (indexes into parts)
// in one round trip, installs them, and decides their frames. A
// hydration reads the window too: when it differs from the memo's, the
// memo is stale (a /configure since it was read) and takes the fresher
// value, or the cache would see a window change on every flush until the
// memo's TTL and rehydrate each time.
func (in *Ingester) hydrate(ctx context.Context, parts []*partState, s *sent, waiting []int) {
	pids := make([]int64, len(waiting))
	for k, i := range waiting {
		pids[k] = parts[i].meta.ID
	}
	hs, err := in.store.HydrateMany(ctx, pids)
	if err != nil {
		in.log.Warn().Err(err).Int("partitions", len(pids)).Msg("dedup cache hydration failed")
	}
	nowMs := in.cache.NowMs()
	for _, i := range waiting {
		meta, fr := &parts[i].meta, &s.frames[s.frameOf[i]]
		fr.VerifiedWindow = meta.WindowSeconds
		h, found := hs[meta.ID]
		if !found {
			if err == nil {
				in.log.Warn().Int64("partition", meta.ID).Msg("dedup cache hydration found no partition")
			}
			continue // the full probe
		}
		in.underEpoch(h.Epoch, func() { in.cache.Install(meta.ID, toDedupHydration(h, nowMs)) })
		if h.WindowSeconds == 0 {
			// Deduplication was turned off. The memo keeps its window until
			// its TTL: this frame was built (leaders only) for a window on,
			// and its answers must be resolved the same way.
			continue
		}
		meta.WindowSeconds = h.WindowSeconds
		fr.VerifiedWindow = meta.WindowSeconds
		s.windows[i] = in.apply(in.cache.Decide(meta.ID, int64(meta.WindowSeconds)*1000, fr.Hashes), fr)
	}
}

// apply puts the cache's decision d on frame fr and returns the window
// estimate.
func (in *Ingester) apply(d dedup.Decision, fr *model.Frame) (window int) {
	if d.Hit {
		in.metrics.cacheHits.Inc()
	}
	if d.Verified < 0 {
		fr.Verified, fr.Candidates = -1, nil
		return d.WindowHashes
	}
	fr.Verified = d.Verified
	fr.Candidates = make([]model.Candidate, len(d.Candidates))
	for i, c := range d.Candidates {
		fr.Candidates[i] = model.Candidate{Index: c.Index, Offset: c.Offset}
	}
	return d.WindowHashes
}

// fill reads what partition meta's entry missed above from and hands it
// to the cache; it reports whether the entry vouches again. Any failure
// leaves the way back to a full hydration.
func (in *Ingester) fill(ctx context.Context, n uint64, meta *model.Partition, from int64) (filled bool) {
	h, err := in.store.HydrateAbove(ctx, meta.ID, from)
	if err != nil {
		in.log.Warn().Err(err).Int64("partition", meta.ID).Msg("dedup cache fill failed")
		return false
	}
	in.underEpoch(h.Epoch, func() {
		filled = in.cache.Fill(meta.ID, from, int64(h.WindowSeconds)*1000, toDedupHydration(h, in.cache.NowMs()).Ranges, h.LastOffset)
	})
	return filled
}

// learn tells the cache what a committed frame wrote, on a connection of
// epoch n: the hashes of the messages stored, in offset order. A frame
// that finds the allocator below the watermark it vouched for met a log
// shorter than the one its entry learned, though the server's identity
// did not change (a crash that lost commits acknowledged with
// synchronous_commit off): SQL did not honour that vouch, and the store
// is distrusted, which drops the cache as a failover does.
func (in *Ingester) learn(n uint64, fr *model.Frame, res *model.FrameResult) {
	if in.cache == nil {
		return
	}
	if fr.Verified >= 0 && !res.Settled && (res.LastOffset < fr.Verified || (res.BaseOffset >= 0 && res.BaseOffset <= fr.Verified)) {
		in.log.Error().Int64("partition", fr.PartitionID).Int64("vouched", fr.Verified).Int64("allocator", res.LastOffset).
			Msg("PostgreSQL's log is shorter than this gateway wrote it: distrusting it")
		in.store.Distrust(n)
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
	in.underEpoch(n, func() { in.cache.Learn(fr.PartitionID, res.BaseOffset, res.LastOffset, written) })
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
