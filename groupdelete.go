package queengate

import "context"

// GroupDeleteAnswer says what deleting a consumer group released: the
// partitions it had cursors on, the messages it had not consumed, and
// the leases that were running (their consumers' acks now answer 404).
type GroupDeleteAnswer struct {
	Queue       string `json:"queue"`
	Group       string `json:"group"`
	Deleted     bool   `json:"deleted"`
	Partitions  int    `json:"partitions"`
	Unconsumed  int64  `json:"unconsumed"`
	LeasesEnded int    `json:"leasesEnded"`
}

// DeleteGroup deletes queue's consumer group with its positions, ending
// its leases and releasing what it held from retention (an operator
// request: the client's admin token). A later pop naming the group makes
// it afresh, from each partition's earliest message.
func (c *Client) DeleteGroup(ctx context.Context, queue, group string) (GroupDeleteAnswer, error) {
	var out GroupDeleteAnswer
	return out, c.groupRequest(ctx, queue, group, c.subjects.GroupDelete(queue, group), nil, true, &out)
}
