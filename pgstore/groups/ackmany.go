package groups

import (
	"cmp"
	"context"
	"fmt"
	"slices"

	"github.com/jackc/pgx/v5"

	"github.com/queengate/queengate/model"
)

// AckMany settles the acks a pop carries, in order, in one round trip
// and one commit: each is consumer_ack's statement, as Ack runs it, all
// sent as one batch, which PostgreSQL runs in one implicit transaction
// (a failure settles none of them). What ran out of attempts is then
// dead-lettered ack by ack, as after Ack. They lock their cursor rows in
// ascending partition id (byPartition), so two such batches never wait
// for each other in a cycle.
func (s *Store) AckMany(ctx context.Context, g model.Group, acks []model.CarriedAck) ([]model.SettledBatch, error) {
	out := make([]model.SettledBatch, len(acks))
	rows := make([]ackRow, len(acks))
	batch := &pgx.Batch{}
	for _, i := range byPartition(acks) {
		a := acks[i]
		out[i].Items = make([]model.AckOutcome, len(a.Items))
		batch.Queue(ackStatement, ackArgs(g, a.PartitionID, leaseUUID(a.LeaseID), a.Items)).Query(func(r pgx.Rows) error {
			var err error
			rows[i], err = collectAck(r, &out[i])
			return err
		})
	}
	err := s.pool.SendBatch(ctx, batch).Close()
	for i := 0; err == nil && i < len(acks); i++ {
		err = s.afterAck(ctx, g, acks[i].PartitionID, &rows[i], &out[i])
	}
	if err != nil {
		return nil, fmt.Errorf("pgstore: ack %s/%s: %w", g.Queue, g.Name, err)
	}
	return out, nil
}

// byPartition is the order to settle acks in: by partition id, those of
// one partition in the order given.
func byPartition(acks []model.CarriedAck) []int {
	order := make([]int, len(acks))
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, func(a, b int) int { return cmp.Compare(acks[a].PartitionID, acks[b].PartitionID) })
	return order
}
