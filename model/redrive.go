package model

// RedriveGroup is the consumer group of a dead-letter queue that records
// which dead letters were redriven: a redrive consumes what it moves
// under this group, in the transaction that pushes it back, so no dead
// letter is moved twice (docs/protocol.md, "Redrive").
const RedriveGroup = "redrive"

// DeadLetterFilter selects a queue's dead letters: those of Group (""
// any) whose original offset is within [FromOffset, ToOffset] (nil: no
// bound on that side).
type DeadLetterFilter struct {
	Group                string
	FromOffset, ToOffset *int64
}

// Matches says whether dead letter d is selected.
func (f DeadLetterFilter) Matches(d DeadLetter) bool {
	return (f.Group == "" || d.Group == f.Group) &&
		(f.FromOffset == nil || d.Offset >= *f.FromOffset) &&
		(f.ToOffset == nil || d.Offset <= *f.ToOffset)
}

// PendingDeadLetter is a dead letter not yet redriven: where it is in
// the dead-letter queue's partition, and what it says.
type PendingDeadLetter struct {
	Offset int64 // in the dead-letter partition
	Letter DeadLetter
}

// Redriven is what a redrive of one partition did: Moved dead letters
// pushed back to offsets FirstOffset..LastOffset of the original
// partition; Skipped selected messages of the dead-letter partition it
// could not move (not a dead letter of the queue, or its data left out
// and the original gone); More: selected dead letters are left beyond
// the limit.
type Redriven struct {
	Moved, Skipped          int
	FirstOffset, LastOffset int64
	More                    bool
}
