package queengate

import (
	"context"
	"encoding/json"
	"fmt"
)

// QueueDeleteAnswer says what deleting a queue removed: its partitions,
// the messages stored in them and their bytes, its consumer groups (the
// leases that were running end: their consumers' acks answer 404), its
// pending timers (they never fire) and, when it had one, its dead-letter
// queue with the dead letters in it.
type QueueDeleteAnswer struct {
	Queue           string `json:"queue"`
	Deleted         bool   `json:"deleted"`
	Partitions      int    `json:"partitions"`
	Messages        int64  `json:"messages"`
	Bytes           int64  `json:"bytes"`
	Groups          int    `json:"groups"`
	LeasesEnded     int    `json:"leasesEnded"`
	Timers          int64  `json:"timers"`
	DeadLetterQueue string `json:"deadLetterQueue,omitempty"`
	DeadLetters     int64  `json:"deadLetters"`
}

// QueuePurgeRequest names the one partition to purge; empty: all.
type QueuePurgeRequest struct {
	Partition string `json:"partition,omitempty"`
}

// QueuePurgeAnswer says what purging a queue (or its Partition) removed:
// the messages stored and their bytes, the pending timers; and what
// moved for its consumer groups: the leases that were running and the
// purged messages the groups had not consumed (counted once per group).
// TransactionIds are kept: a retry within the window answers duplicate.
type QueuePurgeAnswer struct {
	Queue       string `json:"queue"`
	Partition   string `json:"partition,omitempty"`
	Partitions  int    `json:"partitions"`
	Messages    int64  `json:"messages"`
	Bytes       int64  `json:"bytes"`
	Groups      int    `json:"groups"`
	LeasesEnded int    `json:"leasesEnded"`
	Unconsumed  int64  `json:"unconsumed"`
	Timers      int64  `json:"timers"`
}

// DeleteQueue deletes queue with everything of it: its messages and
// transactionIds, configuration, partitions, consumer groups, pending
// timers and dead-letter queue (an operator request: the client's admin
// token). A push naming it afterwards makes a new queue, which remembers
// nothing of the old one.
func (c *Client) DeleteQueue(ctx context.Context, queue string) (QueueDeleteAnswer, error) {
	var out QueueDeleteAnswer
	if err := CheckName("queue", queue); err != nil {
		return out, err
	}
	return out, c.request(ctx, c.subjects.QueueDelete(queue), nil, true, &out)
}

// PurgeQueue deletes the messages stored in queue (or in req.Partition
// alone), cancels its pending timers and moves its consumer groups past
// what it deleted (an operator request). TransactionIds are kept.
func (c *Client) PurgeQueue(ctx context.Context, queue string, req QueuePurgeRequest) (QueuePurgeAnswer, error) {
	var out QueuePurgeAnswer
	if !ValidName(queue) || (req.Partition != "" && !ValidName(req.Partition)) {
		return out, fmt.Errorf("queengate: bad queue or partition name %q/%q: %s", queue, req.Partition, NameRule)
	}
	var body []byte
	if req.Partition != "" {
		body, _ = json.Marshal(req) // a string: cannot fail
	}
	return out, c.request(ctx, c.subjects.QueuePurge(queue), body, true, &out)
}
