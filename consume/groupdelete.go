package consume

import (
	"bytes"
	"context"
	"errors"
	"strings"

	"github.com/nats-io/nats.go"

	queengate "github.com/queengate/queengate"
	"github.com/queengate/queengate/gateway"
	"github.com/queengate/queengate/internal/peers"
	"github.com/queengate/queengate/internal/wire"
	"github.com/queengate/queengate/model"
)

// Deleting a consumer group (docs/admin-api.md, "Deleting a consumer
// group"). The group's id is cached by every gateway that served it
// (knownGroups): the deleting gateway announces the delete on
// <prefix>.groupdeleted.<queue>.<group> and each gateway forgets the id
// and wakes the group's waiting pops. An announcement can be lost, so the
// store says too: a pop, ack or lease of a group that no longer exists
// fails with ErrGroupNotFound, the gateway forgets the id, and a pop
// looks its group up by name again (making it afresh, as any first pop),
// while an ack, renewal or release answers 404.

// deleteGroup deletes queue's consumer group and says what it released.
func (c *Consumers) deleteGroup(ctx context.Context, queue, group string, body []byte) (any, *queengate.Error) {
	if werr := gateway.ValidQueue(queue); werr != nil {
		return nil, werr
	}
	if !queengate.ValidName(group) {
		return nil, wire.BadInput("bad group name %q: %s", wire.Clip(group), queengate.NameRule)
	}
	if len(bytes.TrimSpace(body)) > 0 {
		return nil, wire.BadInput("a group delete takes no body: the subject (or path) names the queue and the group")
	}
	d, err := c.store.DeleteGroup(ctx, queue, group)
	if err != nil {
		return nil, consumeError(err)
	}
	c.forgetGroup(queue, group)
	if c.publishDeleted != nil {
		c.publishDeleted(queue, group)
	}
	return queengate.GroupDeleteAnswer{Queue: queue, Group: group, Deleted: true, Partitions: d.Partitions,
		Unconsumed: d.Unconsumed, LeasesEnded: d.LeasesEnded}, nil
}

// forgetGroup drops queue's group name from the cache of ids, and wakes
// its waiting pops: they pop again and find the group gone.
func (c *Consumers) forgetGroup(queue, name string) {
	c.metrics.forget(queue, name)
	if g, ok := c.knownGroups.LoadAndDelete(queue + "/" + name); ok {
		c.waits.wakeGroup(g.(model.Group).ID)
	}
}

// groupFailed is the answer to a store error of a request under group g:
// when g is gone, its cached id is forgotten (only that id: a new group
// of the name cached meanwhile stays).
func (c *Consumers) groupFailed(g model.Group, err error) *queengate.Error {
	if errors.Is(err, model.ErrGroupNotFound) && c.knownGroups.CompareAndDelete(g.Queue+"/"+g.Name, g) {
		c.metrics.forget(g.Queue, g.Name) // its delete's announcement missed this gateway
	}
	return consumeError(err)
}

// listenDeletes forgets the groups other gateways delete.
func (c *Consumers) listenDeletes(g *gateway.Gateway) error {
	deleted := peers.Subject(g.Prefix(), peers.GroupDeleted) + "."
	_, err := g.Conn().Subscribe(deleted+"*.*", func(m *nats.Msg) {
		queue, group, _ := strings.Cut(strings.TrimPrefix(m.Subject, deleted), ".")
		c.forgetGroup(queue, group)
	})
	c.publishDeleted = func(queue, group string) {
		_ = g.Conn().Publish(peers.Subject(g.Prefix(), peers.GroupDeleted, queue, group), nil) // best effort: the store says too
	}
	return err
}

// wakeGroup wakes every list of group id: its pops look again.
func (ws *waits) wakeGroup(id int64) {
	ws.mu.Lock()
	defer ws.mu.Unlock()
	for key, l := range ws.lists {
		if key.group == id {
			ws.wake(l)
		}
	}
}
