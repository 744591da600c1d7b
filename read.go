package queengate

import (
	"encoding/json"
	"time"
)

// Read defaults and limits (docs/protocol.md, "Reading").
const (
	DefaultReadMax = 1000
	MaxReadMax     = 10000
	// DefaultReadMaxBytes keeps an answer within NATS's default 1 MiB
	// payload, with room for the fields around the data.
	DefaultReadMaxBytes = 512 << 10
)

// ReadRequest is the body of a read: the offset to start from, and at
// most Max messages and about MaxBytes of data (zero: the defaults).
type ReadRequest struct {
	From     int64 `json:"from"`
	Max      int   `json:"max,omitempty"`
	MaxBytes int64 `json:"maxBytes,omitempty"`
}

// StoredMessage is one message as stored: its data exactly as pushed.
type StoredMessage struct {
	Offset        int64     `json:"offset"`
	MessageID     string    `json:"messageId"`
	TransactionID string    `json:"transactionId"`
	CreatedAt     time.Time `json:"createdAt"`
	// Data is the message's data. In an answer the Client decoded, it is
	// the caller's to keep and change, but it shares one buffer with the
	// answer's other messages (the answer as received, not a copy per
	// message): keeping one message's Data keeps that whole buffer in
	// memory. Clone it (bytes.Clone) to keep it alone. For binary data
	// (DataEncoding base64) it is the JSON string of its base64: Bytes
	// gives the bytes.
	Data json.RawMessage `json:"data"`
	// Headers are the message's headers, nil for none.
	Headers Headers `json:"headers,omitempty"`
	// DataEncoding is "base64" for binary data, empty for JSON data.
	DataEncoding string `json:"dataEncoding,omitempty"`
}

// ReadAnswer is a run of a partition's messages in offset order.
type ReadAnswer struct {
	Queue       string          `json:"queue"`
	Partition   string          `json:"partition"`
	PartitionID int64           `json:"partitionId"`
	Messages    []StoredMessage `json:"messages"`
	// Next is the offset to read from next (From again at the end).
	Next int64 `json:"next"`
	// FirstOffset is the first offset still stored; Purged says the read
	// asked for offsets below it, which retention has deleted (the
	// messages start at FirstOffset).
	FirstOffset int64 `json:"firstOffset"`
	LastOffset  int64 `json:"lastOffset"`
	Purged      bool  `json:"purged,omitempty"`
}

// GetRequest names one message: by MessageID, or by Queue, Partition and
// TransactionID (looked up as the deduplication verdict does: the
// earliest copy within the queue's window).
type GetRequest struct {
	MessageID     string `json:"messageId,omitempty"`
	Queue         string `json:"queue,omitempty"`
	Partition     string `json:"partition,omitempty"`
	TransactionID string `json:"transactionId,omitempty"`
}

// MessageAnswer is one stored message and where it is.
type MessageAnswer struct {
	Queue       string `json:"queue"`
	Partition   string `json:"partition"`
	PartitionID int64  `json:"partitionId"`
	StoredMessage
}

// ExplainRequest is the body of an explain.
type ExplainRequest struct {
	TransactionID string `json:"transactionId"`
}

// ExplainAnswer says what a push of TransactionID to the partition would
// be answered now, and why.
type ExplainAnswer struct {
	Queue         string `json:"queue"`
	Partition     string `json:"partition"`
	TransactionID string `json:"transactionId"`
	// Verdict is "duplicate" or "new" (queued).
	Verdict string `json:"verdict"`
	// Answer is the status the push would be answered: "queued",
	// "duplicate", or "failed" (a payload conflict on a reject queue);
	// empty when it depends on the data, which was not given.
	Answer string `json:"answer,omitempty"`
	// Conflict: the data given differs from the original's, and the
	// queue compares payloads: the push answer carries "conflict": true.
	Conflict bool `json:"conflict,omitempty"`
	// DependsOnData: the queue compares payloads and no data was given,
	// so whether the push conflicts cannot be told.
	DependsOnData bool `json:"dependsOnData,omitempty"`
	// OriginalDataGone: the original's data is gone (retention), so no
	// payload conflict can be told: any data is answered duplicate.
	OriginalDataGone bool `json:"originalDataGone,omitempty"`
	// OnConflict is the queue's payload-conflict mode, for a duplicate.
	OnConflict    string `json:"onConflict,omitempty"`
	WindowSeconds int    `json:"windowSeconds"`
	// Original is the copy a duplicate would name; nil for "new".
	Original *ExplainOriginal `json:"original,omitempty"`
	// Cache is what the answering gateway's dedup cache knows of it.
	Cache ExplainCache `json:"cache"`
	// Explanation says the same in a sentence.
	Explanation string `json:"explanation"`
}

// ExplainOriginal is the stored copy a duplicate names.
type ExplainOriginal struct {
	Offset    int64     `json:"offset"`
	MessageID string    `json:"messageId"`
	CreatedAt time.Time `json:"createdAt"`
	// CoveredUntil is when the window stops covering it: a push after
	// that is stored anew.
	CoveredUntil time.Time `json:"coveredUntil"`
	// Retained is false when retention has deleted the message itself
	// (its transactionId still counts until CoveredUntil).
	Retained bool `json:"retained"`
}

// ExplainCache is the answering gateway's cache entry for the partition,
// and the path a push of the transactionId would take through it.
type ExplainCache struct {
	State   string  `json:"state"`
	Holds   bool    `json:"holds"`
	Offsets []int64 `json:"offsets,omitempty"`
	// OffsetCount is how many offsets the cache holds for the id;
	// OffsetsTruncated: Offsets lists only the first of them (an answer
	// lists at most 100).
	OffsetCount      int   `json:"offsetCount,omitempty"`
	OffsetsTruncated bool  `json:"offsetsTruncated,omitempty"`
	VerifiedUpto     int64 `json:"verifiedUpto"`
	// Path is "skip" (the cache vouches and does not hold it: no probe),
	// "narrowed" (it holds it: SQL checks only its offsets), "full" (the
	// entry cannot vouch: the probe reads the whole window) or "none"
	// (the window is off: nothing to probe).
	Path string `json:"path"`
}
