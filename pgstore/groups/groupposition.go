package groups

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/queengate/queengate/model"
	"github.com/queengate/queengate/pgstore/internal/readpool"
)

// CreateGroup creates queue's consumer group name with start position
// start, its cursors moved there in the same transaction
// (queen.consumer_group_create, then queen.consumer_group_seek), and says
// where each went. A group that exists is left as it is: Created false
// when it was created with the same start, ErrGroupExists when with
// another. ErrQueueNotFound for a queue that does not exist; ErrNotFound
// for a partition start.Offsets names that does not exist (nothing is
// created).
func (s *Store) CreateGroup(ctx context.Context, queue, name string, start model.GroupStart) (model.GroupCreated, error) {
	out := model.GroupCreated{Group: model.Group{Queue: queue, Name: name}}
	canonical := startJSON(start)
	q, err := s.log.QueueConfig(ctx, queue)
	if err != nil {
		return out, err
	}
	out.QueueID = q.ID
	err = pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		var had string
		if err := tx.QueryRow(ctx, "SELECT group_id, created, start FROM queen.consumer_group_create($1, $2, $3)",
			q.ID, name, canonical).Scan(&out.ID, &out.Created, &had); err != nil {
			return err
		}
		switch {
		case !out.Created && had != canonical:
			return fmt.Errorf("%w: %q of queue %s was created with start %s, not %s (delete it first to create it anew)",
				model.ErrGroupExists, name, queue, had, canonical)
		case !out.Created:
			return nil
		}
		out.Moves, err = startMoves(ctx, tx, out.Group, start)
		return err
	})
	if err != nil && !errors.Is(err, model.ErrGroupExists) && !errors.Is(err, model.ErrNotFound) {
		err = fmt.Errorf("pgstore: create consumer group %s/%s: %w", queue, name, err)
	}
	return out, err
}

// startMoves moves a new group's cursors to start, in tx.
func startMoves(ctx context.Context, tx pgx.Tx, g model.Group, start model.GroupStart) ([]model.GroupMove, error) {
	switch start.From {
	case model.StartLatest:
		return seekIn(ctx, tx, g.ID, nil, nil, nil)
	case model.StartTime:
		return seekIn(ctx, tx, g.ID, nil, nil, &start.Time)
	case model.StartOffsets:
		names := make([]string, 0, len(start.Offsets))
		for p := range start.Offsets {
			names = append(names, p)
		}
		// Cursors locked in one order, whatever the map's; the partitions
		// not named stay at 0.
		sort.Strings(names)
		moves, err := unmoved(ctx, tx, g.ID)
		if err != nil {
			return nil, err
		}
		for _, p := range names {
			var pid int64
			err := tx.QueryRow(ctx, "SELECT id FROM queen.log_partitions WHERE queue_id = $1 AND name = $2", g.QueueID, p).Scan(&pid)
			if errors.Is(err, pgx.ErrNoRows) {
				return nil, fmt.Errorf("%w: partition %q of queue %s (named in \"offsets\")", model.ErrNotFound, p, g.Queue)
			}
			if err != nil {
				return nil, err
			}
			off := start.Offsets[p]
			m, err := seekIn(ctx, tx, g.ID, &pid, &off, nil)
			if err != nil {
				return nil, err
			}
			for i := range moves {
				if moves[i].Partition == p && len(m) == 1 {
					moves[i] = m[0]
				}
			}
		}
		return moves, nil
	}
	return unmoved(ctx, tx, g.ID) // earliest: where the cursors are made
}

// unmoved lists a new group's cursors where they were made, at 0 (a pop
// starts from the first message stored): a create at the earliest moves
// nothing, and says on how many partitions it starts.
func unmoved(ctx context.Context, tx pgx.Tx, groupID int64) ([]model.GroupMove, error) {
	rows, err := tx.Query(ctx, `SELECT p.name, c.next_offset, c.next_offset, false, false
		FROM queen.consumer_cursors c JOIN queen.log_partitions p ON p.id = c.partition_id
		WHERE c.group_id = $1 ORDER BY p.name`, groupID)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, pgx.RowToStructByPos[model.GroupMove])
}

// startJSON is the canonical form of a start position, stored with the
// group and compared by a create of a group that exists.
func startJSON(start model.GroupStart) string {
	var v any
	switch start.From {
	case model.StartOffsets:
		v = map[string]map[string]int64{"offsets": start.Offsets} // keys sorted by the encoder
	case model.StartTime:
		v = map[string]string{"time": start.Time.UTC().Format(time.RFC3339Nano)}
	case "":
		v = model.StartEarliest
	default:
		v = start.From
	}
	b, _ := json.Marshal(v) // strings and numbers: cannot fail
	return string(b)
}

// SeekGroup moves queue's consumer group name, on every partition or the
// one seek names, to seek's offset or time (queen.consumer_group_seek),
// ending the leases running there, and says what moved on each.
// ErrQueueNotFound, ErrGroupNotFound, or ErrNotFound for a partition that
// does not exist.
func (s *Store) SeekGroup(ctx context.Context, queue, name string, seek model.Seek) (model.Group, []model.GroupMove, error) {
	g, err := s.FindGroup(ctx, queue, name)
	if err != nil {
		return g, nil, err
	}
	var pid *int64
	if seek.Partition != "" {
		id, err := s.PartitionID(ctx, g.QueueID, seek.Partition)
		if err != nil {
			return g, nil, err
		}
		pid = &id
	}
	var off *int64
	var at *time.Time
	if seek.Time.IsZero() {
		off = &seek.Offset
	} else {
		at = &seek.Time
	}
	var moves []model.GroupMove
	err = pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		var exists bool
		if err := tx.QueryRow(ctx, "SELECT EXISTS (SELECT 1 FROM queen.consumer_groups WHERE id = $1)", g.ID).Scan(&exists); err != nil || !exists {
			if err == nil {
				err = groupNotFound(queue, name)
			}
			return err
		}
		moves, err = seekIn(ctx, tx, g.ID, pid, off, at)
		return err
	})
	if err != nil && !errors.Is(err, model.ErrGroupNotFound) {
		err = fmt.Errorf("pgstore: seek consumer group %s/%s: %w", queue, name, err)
	}
	return g, moves, err
}

// seekIn runs queen.consumer_group_seek in tx: offset and at both nil is
// the end ("latest").
func seekIn(ctx context.Context, tx pgx.Tx, groupID int64, partitionID, offset *int64, at *time.Time) ([]model.GroupMove, error) {
	rows, err := tx.Query(ctx, `SELECT partition, old_offset, new_offset, clamped, lease_ended
		FROM queen.consumer_group_seek(@group_id, @partition_id, @offset, @at)`,
		pgx.NamedArgs{"group_id": groupID, "partition_id": partitionID, "offset": offset, "at": at})
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, pgx.RowToStructByPos[model.GroupMove])
}

// GroupActivity says, for every group of the queue, how long it has been
// idle (queen.consumer_group_active_at) and whether it no longer holds
// retention back: idle past the queue's groupIdleSeconds (0: always
// holds). It reads on the read pool.
func (s *Store) GroupActivity(ctx context.Context, queueID int64) ([]model.GroupActivity, error) {
	return readpool.List(ctx, s.reads, func(ctx context.Context, q readpool.Querier) ([]model.GroupActivity, error) {
		return groupActivity(ctx, q, queueID)
	})
}

func groupActivity(ctx context.Context, q readpool.Querier, queueID int64) ([]model.GroupActivity, error) {
	rows, err := q.Query(ctx, `
		SELECT g.name, greatest(extract(epoch FROM now() - a.at), 0)::float8,
		       q.group_idle_seconds > 0 AND a.at < now() - make_interval(secs => q.group_idle_seconds)
		  FROM queen.consumer_groups g JOIN queen.queues q ON q.id = g.queue_id
		 CROSS JOIN LATERAL queen.consumer_group_active_at(g.id, now()) AS a(at)
		 WHERE g.queue_id = $1
		 ORDER BY g.name`, queueID)
	if err != nil {
		return nil, fmt.Errorf("pgstore: groups' activity: %w", err)
	}
	return pgx.CollectRows(rows, func(row pgx.CollectableRow) (model.GroupActivity, error) {
		var (
			a    model.GroupActivity
			idle float64
		)
		err := row.Scan(&a.Group, &idle, &a.NotHolds)
		a.IdleFor = time.Duration(idle * float64(time.Second))
		return a, err
	})
}

// idleGroupsSQL finds the groups idle past their queue's
// groupIdleSeconds; only queues with the option are looked at, so a
// store without it pays a scan of the queues.
const idleGroupsSQL = `
SELECT g.id, q.name, g.name, a.at
  FROM queen.queues q JOIN queen.consumer_groups g ON g.queue_id = q.id
 CROSS JOIN LATERAL queen.consumer_group_active_at(g.id, now()) AS a(at)
 WHERE q.group_idle_seconds > 0 AND a.at < now() - make_interval(secs => q.group_idle_seconds)
 ORDER BY g.id`

// IdleGroups lists the groups idle past their queue's groupIdleSeconds:
// retention does not wait for them.
func (s *Store) IdleGroups(ctx context.Context) ([]model.IdleGroup, error) {
	rows, err := s.pool.Query(ctx, idleGroupsSQL)
	if err != nil {
		return nil, fmt.Errorf("pgstore: idle groups: %w", err)
	}
	return pgx.CollectRows(rows, pgx.RowToStructByPos[model.IdleGroup])
}

// noteActiveSQL moves each group's active_at up to now less its ago
// (never back: several gateways write the same groups), and answers the
// groups it skipped: a group row another transaction holds (a pop of the
// group, a seek, a delete) is not waited for. A group that no longer
// exists is neither written nor skipped.
const noteActiveSQL = `
WITH n AS (SELECT * FROM unnest($1::bigint[], $2::float8[]) AS n(id, ago)),
     free AS (SELECT l.id FROM queen.consumer_groups l WHERE l.id = ANY($1) FOR NO KEY UPDATE SKIP LOCKED),
     written AS (
         UPDATE queen.consumer_groups g
            SET active_at = greatest(g.active_at, now() - make_interval(secs => n.ago))
           FROM n
          WHERE g.id = n.id AND g.id IN (SELECT id FROM free)
         RETURNING g.id)
SELECT n.id FROM n
 WHERE n.id NOT IN (SELECT id FROM written)
   AND EXISTS (SELECT 1 FROM queen.consumer_groups g WHERE g.id = n.id)`

// NoteActive writes the activity a gateway noted (queen.consumer_groups'
// active_at, which queen.consumer_group_active_at reads) in one
// statement, and answers the groups whose rows other transactions held:
// they were skipped, not waited for, and are for the next write. Groups
// that no longer exist are left out.
func (s *Store) NoteActive(ctx context.Context, noted []model.GroupNoted) (skipped []int64, err error) {
	if len(noted) == 0 {
		return nil, nil
	}
	ids := make([]int64, len(noted))
	ago := make([]float64, len(noted))
	for i, n := range noted {
		ids[i], ago[i] = n.GroupID, max(n.Ago, 0).Seconds()
	}
	rows, err := s.pool.Query(ctx, noteActiveSQL, ids, ago)
	if err == nil {
		skipped, err = pgx.CollectRows(rows, pgx.RowTo[int64])
	}
	if err != nil {
		return nil, fmt.Errorf("pgstore: note groups' activity: %w", err)
	}
	return skipped, nil
}
