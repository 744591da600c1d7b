package queengate

import (
	"context"
	"encoding/json"
	"fmt"
)

// MaxAckPushMessages is how many derived messages one ack-and-push may
// carry.
const MaxAckPushMessages = 1000

// AckPushRequest completes Items of a lease, as an ack does, and pushes
// Push, in one PostgreSQL transaction: both happen or neither
// (docs/protocol.md, "Ack and push"). Every item must be completed.
type AckPushRequest struct {
	Group   string           `json:"group"`
	LeaseID string           `json:"leaseId"`
	Items   []AckItem        `json:"items"`
	Push    []DerivedMessage `json:"push,omitempty"`
}

// DerivedMessage is a message an ack-and-push stores in Queue's
// Partition (DefaultPartition when empty). TransactionID is required:
// derive it from the input's, so that a retry, or another consumer
// redoing the input, answers duplicate.
type DerivedMessage struct {
	Queue         string          `json:"queue"`
	Partition     string          `json:"partition,omitempty"`
	TransactionID string          `json:"transactionId"`
	Data          json.RawMessage `json:"data,omitempty"`
	// Headers and DataEncoding are a pushed message's (docs/protocol.md,
	// "Headers", "Binary data"): an object of names to a string or
	// strings, and "base64" when Data is a string of base64.
	Headers      json.RawMessage `json:"headers,omitempty"`
	DataEncoding string          `json:"dataEncoding,omitempty"`
}

// AckPushAnswer answers an ack-and-push that committed: the items'
// results as an ack answers them, and where each derived message is.
type AckPushAnswer struct {
	AckAnswer
	Pushed []PushedMessage `json:"pushed"`
}

// PushedMessage is where derived message Index is: Status is queued
// (stored now) or duplicate (stored before; MessageID and Offset are the
// original's, Conflict when its data differs in a queue that flags
// conflicts).
type PushedMessage struct {
	Index         int        `json:"index"`
	Queue         string     `json:"queue"`
	Partition     string     `json:"partition"`
	TransactionID string     `json:"transactionId"`
	Status        PushStatus `json:"status"`
	PartitionID   int64      `json:"partitionId"`
	MessageID     string     `json:"messageId"`
	Offset        int64      `json:"offset"`
	Conflict      bool       `json:"conflict,omitempty"`
}

// AckAndPush completes req.Items of a lease of queue's partition and
// pushes req.Push in one transaction (consume-transform-produce). When an
// item is not acked (its lease ran out, say) nothing is settled or
// pushed: an *Error with CodeConflict says which. A retry after a lost
// answer is safe: it answers alreadyAcked and duplicate.
func (c *Client) AckAndPush(ctx context.Context, queue, partition string, req AckPushRequest) (AckPushAnswer, error) {
	if err := checkPlace(queue, partition); err != nil {
		return AckPushAnswer{}, err
	}
	for i, m := range req.Push {
		p := m.Partition
		if p == "" {
			p = DefaultPartition
		}
		if err := checkPlace(m.Queue, p); err != nil {
			return AckPushAnswer{}, fmt.Errorf("push %d: %w", i, err)
		}
	}
	body, err := req.AppendJSON(nil)
	if err != nil {
		return AckPushAnswer{}, err
	}
	var out AckPushAnswer
	return out, c.request(ctx, c.subjects.ConsumeAckPush(queue, partition), body, false, &out)
}

// AppendJSON appends r as an ack-and-push body, each derived message's
// data byte for byte as given (see [Message.AppendJSON]).
func (r AckPushRequest) AppendJSON(b []byte) ([]byte, error) {
	push := r.Push
	r.Push = nil
	head, err := json.Marshal(r)
	if err != nil {
		return nil, fmt.Errorf("queengate: encode an ack-and-push: %w", err)
	}
	if len(push) == 0 {
		return append(b, head...), nil
	}
	b = append(b, head[:len(head)-1]...) // without its }
	b = append(b, `,"push":[`...)
	for i, m := range push {
		if i > 0 {
			b = append(b, ',')
		}
		data := m.Data
		m.Data = nil
		mhead, _ := json.Marshal(m) // strings: cannot fail
		if b, err = withData(b, mhead, data); err != nil {
			return nil, fmt.Errorf("queengate: push %d: %w", i, err)
		}
	}
	return append(b, "]}"...), nil
}
