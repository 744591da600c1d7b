package queengate

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"time"
)

// Pop asks for messages of queue for a consumer of req.Group: of any
// partition with work (partition ""), or of one. The answer holds a
// lease on one partition and its messages, or no lease and no messages
// when there was nothing to deliver within req.WaitMs.
func (c *Client) Pop(ctx context.Context, queue, partition string, req PopRequest) (PopAnswer, error) {
	if err := checkPlace(queue, cmp.Or(partition, DefaultPartition)); err != nil { // "": any partition
		return PopAnswer{}, err
	}
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, c.timeout+time.Duration(req.WaitMs)*time.Millisecond)
		defer cancel()
	}
	return consumeCall[PopAnswer](ctx, c, c.subjects.Pop(queue, partition), req)
}

// Ack settles messages delivered under a lease on queue/partition.
func (c *Client) Ack(ctx context.Context, queue, partition string, req AckRequest) (AckAnswer, error) {
	if err := checkPlace(queue, partition); err != nil {
		return AckAnswer{}, err
	}
	return consumeCall[AckAnswer](ctx, c, c.subjects.ConsumeAck(queue, partition), req)
}

// Renew extends a lease to run req.LeaseMs from now. A lease no longer
// held is an *Error with CodeConflict.
func (c *Client) Renew(ctx context.Context, queue, partition string, req LeaseRequest) (LeaseAnswer, error) {
	if err := checkPlace(queue, partition); err != nil {
		return LeaseAnswer{}, err
	}
	return consumeCall[LeaseAnswer](ctx, c, c.subjects.Renew(queue, partition), req)
}

// Release gives a lease up: what was delivered under it and not settled
// is redelivered by the next pop.
func (c *Client) Release(ctx context.Context, queue, partition string, req LeaseRequest) (LeaseAnswer, error) {
	if err := checkPlace(queue, partition); err != nil {
		return LeaseAnswer{}, err
	}
	return consumeCall[LeaseAnswer](ctx, c, c.subjects.Release(queue, partition), req)
}

// Groups lists queue's consumer groups with their lag per partition.
func (c *Client) Groups(ctx context.Context, queue string) (GroupsAnswer, error) {
	if err := checkPlace(queue, DefaultPartition); err != nil {
		return GroupsAnswer{}, err
	}
	return consumeCall[GroupsAnswer](ctx, c, c.subjects.Groups(queue), nil)
}

// consumeCall sends a consuming request (no admin token) and decodes its
// answer.
func consumeCall[T any](ctx context.Context, c *Client, subject string, req any) (T, error) {
	var out T
	var body []byte
	if req != nil {
		b, err := json.Marshal(req)
		if err != nil {
			return out, fmt.Errorf("queengate: encode %s: %w", subject, err)
		}
		body = b
	}
	return out, c.request(ctx, subject, body, false, &out)
}
