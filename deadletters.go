package queengate

import (
	"context"
	"encoding/json"
	"fmt"
	"time"
)

// DeadLettersRequest selects dead letters of a queue, for a list or a
// redrive (docs/protocol.md, "Redrive"); every field is optional.
type DeadLettersRequest struct {
	// Partition: only the dead letters of this partition.
	Partition string `json:"partition,omitempty"`
	// Group: only those the group dead-lettered.
	Group string `json:"group,omitempty"`
	// FromOffset and ToOffset bound the original offsets, inclusive.
	FromOffset *int64 `json:"fromOffset,omitempty"`
	ToOffset   *int64 `json:"toOffset,omitempty"`
	// Limit: at most this many (1 to MaxRedrive; 0: MaxRedrive).
	Limit int `json:"limit,omitempty"`
}

// MaxRedrive is the most dead letters one list or redrive request takes.
const MaxRedrive = 1000

// DeadLetterView is a dead letter not yet redriven, as a list shows it.
type DeadLetterView struct {
	Partition     string    `json:"partition"`
	DLQOffset     int64     `json:"dlqOffset"` // in the dead-letter queue's partition
	Group         string    `json:"group"`
	MessageID     string    `json:"messageId"` // the original's
	Offset        int64     `json:"offset"`
	TransactionID string    `json:"transactionId"`
	CreatedAt     time.Time `json:"createdAt"`
	Attempts      int       `json:"attempts"`
	// Error is the dead letter's, cut to MaxListedError bytes.
	Error string `json:"error"`
	// DataBytes is the original data's size.
	DataBytes int `json:"dataBytes"`
}

// MaxListedError bounds a listed dead letter's error: read the dead
// letter itself for the whole of it.
const MaxListedError = 256

// DeadLettersAnswer lists a queue's dead letters not yet redriven, in
// partition and offset order. More: some were left out (beyond the
// limit, or beyond what one answer holds); narrow the selection to see
// them.
type DeadLettersAnswer struct {
	Queue       string           `json:"queue"`
	DeadLetters []DeadLetterView `json:"deadLetters"`
	// Skipped counts messages of the dead-letter queue that are not
	// dead letters of the queue (pushed there by hand, say).
	Skipped int  `json:"skipped,omitempty"`
	More    bool `json:"more,omitempty"`
}

// RedrivenPartition is what a redrive moved back to one partition: Moved
// dead letters, now at offsets FirstOffset..LastOffset.
type RedrivenPartition struct {
	Partition   string `json:"partition"`
	Moved       int    `json:"moved"`
	FirstOffset int64  `json:"firstOffset"`
	LastOffset  int64  `json:"lastOffset"`
}

// RedriveAnswer is what a redrive did. More: selected dead letters are
// left (beyond the limit): send the same request again.
type RedriveAnswer struct {
	Queue      string              `json:"queue"`
	Moved      int                 `json:"moved"`
	Skipped    int                 `json:"skipped,omitempty"`
	Partitions []RedrivenPartition `json:"partitions"`
	More       bool                `json:"more,omitempty"`
}

// DeadLetters lists queue's dead letters not yet redriven that req
// selects: what Redrive with the same req would move (an operator
// request: it needs the admin token when the gateway has one).
func (c *Client) DeadLetters(ctx context.Context, queue string, req DeadLettersRequest) (DeadLettersAnswer, error) {
	var out DeadLettersAnswer
	return out, c.deadLetterRequest(ctx, c.subjects.DLQList(queue), queue, req, &out)
}

// Redrive moves queue's dead letters that req selects back to their
// partitions, up to req.Limit (MaxRedrive when 0) in one request; when
// the answer says More, send it again. Each dead letter moves once,
// however often a redrive is retried.
func (c *Client) Redrive(ctx context.Context, queue string, req DeadLettersRequest) (RedriveAnswer, error) {
	var out RedriveAnswer
	return out, c.deadLetterRequest(ctx, c.subjects.DLQRedrive(queue), queue, req, &out)
}

// RedriveAll redrives until nothing req selects is left, and returns how
// many dead letters it moved.
func (c *Client) RedriveAll(ctx context.Context, queue string, req DeadLettersRequest) (int, error) {
	moved := 0
	for {
		a, err := c.Redrive(ctx, queue, req)
		moved += a.Moved
		if err != nil || !a.More || a.Moved == 0 {
			return moved, err
		}
	}
}

func (c *Client) deadLetterRequest(ctx context.Context, subject, queue string, req DeadLettersRequest, out any) error {
	if err := CheckName("queue", queue); err != nil {
		return err
	}
	b, err := json.Marshal(req)
	if err != nil {
		return fmt.Errorf("queengate: encode the dead-letter selection: %w", err)
	}
	return c.request(ctx, subject, b, true, out)
}
