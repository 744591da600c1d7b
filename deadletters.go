package queengate

import "time"

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
