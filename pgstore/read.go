package pgstore

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/queengate/queengate/model"
	"github.com/queengate/queengate/pgstore/internal/readpool"
)

// readSegmentsPerQuery bounds the frames one round trip of a read fetches.
const readSegmentsPerQuery = 32

// partitionOf finds an existing partition (reads never create one).
func partitionOf(ctx context.Context, q readpool.Querier, queue, partition string) (id, last int64, err error) {
	err = q.QueryRow(ctx, `
		SELECT lp.id, lp.last_offset
		  FROM queen.log_partitions lp JOIN queen.queues q ON q.id = lp.queue_id
		 WHERE q.name = $1 AND lp.name = $2`, queue, partition).Scan(&id, &last)
	if errors.Is(err, pgx.ErrNoRows) {
		return 0, 0, fmt.Errorf("%w: partition %s/%s does not exist", model.ErrNotFound, queue, partition)
	}
	return id, last, err
}

// firstOffset is the first offset partition pid still stores.
func firstOffset(ctx context.Context, q readpool.Querier, pid, last int64) (int64, error) {
	var first *int64
	err := q.QueryRow(ctx, `SELECT min(base_offset) FROM queen.log_segments WHERE partition_id = $1`, pid).Scan(&first)
	if err != nil || first == nil {
		return last + 1, err
	}
	return *first, nil
}

// Read returns a partition's messages from r.From in offset order, at
// most r.Max of them and about r.MaxBytes of data (never less than one
// message, so that a large message cannot block a reader). It takes no
// lock, and reads on the read pool: a page its limits filled is complete
// when the names still name its partition on the primary.
func (s *Store) Read(ctx context.Context, r model.ReadQuery) (model.ReadResult, error) {
	return readpool.Get(ctx, s.reads, func(ctx context.Context, q readpool.Querier) (model.ReadResult, bool, error) {
		res, full, err := read(ctx, q, r)
		if !full || q == readpool.Querier(s.pool) {
			return res, full, err
		}
		same, err := s.stillNamed(ctx, r.Queue, r.Partition, res.PartitionID)
		return res, same, err
	})
}

// stillNamed says whether queue/partition names partition pid on the
// primary. A stored offset never changes and partition ids are never
// reused, but a queue deleted and made again has new ones: a standby
// that has not replayed that would read the old partition by the name.
func (s *Store) stillNamed(ctx context.Context, queue, partition string, pid int64) (bool, error) {
	id, _, err := partitionOf(ctx, s.pool, queue, partition)
	if errors.Is(err, model.ErrNotFound) {
		return false, nil
	}
	return id == pid, err
}

// read is Read through q; full says the limits ended the page, not the
// partition's end.
func read(ctx context.Context, q readpool.Querier, r model.ReadQuery) (res model.ReadResult, full bool, err error) {
	pid, last, err := partitionOf(ctx, q, r.Queue, r.Partition)
	if err != nil {
		return model.ReadResult{}, false, err
	}
	res = model.ReadResult{PartitionID: pid, LastOffset: last}
	if res.FirstOffset, err = firstOffset(ctx, q, pid, last); err != nil {
		return res, false, err
	}
	from := max(r.From, res.FirstOffset)
	res.Next = from
	var bytes int64
	for len(res.Messages) < r.Max && bytes < r.MaxBytes {
		n, more, err := readSegments(ctx, q, pid, res.Next, r, &res, &bytes)
		if err != nil {
			return res, false, err
		}
		if n == 0 || !more {
			break
		}
	}
	return res, len(res.Messages) > 0 && (len(res.Messages) >= r.Max || bytes >= r.MaxBytes), nil
}

// readSegments reads frames from offset from into res, until the limits;
// n is the messages added, more whether the limits left room for more.
func readSegments(ctx context.Context, q readpool.Querier, pid, from int64, r model.ReadQuery, res *model.ReadResult, bytes *int64) (n int, more bool, err error) {
	rows, err := q.Query(ctx, "SELECT base_offset, created_at, txn_ids, data, meta FROM queen.log_read($1, $2, $3)",
		pid, from, readSegmentsPerQuery)
	if err != nil {
		return 0, false, err
	}
	defer rows.Close()
	segments := 0
	for rows.Next() {
		segments++
		var (
			base    int64
			created time.Time
			ids     []string
			data    [][]byte
			meta    [][]byte // nil when no message of the frame has any
		)
		if err := rows.Scan(&base, &created, &ids, &data, &meta); err != nil {
			return n, false, err
		}
		for k := range ids {
			if len(res.Messages) >= r.Max || *bytes >= r.MaxBytes && len(res.Messages) > 0 {
				return n, false, rows.Err()
			}
			res.Messages = append(res.Messages, model.LogMessage{PartitionID: pid, Offset: base + int64(k),
				TxnID: ids[k], CreatedAt: created, Data: data[k]})
			if meta != nil {
				res.Messages[len(res.Messages)-1].Meta = meta[k]
			}
			*bytes += int64(len(data[k]) + len(res.Messages[len(res.Messages)-1].Meta))
			res.Next = base + int64(k) + 1
			n++
		}
	}
	return n, segments == readSegmentsPerQuery, rows.Err()
}

// MessageAt returns the message at offset of partition pid, with its
// queue and partition names. It reads on the read pool: a message found
// is complete.
func (s *Store) MessageAt(ctx context.Context, pid, offset int64) (m model.LogMessage, queue, partition string, err error) {
	err = s.reads.Read(ctx, func(ctx context.Context, q readpool.Querier) (bool, error) {
		var err error
		m, queue, partition, err = messageAt(ctx, q, pid, offset)
		return err == nil, err
	})
	return m, queue, partition, err
}

func messageAt(ctx context.Context, q readpool.Querier, pid, offset int64) (m model.LogMessage, queue, partition string, err error) {
	m = model.LogMessage{PartitionID: pid, Offset: offset}
	err = q.QueryRow(ctx, `
		SELECT q.name, lp.name, s.created_at, s.txn_ids[$2 - s.base_offset + 1], s.data[$2 - s.base_offset + 1],
		       s.meta[$2 - s.base_offset + 1]
		  FROM queen.log_partitions lp
		  JOIN queen.queues q ON q.id = lp.queue_id
		  JOIN LATERAL (SELECT * FROM queen.log_segments s
		                 WHERE s.partition_id = lp.id AND s.base_offset <= $2
		                 ORDER BY s.base_offset DESC LIMIT 1) s ON true
		 WHERE lp.id = $1 AND s.end_offset >= $2`, pid, offset).Scan(&queue, &partition, &m.CreatedAt, &m.TxnID, &m.Data, &m.Meta)
	if errors.Is(err, pgx.ErrNoRows) {
		return m, "", "", fmt.Errorf("%w: no message at offset %d of partition %d (never written, or removed by retention)", model.ErrNotFound, offset, pid)
	}
	return m, queue, partition, err
}

// FindTxn looks a transactionId up the way the deduplication verdict
// does: by its xxh3_128 hash among the partition's stored hashes within
// the queue's window, the earliest copy. It reads on the read pool, never
// complete: found or not depends on the queue's window too, which may
// have changed since.
func (s *Store) FindTxn(ctx context.Context, queue, partition, txnID string) (model.TxnLookup, error) {
	return readpool.List(ctx, s.reads, func(ctx context.Context, q readpool.Querier) (model.TxnLookup, error) {
		return findTxn(ctx, q, queue, partition, txnID)
	})
}

func findTxn(ctx context.Context, q readpool.Querier, queue, partition, txnID string) (model.TxnLookup, error) {
	pid, _, err := partitionOf(ctx, q, queue, partition)
	if err != nil {
		return model.TxnLookup{}, err
	}
	l := model.TxnLookup{PartitionID: pid}
	h := model.HashTxnID(txnID)
	var (
		off     *int64
		created *time.Time
	)
	err = q.QueryRow(ctx, `
		SELECT f.dedup_window_seconds, f.first_offset, t.created_at, now(),
		       EXISTS (SELECT 1 FROM queen.log_segments s WHERE s.partition_id = $1 AND s.base_offset <= f.first_offset AND s.end_offset >= f.first_offset)
		  FROM queen.log_find($1, ARRAY[$2::uuid]) f
		  LEFT JOIN queen.log_partitions lp ON lp.id = $1
		  LEFT JOIN LATERAL queen.log_hash_frame($1, f.first_offset, lp.txns_start, lp.txns_end) AS t ON true`,
		pid, h).Scan(&l.WindowSeconds, &off, &created, &l.DBNow, &l.Retained)
	if off != nil {
		l.Found, l.Offset = true, *off
	}
	if created != nil {
		l.CreatedAt = *created
	}
	return l, err
}
