package ingest

import (
	"context"
	"fmt"
	"slices"

	"github.com/queengate/queengate/model"
)

// conflicts is what resolve needs to tell a frame's payload conflicts,
// for a queue that compares payloads (docs/design.md, "Payload
// conflicts"): the data hashes of the stored originals its duplicates
// name. The verdict itself is SQL's and is never changed here; only how
// a duplicate is answered.
type conflicts struct {
	mode      model.ConflictMode
	pid       int64
	originals map[int64]model.Hash // by offset; a purged original is absent
	err       error                // the originals could not be read
}

// findConflicts reads the originals a committed frame's duplicates name,
// when its queue compares payloads (as SQL read the mode, under the
// lock); nil when it does not.
func (in *Ingester) findConflicts(ctx context.Context, res *model.FrameResult) *conflicts {
	if res == nil || !res.OnConflict.Compares() {
		return nil
	}
	c := &conflicts{mode: res.OnConflict, pid: res.PartitionID}
	var offsets []int64
	for _, o := range res.Outcomes {
		if o.Duplicate {
			offsets = append(offsets, o.Offset)
		}
	}
	if len(offsets) == 0 {
		return c
	}
	slices.Sort(offsets)
	c.originals, c.err = in.store.Originals(ctx, res.PartitionID, slices.Compact(offsets))
	if c.err != nil {
		in.log.Warn().Err(c.err).Int64("partition", res.PartitionID).Msg("payload conflict check failed")
	}
	return c
}

// judge answers a duplicate whose data may differ from its original's:
// o is its leader's outcome (a stored original at o.Offset, or the leader
// itself, written now: leader). Their data is compared, not their headers.
func (c *conflicts) judge(r *model.PushOutcome, msg model.Incoming, o model.Outcome, leader model.Incoming) {
	var original model.Hash
	if o.Duplicate {
		if c.err != nil {
			// Nothing was written; saying so is true, and a retry checks again.
			r.Status, r.Err = model.StatusFailed, fmt.Errorf("%w: its original's data could not be read to check for a payload conflict: %w", ErrNotStored, c.err)
			return
		}
		h, ok := c.originals[o.Offset]
		if !ok {
			return // the original is gone: a conflict cannot be told
		}
		original = h
	} else {
		original = model.HashData(leader.Data, leader.Meta)
	}
	if model.HashData(msg.Data, msg.Meta) == original {
		return
	}
	r.Conflict = true
	if c.mode == model.ConflictReject {
		r.Status = model.StatusFailed
		r.Err = fmt.Errorf("%w: this transactionId is stored as message %s with different data; nothing was written",
			model.ErrPayloadConflict, model.MessageID(c.pid, o.Offset))
	}
}

// dataHashes is the frame's DataHashes for a queue that compares
// payloads, nil otherwise: the cost of the option falls on those queues
// only.
func dataHashes(p model.Partition, fr *model.Frame) []model.Hash {
	if !p.OnConflict.Compares() || p.WindowSeconds == 0 {
		return nil
	}
	return model.HashEachData(fr.Data, fr.Meta)
}
