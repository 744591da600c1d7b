package queengate

import (
	"context"
	"time"
)

// GroupCreateRequest is the body of a group create: where the group
// starts on each partition. At most one of Start ("earliest", the
// default, or "latest": only messages pushed after the create), Offsets
// (a next offset per partition named; the others start at their
// earliest) and Time (the first message stored at or after it).
type GroupCreateRequest struct {
	Start   string           `json:"start,omitempty"`
	Offsets map[string]int64 `json:"offsets,omitempty"`
	Time    *time.Time       `json:"time,omitempty"`
}

// GroupCreateAnswer says whether the group was created (false: it
// existed, with the same start) and, for a new group that does not start
// at the earliest, where it starts on each partition (as a seek answers).
type GroupCreateAnswer struct {
	Queue   string `json:"queue"`
	Group   string `json:"group"`
	Created bool   `json:"created"`
	GroupMoves
}

// GroupSeekRequest is the body of a seek: the partition to move (every
// partition of the group when empty), and Offset or Time (exactly one):
// the next offset to deliver, or the first message stored at or after
// Time.
type GroupSeekRequest struct {
	Partition string     `json:"partition,omitempty"`
	Offset    *int64     `json:"offset,omitempty"`
	Time      *time.Time `json:"time,omitempty"`
}

// GroupSeekAnswer says what a seek moved.
type GroupSeekAnswer struct {
	Queue string `json:"queue"`
	Group string `json:"group"`
	GroupMoves
}

// GroupMoves are the totals of a seek (or a create's start) and the
// partitions it moved, clamped or ended a lease on, in name order, as
// many as fit in the answer (Truncated: some were left out; the totals
// count them all).
type GroupMoves struct {
	Partitions  int             `json:"partitions"`
	Moved       int             `json:"moved"`
	Clamped     int             `json:"clamped"`
	LeasesEnded int             `json:"leasesEnded"`
	Changes     []GroupMoveView `json:"changes"`
	Truncated   bool            `json:"truncated,omitempty"`
}

// GroupMoveView is one partition's move: the group's next offset there
// before (From) and after (To); Clamped when the offset asked for was
// below the first stored message or past the last (for a time: it fell
// before the first stored message and earlier ones were deleted);
// LeaseEnded when a lease was running there.
type GroupMoveView struct {
	Partition  string `json:"partition"`
	From       int64  `json:"from"`
	To         int64  `json:"to"`
	Clamped    bool   `json:"clamped,omitempty"`
	LeaseEnded bool   `json:"leaseEnded,omitempty"`
}

// CreateGroup creates queue's consumer group starting where req says. A
// group that exists with the same start is answered Created false; with
// another start, a 409 (*Error, CodeConflict).
func (c *Client) CreateGroup(ctx context.Context, queue, group string, req GroupCreateRequest) (GroupCreateAnswer, error) {
	var out GroupCreateAnswer
	return out, c.groupRequest(ctx, queue, group, c.subjects.GroupCreate(queue, group), req, false, &out)
}

// SeekGroup moves queue's consumer group, on every partition or the one
// req names, to an offset or a time (an operator request: the client's
// admin token). Leases running there end; messages from the new position
// on are delivered afresh.
func (c *Client) SeekGroup(ctx context.Context, queue, group string, req GroupSeekRequest) (GroupSeekAnswer, error) {
	var out GroupSeekAnswer
	return out, c.groupRequest(ctx, queue, group, c.subjects.GroupSeek(queue, group), req, true, &out)
}
