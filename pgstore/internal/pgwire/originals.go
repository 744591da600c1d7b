package pgwire

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/queengate/queengate/model"
)

// Querier is what reads need of a pool or a transaction.
type Querier interface {
	Query(context.Context, string, ...any) (pgx.Rows, error)
}

// Originals reads what a payload-conflict check needs of the messages at
// offsets of a partition, through q (the pool, or an ack-and-push's
// transaction, under the partition's lock). An offset whose message is
// gone (retention) is absent from the map: its conflict cannot be told.
func Originals(ctx context.Context, q Querier, partitionID int64, offsets []int64) (map[int64]model.Hash, error) {
	rows, err := q.Query(ctx, "SELECT off, data_hash, data::text, meta::text FROM queen.log_originals($1, $2)", partitionID, offsets)
	if err != nil {
		return nil, fmt.Errorf("pgstore: Originals of %d: %w", partitionID, err)
	}
	defer rows.Close()
	out := make(map[int64]model.Hash, len(offsets))
	for rows.Next() {
		var (
			off  int64
			hash *model.Hash
			data *string
			meta *string
		)
		if err := rows.Scan(&off, &hash, &data, &meta); err != nil {
			return nil, fmt.Errorf("pgstore: Originals of %d: %w", partitionID, err)
		}
		switch {
		case hash != nil:
			out[off] = *hash
		case data != nil:
			var m []byte
			if meta != nil {
				m = []byte(*meta)
			}
			out[off] = model.HashData([]byte(*data), m)
		}
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("pgstore: Originals of %d: %w", partitionID, err)
	}
	return out, nil
}
