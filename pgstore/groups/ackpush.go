package groups

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/queengate/queengate/model"
	"github.com/queengate/queengate/pgstore/internal/pgwire"
)

// AckAndPush completes items of group g's lease on partitionID and
// stores the derived messages, in one transaction: both happen or
// neither (docs/protocol.md, "Ack and push"). It commits only when every
// item answers acked or alreadyAcked; otherwise, and when a derived
// message is a payload conflict in a queue that rejects them or goes to
// a queue without deduplication (a retry could not be answered exactly),
// it changes nothing and returns an error wrapping
// model.ErrNotCommitted that says why. A retried request answers
// alreadyAcked for its items and duplicate, with the original's offset,
// for the derived messages it stored.
//
// The derived messages' verdict is log_push_bundle's full probe (no
// vouch): SQL alone decides, so it is exact whatever any gateway's
// dedup cache holds. The caches learn nothing here; each meets these
// rows as another writer's, above its watermark, which its next push to
// the partition probes and a fill then reads (ingest, "decide").
//
// Lock order (LOCKS.md, "Ack and push"): the target partitions (and
// their queues) are created first, in their own transaction, as a push
// creates them (queue rows come before everything). Then, in one
// transaction: the source's cursor row FOR UPDATE (consumer_ack), then
// every target partition row FOR UPDATE in ascending id
// (log_push_bundle): cursor row before partition rows, as dead-lettering
// and redrive take them.
func (s *Store) AckAndPush(ctx context.Context, g model.Group, partitionID int64, leaseID string, items []model.Settlement,
	derived []model.Derived) (model.AckPushResult, error) {
	for i, it := range items {
		if !it.Completed {
			return model.AckPushResult{}, fmt.Errorf("item %d is failed: an ack-and-push completes its items; %w", i, model.ErrNotCommitted)
		}
	}
	frames, at, err := s.derivedFrames(ctx, derived)
	if err != nil {
		return model.AckPushResult{}, err
	}
	var out model.AckPushResult
	err = pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		out = model.AckPushResult{Ack: model.SettledBatch{Items: make([]model.AckOutcome, len(items))}}
		if err := s.ackAll(ctx, tx, g, partitionID, leaseID, items, &out.Ack); err != nil {
			return err
		}
		if len(frames) == 0 {
			return nil
		}
		out.Pushed, err = pushDerived(ctx, tx, frames, at)
		return err
	})
	switch {
	case errors.Is(err, model.ErrNotCommitted):
		// Every item leaseNotHeld may be a deleted group: asked once the
		// transaction's connection is back (never two at once).
		if gone := s.notHeldInGroup(ctx, g, out.Ack.Items); gone != nil {
			return model.AckPushResult{}, gone
		}
		return model.AckPushResult{}, err
	case err != nil:
		return model.AckPushResult{}, fmt.Errorf("pgstore: ack and push %s/%s: %w", g.Queue, g.Name, err)
	}
	return out, nil
}

// derivedAt is where a derived message sits among the frames: frame and
// position in it.
type derivedAt struct{ frame, pos int }

// derivedFrames creates the derived messages' partitions (queues too, as
// a push does) and groups the messages into one frame per partition, in
// request order within each, probing the whole window (Verified -1).
func (s *Store) derivedFrames(ctx context.Context, derived []model.Derived) ([]model.Frame, []derivedAt, error) {
	if len(derived) == 0 {
		return nil, nil, nil
	}
	type place struct{ queue, partition string }
	index := map[place]int{}
	var queues, partitions []string
	at := make([]derivedAt, len(derived))
	for i, d := range derived {
		p := place{d.Queue, d.Partition}
		j, ok := index[p]
		if !ok {
			j = len(queues)
			index[p] = j
			queues, partitions = append(queues, d.Queue), append(partitions, d.Partition)
		}
		at[i].frame = j
	}
	parts, _, err := s.log.EnsurePartitions(ctx, queues, partitions)
	if err != nil {
		return nil, nil, err
	}
	frames := make([]model.Frame, len(parts))
	for j, p := range parts {
		frames[j] = model.Frame{PartitionID: p.ID, Verified: -1}
	}
	for i, d := range derived {
		fr := &frames[at[i].frame]
		at[i].pos = len(fr.TxnIDs)
		fr.TxnIDs, fr.Hashes = append(fr.TxnIDs, d.TxnID), append(fr.Hashes, model.HashTxnID(d.TxnID))
		fr.Data, fr.DataHashes = append(fr.Data, d.Data), append(fr.DataHashes, model.HashData(d.Data, d.Meta))
		fr.Meta = model.WithMeta(fr.Meta, at[i].pos, d.Meta)
	}
	return frames, at, nil
}

// ackAll settles items in tx (consumer_ack takes the cursor row) and
// refuses, with model.ErrNotCommitted, unless every one answers acked or
// alreadyAcked.
func (s *Store) ackAll(ctx context.Context, tx pgx.Tx, g model.Group, partitionID int64, leaseID string, items []model.Settlement,
	out *model.SettledBatch) error {
	row, err := queryAck(ctx, tx, g, partitionID, leaseUUID(leaseID), items, out)
	if err != nil {
		return err
	}
	row.outcomes(out.Items, partitionID) // all completed: nothing to dead-letter
	// An item settled by its dead letter was not processed by this
	// pipeline: deadLettered, not alreadyAcked, refuses the request.
	if err := markDeadLettered(ctx, tx, g, partitionID, out.Items); err != nil {
		return err
	}
	for i, o := range out.Items {
		if o.Result != model.AckAcked && o.Result != model.AckAlready {
			return fmt.Errorf("item %d answered %s, not acked; %w", i, o.Result, model.ErrNotCommitted)
		}
	}
	return nil
}

// pushDerived writes frames in tx through log_push_bundle (which takes
// their partition rows in ascending id) and answers each derived message
// where it is. A frame whose queue has no deduplication (window 0), or a
// payload conflict in a queue that rejects them, refuses the request
// with model.ErrNotCommitted: read under the locks, like the verdicts.
func pushDerived(ctx context.Context, tx pgx.Tx, frames []model.Frame, at []derivedAt) ([]model.DerivedOutcome, error) {
	res, err := pgwire.PushBundle(ctx, tx.Conn(), frames)
	if err != nil {
		return nil, err
	}
	out := make([]model.DerivedOutcome, len(at))
	for i, a := range at {
		r := &res[a.frame]
		if r.Probe == model.ProbeOff {
			return nil, fmt.Errorf("derived message %d: its queue does not deduplicate (dedupWindowSeconds 0), so a retry would store it again; %w",
				i, model.ErrNotCommitted)
		}
		o := r.Outcomes[a.pos]
		out[i] = model.DerivedOutcome{PartitionID: r.PartitionID, Offset: o.Offset, Duplicate: o.Duplicate}
	}
	return out, judgeConflicts(ctx, tx, frames, res, at, out)
}

// judgeConflicts compares each duplicate's data with its original's in
// a queue that compares payloads (as the push path does, but here under
// the locks, in the transaction): a conflict is flagged, or refuses the
// request in a queue that rejects them.
func judgeConflicts(ctx context.Context, tx pgx.Tx, frames []model.Frame, res []model.FrameResult, at []derivedAt,
	out []model.DerivedOutcome) error {
	for j := range res {
		if !res[j].OnConflict.Compares() {
			continue
		}
		var offsets []int64
		for _, o := range res[j].Outcomes {
			if o.Duplicate {
				offsets = append(offsets, o.Offset)
			}
		}
		if len(offsets) == 0 {
			continue
		}
		stored, err := pgwire.Originals(ctx, tx, res[j].PartitionID, offsets)
		if err != nil {
			return err
		}
		for i, a := range at {
			h, known := stored[out[i].Offset]
			if a.frame != j || !out[i].Duplicate || !known || h == frames[j].DataHashes[a.pos] {
				continue // an original retention removed cannot be compared
			}
			if res[j].OnConflict == model.ConflictReject {
				return fmt.Errorf("derived message %d: payload conflict: its transactionId is stored as message %s with different data; %w",
					i, model.MessageID(out[i].PartitionID, out[i].Offset), model.ErrNotCommitted)
			}
			out[i].Conflict = true
		}
	}
	return nil
}
