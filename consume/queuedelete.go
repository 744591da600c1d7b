package consume

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/nats-io/nats.go"

	queengate "github.com/queengate/queengate"
	"github.com/queengate/queengate/gateway"
	"github.com/queengate/queengate/internal/peers"
	"github.com/queengate/queengate/internal/wire"
	"github.com/queengate/queengate/model"
)

// Deleting and purging a queue (docs/admin-api.md, "Deleting and purging
// a queue"). A delete removes the queue's ids, which gateways cache: the
// deleting gateway announces it on <prefix>.queuedeleted.<queue> (the
// body is the queue's id) and each gateway forgets the queue's groups and
// partitions and wakes its waiting pops, which then answer that the
// queue does not exist. An announcement can be lost, so the store says
// too: a push to a partition of the deleted queue is refused before it
// writes anything and ingest resolves the name again (making the queue
// afresh), and a pop or ack finds its group gone (groupdelete.go). A
// purge changes no id: nothing to forget.

var purgeShape = wire.Shape{Name: "a purge", Example: `{"partition": "eu"}, or no body (every partition)`}

// deleteQueue deletes queue and its dead-letter queue, and says what it
// removed.
func (c *Consumers) deleteQueue(ctx context.Context, queue string, body []byte) (any, *queengate.Error) {
	if werr := gateway.ValidQueue(queue); werr != nil {
		return nil, werr
	}
	if len(bytes.TrimSpace(body)) > 0 {
		return nil, wire.BadInput("a queue delete takes no body: the subject (or path) names the queue")
	}
	d, err := c.store.DeleteQueue(ctx, queue)
	if err != nil {
		return nil, consumeError(err)
	}
	c.queueGone(queue, d.QueueID)
	ans := queengate.QueueDeleteAnswer{Queue: queue, Deleted: true, Partitions: len(d.PartitionIDs), Messages: d.Messages,
		Bytes: d.Bytes, Groups: d.Groups, LeasesEnded: d.LeasesEnded, Timers: d.Timers}
	dlq := model.DeadLetterQueue(queue)
	dd, err := c.store.DeleteQueue(ctx, dlq)
	switch {
	case errors.Is(err, model.ErrQueueNotFound):
	case err != nil:
		return nil, gateway.StoreError(fmt.Errorf("queue %s was deleted, its dead-letter queue %s was not (delete it by its name): %w", queue, dlq, err))
	default:
		c.queueGone(dlq, dd.QueueID)
		ans.DeadLetterQueue, ans.DeadLetters = dlq, dd.Messages
	}
	return ans, nil
}

// queueGone forgets a deleted queue here and announces it to every gateway.
func (c *Consumers) queueGone(queue string, id int64) {
	c.forgetQueue(queue, id)
	if c.publishQueueDeleted != nil {
		c.publishQueueDeleted(queue, id)
	}
}

// purgeQueue purges queue (or the partition the body names) and says
// what it removed.
func (c *Consumers) purgeQueue(ctx context.Context, queue string, body []byte) (any, *queengate.Error) {
	req, werr := decodePurge(body)
	if werr == nil {
		werr = gateway.ValidQueue(queue)
	}
	if werr != nil {
		return nil, werr
	}
	p, err := c.store.PurgeQueue(ctx, queue, req.Partition)
	if err != nil {
		return nil, consumeError(err)
	}
	// Leases ended: what they held above the purge is poppable again.
	c.announce(queue)
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

// forgetQueue drops the cached ids of queue (id) and of its groups and
// partitions, here and in the gateway's ingester, and wakes its waiting
// pops: they pop again and find the queue gone.
func (c *Consumers) forgetQueue(queue string, id int64) {
	c.knownGroups.Range(func(key, g any) bool {
		if strings.HasPrefix(key.(string), queue+"/") {
			c.forgetGroup(queue, g.(model.Group).Name)
		}
		return true
	})
	c.metrics.forget(queue, "") // also the groups this gateway had no id of
	prefix := strconv.FormatInt(id, 10) + "/"
	c.knownPartitions.Range(func(key, _ any) bool {
		if strings.HasPrefix(key.(string), prefix) {
			c.knownPartitions.Delete(key)
		}
		return true
	})
	c.waits.committed(queue)
	if c.forgetIngested != nil {
		c.forgetIngested(queue)
	}
}

// listenQueueDeletes forgets the queues other gateways delete.
func (c *Consumers) listenQueueDeletes(g *gateway.Gateway) error {
	deleted := peers.Subject(g.Prefix(), peers.QueueDeleted) + "."
	_, err := g.Conn().Subscribe(deleted+"*", func(m *nats.Msg) {
		id, _ := strconv.ParseInt(string(m.Data), 10, 64) // 0 (matching no partition) if unreadable: groups are still forgotten
		c.forgetQueue(strings.TrimPrefix(m.Subject, deleted), id)
	})
	if ing, ok := g.Ingester().(interface{ ForgetQueue(string) }); ok {
		c.forgetIngested = ing.ForgetQueue // memos and dedup cache entries of the queue's partitions
	}
	c.publishQueueDeleted = func(queue string, id int64) {
		_ = g.Conn().Publish(peers.Subject(g.Prefix(), peers.QueueDeleted, queue), []byte(strconv.FormatInt(id, 10))) // best effort: the store says too
	}
	return err
}
