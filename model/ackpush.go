package model

import "errors"

// Derived is a message an ack-and-push stores beside the items it
// settles (docs/protocol.md, "Ack and push"): Data is JSON as sent, nil
// for null; Meta its headers and data encoding (AppendMeta), nil for
// none.
type Derived struct {
	Queue, Partition, TxnID string
	Data, Meta              []byte
}

// DerivedOutcome is where a derived message is: at Offset of PartitionID,
// written now or, when Duplicate, stored before (the original's offset).
// Conflict: a duplicate whose original has other data, in a queue whose
// onConflict is flag.
type DerivedOutcome struct {
	PartitionID, Offset int64
	Duplicate, Conflict bool
}

// AckPushResult is what an ack-and-push committed: the ack's outcomes,
// and one outcome per derived message, in request order.
type AckPushResult struct {
	Ack    SettledBatch
	Pushed []DerivedOutcome
}

// ErrNotCommitted is an ack-and-push that changed nothing because one of
// its parts could not be carried out (an item not settled, a payload
// conflict in a queue that rejects them, a target without
// deduplication); the error says which.
var ErrNotCommitted = errors.New("nothing was settled or pushed")
