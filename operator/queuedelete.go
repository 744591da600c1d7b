package operator

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"

	queengate "github.com/queengate/queengate"
	"github.com/queengate/queengate/gateway"
	"github.com/queengate/queengate/internal/wire"
	"github.com/queengate/queengate/model"
)

// Deleting and purging a queue (docs/admin-api.md, "Deleting and purging
// a queue"). The store does the work; what gateways hold of the queue in
// memory (its groups' and partitions' ids, waiting pops) is the consuming
// side's, which Ops tells through a QueueWatcher.

// QueueStore deletes and purges queues.
type QueueStore interface {
	DeleteQueue(ctx context.Context, queue string) (model.QueueDeleted, error)
	PurgeQueue(ctx context.Context, queue, partition string) (model.QueuePurged, error)
}

// QueueWatcher holds what a gateway keeps of queues in memory (package
// consume's Consumers).
type QueueWatcher interface {
	// QueueDeleted forgets a deleted queue (id), here and on every gateway.
	QueueDeleted(queue string, id int64)
	// QueuePurged wakes the pops waiting on a purged queue: the leases
	// the purge ended left what is above it poppable.
	QueuePurged(queue string)
}

// WatchQueues has w told of every queue this gateway deletes or purges.
func (o *Ops) WatchQueues(w QueueWatcher) { o.queues = w }

var purgeShape = wire.Shape{Name: "a purge", Example: `{"partition": "eu"}, or no body (every partition)`}

// queueDeleteOperations are the deletes and purges of whole queues.
func (o *Ops) queueDeleteOperations() []gateway.Endpoint {
	return []gateway.Endpoint{
		{Name: "queues-delete", API: queengate.APIQueueDelete, Admin: true, AnswerOnly: true, Op: func(ctx context.Context, req *gateway.Request) (any, *queengate.Error) {
			return o.DeleteQueue(ctx, req.Names[0], req.Data)
		}, HTTP: queueRoute(queengate.APIQueueDelete.Route(), o.DeleteQueue)},
		{Name: "queues-purge", API: queengate.APIQueuePurge, Admin: true, AnswerOnly: true, Op: func(ctx context.Context, req *gateway.Request) (any, *queengate.Error) {
			return o.PurgeQueue(ctx, req.Names[0], req.Data)
		}, HTTP: queueRoute(queengate.APIQueuePurge.Route(), o.PurgeQueue)},
	}
}

// queueRoute is the HTTP form of an operation on a queue named by the
// path; it takes no parameters.
func queueRoute(route string, op func(ctx context.Context, queue string, body []byte) (any, *queengate.Error)) []gateway.HTTPForm {
	return []gateway.HTTPForm{gateway.PathForm(route, func(r *http.Request, body []byte) (any, *queengate.Error) {
		return op(r.Context(), r.PathValue("queue"), body)
	})}
}

// DeleteQueue deletes queue and its dead-letter queue, and says what it
// removed.
func (o *Ops) DeleteQueue(ctx context.Context, queue string, body []byte) (any, *queengate.Error) {
	if werr := gateway.ValidQueue(queue); werr != nil {
		return nil, werr
	}
	if len(bytes.TrimSpace(body)) > 0 {
		return nil, wire.BadInput("a queue delete takes no body: the subject (or path) names the queue")
	}
	d, err := o.store.DeleteQueue(ctx, queue)
	if err != nil {
		return nil, queueError(err)
	}
	o.queueDeleted(queue, d.QueueID)
	ans := queengate.QueueDeleteAnswer{Queue: queue, Deleted: true, Partitions: len(d.PartitionIDs), Messages: d.Messages,
		Bytes: d.Bytes, Groups: d.Groups, LeasesEnded: d.LeasesEnded, Timers: d.Timers}
	dlq := model.DeadLetterQueue(queue)
	dd, err := o.store.DeleteQueue(ctx, dlq)
	switch {
	case errors.Is(err, model.ErrQueueNotFound):
	case err != nil:
		return nil, gateway.StoreError(fmt.Errorf("queue %s was deleted, its dead-letter queue %s was not (delete it by its name): %w", queue, dlq, err))
	default:
		o.queueDeleted(dlq, dd.QueueID)
		ans.DeadLetterQueue, ans.DeadLetters = dlq, dd.Messages
	}
	return ans, nil
}

func (o *Ops) queueDeleted(queue string, id int64) {
	if o.queues != nil {
		o.queues.QueueDeleted(queue, id)
	}
}

// PurgeQueue purges queue (or the partition the body names) and says
// what it removed.
func (o *Ops) PurgeQueue(ctx context.Context, queue string, body []byte) (any, *queengate.Error) {
	req, werr := decodePurge(body)
	if werr == nil {
		werr = gateway.ValidQueue(queue)
	}
	if werr != nil {
		return nil, werr
	}
	p, err := o.store.PurgeQueue(ctx, queue, req.Partition)
	if err != nil {
		return nil, queueError(err)
	}
	if o.queues != nil {
		o.queues.QueuePurged(queue)
	}
	return queengate.QueuePurgeAnswer{Queue: queue, Partition: req.Partition, Partitions: p.Partitions, Messages: p.Messages,
		Bytes: p.Bytes, Groups: p.Groups, LeasesEnded: p.LeasesEnded, Unconsumed: p.Unconsumed, Timers: p.Timers}, nil
}

// decodePurge reads a purge's optional body strictly.
func decodePurge(body []byte) (queengate.QueuePurgeRequest, *queengate.Error) {
	var req queengate.QueuePurgeRequest
	if wire.Blank(body) {
		return req, nil
	}
	return req, wire.DecodeObject(body, wire.TheBody, purgeShape, wire.Field{Name: "partition", Decode: wire.NameInto("partition", &req.Partition)})
}

// queueError answers a store error of a delete or purge.
func queueError(err error) *queengate.Error {
	switch {
	case errors.Is(err, model.ErrQueueNotFound):
		return gateway.NotFound(err, model.ErrQueueNotFound, "unknown queue ")
	case errors.Is(err, model.ErrNotFound):
		return gateway.NotFound(err, model.ErrNotFound, "unknown ")
	}
	return gateway.StoreError(err)
}
