package groups

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/queengate/queengate/model"
)

// DeleteGroup deletes queue's consumer group name with its cursors and
// marks, releasing every retention hold it had (queen.consumer_group_delete),
// and says what it released. ErrQueueNotFound or ErrGroupNotFound if
// either does not exist. A pop or ack of the group after it finds the
// group gone (ErrGroupNotFound); a pop by name afterwards makes a new
// group, from each partition's earliest message.
func (s *Store) DeleteGroup(ctx context.Context, queue, name string) (model.GroupDeleted, error) {
	g, err := s.FindGroup(ctx, queue, name)
	out := model.GroupDeleted{Group: g}
	if err != nil {
		return out, err
	}
	err = s.pool.QueryRow(ctx, "SELECT group_id, partitions, unconsumed, leases_ended FROM queen.consumer_group_delete($1, $2)",
		g.QueueID, name).Scan(&out.ID, &out.Partitions, &out.Unconsumed, &out.LeasesEnded)
	switch {
	case errors.Is(err, pgx.ErrNoRows): // deleted by another request meanwhile
		return out, groupNotFound(queue, name)
	case err != nil:
		return out, fmt.Errorf("pgstore: delete consumer group %s/%s: %w", queue, name, err)
	}
	return out, nil
}

// groupGone says whether group id no longer exists: a request that found
// nothing to do under its cursor asks, so that it answers
// ErrGroupNotFound rather than nothing when the group was deleted.
func (s *Store) groupGone(ctx context.Context, g model.Group) (bool, error) {
	var exists bool
	err := s.pool.QueryRow(ctx, "SELECT EXISTS (SELECT 1 FROM queen.consumer_groups WHERE id = $1)", g.ID).Scan(&exists)
	return !exists, err
}

func groupNotFound(queue, name string) error {
	return fmt.Errorf("%w: %q of queue %s (deleted, or not yet created by a pop)", model.ErrGroupNotFound, name, queue)
}

// notHeldInGroup is ErrGroupNotFound when an ack found no lease held
// because its group was deleted (no cursor left: every item is
// leaseNotHeld and nothing was changed). Only such acks pay the look-up.
func (s *Store) notHeldInGroup(ctx context.Context, g model.Group, items []model.AckOutcome) error {
	for _, it := range items {
		if it.Result != model.AckLeaseNotHeld {
			return nil
		}
	}
	gone, err := s.groupGone(ctx, g)
	if err == nil && gone {
		err = groupNotFound(g.Queue, g.Name)
	}
	return err
}
