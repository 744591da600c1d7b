package consume

import (
	"strconv"
	"strings"

	"github.com/nats-io/nats.go"

	"github.com/queengate/queengate/gateway"
	"github.com/queengate/queengate/internal/peers"
	"github.com/queengate/queengate/model"
)

// What a gateway holds of a deleted or purged queue (docs/admin-api.md,
// "Deleting and purging a queue"; package operator serves both). A delete
// removes the queue's ids, which gateways cache: the deleting gateway
// announces it on <prefix>.queuedeleted.<queue> (the
// body is the queue's id) and each gateway forgets the queue's groups and
// partitions and wakes its waiting pops, which then answer that the
// queue does not exist. An announcement can be lost, so the store says
// too: a push to a partition of the deleted queue is refused before it
// writes anything and ingest resolves the name again (making the queue
// afresh), and a pop or ack finds its group gone (groupdelete.go). A
// purge changes no id: nothing to forget.

// QueueDeleted forgets a deleted queue (id) here and announces it to
// every gateway (operator.QueueWatcher).
func (c *Consumers) QueueDeleted(queue string, id int64) {
	c.forgetQueue(queue, id)
	if c.publishQueueDeleted != nil {
		c.publishQueueDeleted(queue, id)
	}
}

// QueuePurged wakes the pops waiting on queue, here and on every gateway:
// the leases a purge ended left what is above it poppable
// (operator.QueueWatcher).
func (c *Consumers) QueuePurged(queue string) { c.announce(queue) }

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
