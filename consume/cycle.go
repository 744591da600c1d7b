package consume

import (
	"context"

	queengate "github.com/queengate/queengate"
	"github.com/queengate/queengate/internal/wire"
	"github.com/queengate/queengate/model"
)

// settleCarried settles the ack pop req carries (of group g, pid the
// partition the pop names, 0 for any; newGroup: the pop makes g) and
// returns its answer, encoded. The usual ack, completing its whole lease
// in order, is settled with the pop's next lease in one statement (the
// store's Cycle): popped is then the pop's delivery when that statement
// made it, nil when the pop is still to do.
func (c *Consumers) settleCarried(ctx context.Context, queue string, g model.Group, pid int64, newGroup bool,
	req queengate.PopRequest) (acked []byte, popped *model.PopResult, werr *queengate.Error) {
	ackReq := queengate.AckRequest{Group: req.Group, LeaseID: req.Ack.LeaseID, Items: req.Ack.Items}
	if !newGroup {
		ans, popped, ok, werr := c.cycle(ctx, queue, g, pid, req, ackReq)
		switch {
		case werr != nil:
			return nil, nil, werr
		case ok && popped != nil:
			// The partition the ack freed is leased again at once: no
			// waiting pop could take it, so none is woken.
			return wire.AppendAckAnswer(nil, &ans), popped, nil
		case ok:
			c.settled(queue, ans)
			return wire.AppendAckAnswer(nil, &ans), nil, nil
		}
	}
	ans, werr := c.settle(ctx, queue, req.Ack.Partition, ackReq)
	if werr != nil {
		return nil, nil, werr
	}
	c.settled(queue, ans)
	return wire.AppendAckAnswer(nil, &ans), nil, nil
}

// cycle tries the store's Cycle for ackReq carried by req; ok false when
// it did nothing (anything not the usual ack, a 4xx included, is left to
// settle to answer).
func (c *Consumers) cycle(ctx context.Context, queue string, g model.Group, pid int64, req queengate.PopRequest,
	ackReq queengate.AckRequest) (ans queengate.AckAnswer, popped *model.PopResult, ok bool, werr *queengate.Error) {
	items, bound, werr := c.checkAck(ackReq)
	if werr != nil {
		return ans, nil, false, nil
	}
	ag, apid, werr := c.place(ctx, queue, req.Ack.Partition, req.Group)
	if werr != nil {
		return ans, nil, false, nil
	}
	// The pop's room leaves what the ack's answer may take at most: the
	// answer is known only once the statement ran.
	pr := c.popRequest(g, pid, req, int(bound))
	c.activity.note(g.ID)
	if c.tail != nil {
		// The usual cycle from memory, in one plain statement; anything
		// it does not serve changed nothing, and the store's Cycle decides.
		res, popped, ok, err := c.tail.Cycle(ctx, pr, apid, ackReq.LeaseID, items)
		if err != nil {
			return ans, nil, false, c.groupFailed(g, err)
		}
		if ok {
			return c.ackAnswer(queue, ag, ackReq, items, res), popped, true, nil
		}
	}
	res, popped, ok, err := c.store.Cycle(ctx, pr, apid, ackReq.LeaseID, items)
	if err != nil {
		return ans, nil, false, c.groupFailed(g, err)
	}
	if !ok {
		return ans, nil, false, nil
	}
	return c.ackAnswer(queue, ag, ackReq, items, res), popped, true, nil
}
