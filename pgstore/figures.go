package pgstore

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/queengate/queengate/model"
	"github.com/queengate/queengate/pgstore/internal/readpool"
)

// queueFiguresSQL reads every queue's figures in one statement: its
// partitions, the messages they store (two index probes per partition, as
// partitionsSQL), and each group's lag (lastOffset − nextOffset + 1 per
// partition, as the groups answer) and the part of it a delay holds back
// (on partitions whose cursor waits for a failure's delay). It locks
// nothing. A dead-letter queue's redrive group ($1) leaves out of its lag
// the dead letters a redrive moved beyond its cursor (a redrive by
// filter moves them out of order): its lag is what is left to redrive.
const queueFiguresSQL = `
SELECT q.name, q.id, coalesce(pp.n, 0), coalesce(pp.stored, 0),
       coalesce(gg.names, '{}'), coalesce(gg.lags, '{}'), coalesce(gg.delays, '{}')
  FROM queen.queues q
  LEFT JOIN LATERAL (
        SELECT count(*)::int AS n,
               sum(p.last_offset + 1 - coalesce(f.base_offset, p.last_offset + 1))::bigint AS stored
          FROM queen.log_partitions p
          LEFT JOIN LATERAL (SELECT s.base_offset FROM queen.log_segments s
                              WHERE s.partition_id = p.id ORDER BY s.base_offset LIMIT 1) f ON true
         WHERE p.queue_id = q.id) pp ON true
  LEFT JOIN LATERAL (
        SELECT array_agg(x.name ORDER BY x.name) AS names, array_agg(x.lag ORDER BY x.name) AS lags,
               array_agg(x.delayed ORDER BY x.name) AS delays
          FROM (SELECT g.name, (coalesce(sum(greatest(p.last_offset - coalesce(c.next_offset, 0) + 1, 0)), 0) -
                       coalesce(sum((SELECT count(*) FROM queen.consumer_marks m
                                      WHERE m.group_id = g.id AND m.partition_id = p.id AND m.done AND m.off >= c.next_offset))
                                FILTER (WHERE g.name = $1), 0))::bigint AS lag,
                       coalesce(sum(greatest(p.last_offset - c.next_offset + 1, 0)) FILTER (WHERE c.delayed_until > now()), 0)::bigint AS delayed
                  FROM queen.consumer_groups g
                  LEFT JOIN queen.log_partitions p ON p.queue_id = g.queue_id
                  LEFT JOIN queen.consumer_cursors c ON c.group_id = g.id AND c.partition_id = p.id
                 WHERE g.queue_id = q.id
                 GROUP BY g.name) x) gg ON true
 ORDER BY q.name`

// QueueFigures reads every queue's figures, by name (the database's
// order), each with the depth of its dead-letter queue, on the read pool.
func (s *Store) QueueFigures(ctx context.Context) ([]model.QueueFigures, error) {
	return readpool.List(ctx, s.reads, queueFigures)
}

func queueFigures(ctx context.Context, q readpool.Querier) ([]model.QueueFigures, error) {
	rows, err := q.Query(ctx, queueFiguresSQL, model.RedriveGroup)
	if err != nil {
		return nil, fmt.Errorf("pgstore: queue figures: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (model.QueueFigures, error) {
		var (
			f             model.QueueFigures
			names         []string
			lags, delayed []int64
		)
		err := row.Scan(&f.Queue, &f.QueueID, &f.Partitions, &f.StoredMessages, &names, &lags, &delayed)
		for i, name := range names {
			f.Groups = append(f.Groups, model.GroupLag{Group: name, Lag: lags[i], Delayed: delayed[i]})
			f.Delayed += delayed[i]
		}
		return f, err
	})
	if err != nil {
		return nil, fmt.Errorf("pgstore: queue figures: %w", err)
	}
	fillDLQDepths(out)
	return out, nil
}

// fillDLQDepths sets each queue's DLQDepth from its dead-letter queue's
// figures: what it stores beyond what redrives consumed (the redrive
// group's lag).
func fillDLQDepths(figures []model.QueueFigures) {
	byName := make(map[string]*model.QueueFigures, len(figures))
	for i := range figures {
		byName[figures[i].Queue] = &figures[i]
	}
	for i := range figures {
		dlq := byName[model.DeadLetterQueue(figures[i].Queue)]
		if dlq == nil {
			continue
		}
		figures[i].DLQDepth = dlq.StoredMessages
		for _, g := range dlq.Groups {
			if g.Group == model.RedriveGroup {
				figures[i].DLQDepth = min(g.Lag, dlq.StoredMessages)
			}
		}
	}
}

// QueueNames names each queue of ids that exists.
func (s *Store) QueueNames(ctx context.Context, ids []int64) (map[int64]string, error) {
	rows, err := s.pool.Query(ctx, `SELECT q.id, q.name FROM queen.queues q WHERE q.id = ANY($1)`, ids)
	if err != nil {
		return nil, fmt.Errorf("pgstore: queue names: %w", err)
	}
	out := map[int64]string{}
	var (
		id    int64
		queue string
	)
	_, err = pgx.ForEachRow(rows, []any{&id, &queue}, func() error {
		out[id] = queue
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("pgstore: queue names: %w", err)
	}
	return out, nil
}
