package groups

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"

	"github.com/jackc/pgx/v5"

	"github.com/queengate/queengate/model"
	"github.com/queengate/queengate/pgstore/internal/pgwire"
	"github.com/queengate/queengate/pgstore/internal/readpool"
)

// DeadLetters returns up to limit dead letters of queue's partition not
// yet redriven that f selects, in offset order, and whether more are
// left; none when the queue has no dead letters there. skipped counts
// messages of the dead-letter partition it passed that are not dead
// letters of queue (pushed there by hand, say). ErrQueueNotFound for a
// queue that does not exist. The dead-letter partition is read on the
// read pool.
func (s *Store) DeadLetters(ctx context.Context, queue, partition string, f model.DeadLetterFilter, limit int) (
	pending []model.PendingDeadLetter, skipped int, more bool, err error) {
	g, dlq, err := s.redriveCursor(ctx, queue, partition, false)
	if err != nil || dlq == 0 {
		return nil, 0, false, err
	}
	err = s.reads.Read(ctx, func(ctx context.Context, q readpool.Querier) (bool, error) {
		var err error
		pending, skipped, more, err = pendingDeadLetters(ctx, q, g, dlq, queue, partition, f, limit)
		return false, err
	})
	return pending, skipped, more, err
}

// Redrive pushes up to limit dead letters of queue's partition that f
// selects back to that partition, each with its original transactionId
// and data, and consumes them from the dead-letter queue under
// model.RedriveGroup, in one transaction: either both happen or neither,
// so a retried or interrupted redrive moves each dead letter once
// (docs/protocol.md, "Redrive"). The push goes through log_push_bundle,
// vouched as a timer's fire is, so the window does not refuse the
// original transactionId, which the partition already holds.
func (s *Store) Redrive(ctx context.Context, queue, partition string, f model.DeadLetterFilter, limit int) (model.Redriven, error) {
	var out model.Redriven
	g, dlq, err := s.redriveCursor(ctx, queue, partition, true)
	if err != nil || dlq == 0 {
		return out, err
	}
	pending, skipped, more, err := pendingDeadLetters(ctx, s.pool, g, dlq, queue, partition, f, limit)
	out.Skipped, out.More = skipped, more
	if err != nil || len(pending) == 0 {
		return out, err
	}
	pending, out.Skipped = s.withData(ctx, pending, out.Skipped)
	if len(pending) == 0 {
		return out, nil
	}
	orig, err := s.log.EnsurePartition(ctx, queue, partition)
	if err != nil {
		return out, err
	}
	offsets := make([]int64, len(pending))
	for i, p := range pending {
		offsets[i] = p.Offset
	}
	err = pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		still, err := stillPending(ctx, tx, g.ID, dlq, offsets)
		if err != nil || len(still) == 0 {
			return err // another redrive moved them meanwhile
		}
		first, last, err := pushBack(ctx, tx, orig.ID, pending, still)
		if err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, "SELECT queen.consumer_redriven($1, $2, $3)", g.ID, dlq, still); err != nil {
			return err
		}
		out.Moved, out.FirstOffset, out.LastOffset = len(still), first, last
		return nil
	})
	if err != nil {
		return model.Redriven{}, fmt.Errorf("pgstore: redrive of %s/%s: %w", queue, partition, err)
	}
	return out, nil
}

// stillPending locks group groupID's cursor row on partition pid and
// returns which of offsets are not done for the group
// (queen.consumer_dead_letter_pending).
func stillPending(ctx context.Context, tx pgx.Tx, groupID, pid int64, offsets []int64) ([]int64, error) {
	rows, err := tx.Query(ctx, "SELECT o FROM queen.consumer_dead_letter_pending($1, $2, $3) AS o", groupID, pid, offsets)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, pgx.RowTo[int64])
}

// redriveCursor finds the redrive group of queue's dead-letter queue
// (create: creating it; otherwise ID 0 when there is none yet), and the
// id of the dead-letter partition named partition; 0 when the queue has
// no dead letters there. A list creates no group: the group holds the
// dead-letter queue's retention when it waits for consumption.
func (s *Store) redriveCursor(ctx context.Context, queue, partition string, create bool) (model.Group, int64, error) {
	if _, err := s.log.QueueConfig(ctx, queue); err != nil {
		return model.Group{}, 0, err
	}
	find := s.FindGroup
	if create {
		find = s.EnsureGroup
	}
	g, err := find(ctx, model.DeadLetterQueue(queue), model.RedriveGroup)
	switch {
	case errors.Is(err, model.ErrQueueNotFound):
		return g, 0, nil
	case errors.Is(err, model.ErrGroupNotFound):
		g.ID = 0 // nothing redriven yet
	case err != nil:
		return g, 0, err
	}
	dlq, err := s.PartitionID(ctx, g.QueueID, partition)
	if errors.Is(err, model.ErrNotFound) {
		return g, 0, nil
	}
	return g, dlq, err
}

// redriveSegments is how many segments of a dead-letter partition one
// read takes.
const redriveSegments = 64

// pendingDeadLetters reads dead-letter partition dlq from the redrive
// group's cursor on, leaving out what the group has done, and keeps the
// dead letters of queue's partition that f selects, up to limit; through
// q (the read pool for a listing, the primary's for a redrive).
func pendingDeadLetters(ctx context.Context, q readpool.Querier, g model.Group, dlq int64, queue, partition string,
	f model.DeadLetterFilter, limit int) (pending []model.PendingDeadLetter, skipped int, more bool, err error) {
	var from int64
	var done []int64
	// No cursor (no redrive yet): every dead letter waits, from offset 0.
	if err := q.QueryRow(ctx, `
		SELECT c.next_offset, coalesce((SELECT array_agg(m.off) FROM queen.consumer_marks m
		                                 WHERE m.group_id = c.group_id AND m.partition_id = c.partition_id AND m.done), '{}')
		  FROM queen.consumer_cursors c WHERE c.group_id = $1 AND c.partition_id = $2`, g.ID, dlq).Scan(&from, &done); err != nil &&
		!errors.Is(err, pgx.ErrNoRows) {
		return nil, 0, false, fmt.Errorf("pgstore: redrive cursor of %s: %w", g.Queue, err)
	}
	isDone := make(map[int64]bool, len(done))
	for _, o := range done {
		isDone[o] = true
	}
	for {
		rows, err := q.Query(ctx, "SELECT base_offset, data::text[] FROM queen.log_read($1, $2, $3)", dlq, from, redriveSegments)
		if err != nil {
			return nil, 0, false, err
		}
		var segs int
		var base int64
		var data []*string
		_, err = pgx.ForEachRow(rows, []any{&base, &data}, func() error {
			segs++
			for i, d := range data {
				off := base + int64(i)
				from = off + 1
				if isDone[off] {
					continue
				}
				letter, ok := deadLetterOf(d, queue, partition)
				switch {
				case !ok:
					skipped++
				case !f.Matches(letter):
				case len(pending) == limit:
					more = true
				default:
					pending = append(pending, model.PendingDeadLetter{Offset: off, Letter: letter})
				}
			}
			return nil
		})
		if err != nil || more || segs < redriveSegments {
			return pending, skipped, more, err
		}
	}
}

// deadLetterOf decodes a dead-letter partition's message d: false when it
// is not a dead letter of queue's partition.
func deadLetterOf(d *string, queue, partition string) (model.DeadLetter, bool) {
	var letter model.DeadLetter
	if d == nil || json.Unmarshal([]byte(*d), &letter) != nil {
		return letter, false
	}
	_, _, idErr := model.ParseMessageID(letter.MessageID)
	whole := letter.Data != nil || letter.DataOmitted != nil
	return letter, letter.Queue == queue && letter.Partition == partition && letter.TxnID != "" && idErr == nil && whole
}

// withData fills in the data of dead letters that left it out, from the
// original while retention keeps it; those whose original is gone are
// dropped and counted in skipped.
func (s *Store) withData(ctx context.Context, pending []model.PendingDeadLetter, skipped int) ([]model.PendingDeadLetter, int) {
	kept := pending[:0]
	for _, p := range pending {
		if p.Letter.DataOmitted != nil {
			pid, off, _ := model.ParseMessageID(p.Letter.MessageID) // checked by deadLetterOf
			m, _, _, err := s.log.MessageAt(ctx, pid, off)
			if err != nil || m.TxnID != p.Letter.TxnID {
				skipped++
				continue
			}
			p.Letter.Data, p.Letter.Headers, p.Letter.DataEncoding = m.Data, model.MetaHeadersRaw(m.Meta), model.DataEncoding(m.Meta)
		}
		kept = append(kept, p)
	}
	return kept, skipped
}

// pushBack writes the dead letters of pending at offsets still to
// partition pid, in tx, under their original transactionIds and data,
// and returns the first and last offsets written (fewer than the dead
// letters when two carry one transactionId: in a queue with a window the
// bundle writes a repeat within it once). Vouched to the highest offset
// (as a timer's fire is), log_push_bundle does not probe: the guarantee
// is the redrive's transaction, not the window.
func pushBack(ctx context.Context, tx pgx.Tx, pid int64, pending []model.PendingDeadLetter, still []int64) (first, last int64, err error) {
	fr := model.Frame{PartitionID: pid, Verified: math.MaxInt64, VerifiedWindow: math.MaxInt32}
	for _, p := range pending {
		if !slices.Contains(still, p.Offset) {
			continue
		}
		data := []byte(p.Letter.Data)
		if string(data) == "null" {
			data = nil
		}
		id, meta := p.Letter.TxnID, p.Letter.Meta()
		fr.Meta = model.WithMeta(fr.Meta, len(fr.TxnIDs), meta)
		fr.TxnIDs, fr.Hashes = append(fr.TxnIDs, id), append(fr.Hashes, model.HashTxnID(id))
		fr.Data, fr.DataHashes = append(fr.Data, data), append(fr.DataHashes, model.HashData(data, meta))
	}
	res, err := pgwire.PushBundle(ctx, tx.Conn(), []model.Frame{fr})
	if err != nil {
		return 0, 0, fmt.Errorf("push back: %w", err)
	}
	return res[0].BaseOffset, res[0].LastOffset, nil
}
