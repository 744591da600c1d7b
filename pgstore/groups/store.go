package groups

import (
	"context"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/queengate/queengate/model"
	"github.com/queengate/queengate/pgstore/internal/readpool"
)

// Store is the consumer groups' part of the PostgreSQL store, over the
// pool of the pgstore.Store that embeds it. It is safe for concurrent use.
type Store struct {
	pool *pgxpool.Pool
	// reads runs the listings (groups, dead letters) on the read pool.
	reads *readpool.Router
	log   Log
	// maxData is the most data a dead letter may carry.
	maxData func() int
	// undeliverable counts messages dead-lettered by pops because they
	// were too large to deliver, per queue and group.
	undeliverable *prometheus.CounterVec
}

// Log is what consumer groups need of the rest of the store: queues'
// configuration, partitions (a dead-letter queue's, made on first use),
// and single messages (a redrive's listing shows their data).
type Log interface {
	QueueConfig(ctx context.Context, queue string) (model.QueueConfig, error)
	EnsurePartition(ctx context.Context, queue, partition string) (model.Partition, error)
	EnsurePartitions(ctx context.Context, queues, partitions []string) ([]model.Partition, []bool, error)
	MessageAt(ctx context.Context, pid, offset int64) (m model.LogMessage, queue, partition string, err error)
}

// New is the consumer groups' store over pool and log, its listings read
// through reads: dead letters are held to maxData bytes, and pops count
// what they dead-letter as too large to deliver in undeliverable (labels
// queue, group).
func New(pool *pgxpool.Pool, reads *readpool.Router, log Log, maxData func() int, undeliverable *prometheus.CounterVec) *Store {
	return &Store{pool: pool, reads: reads, log: log, maxData: maxData, undeliverable: undeliverable}
}
