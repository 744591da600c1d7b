package model

import "time"

// GroupStart is where a created consumer group starts on each partition:
// StartEarliest (every stored message), StartLatest (only messages pushed
// after its creation), Offsets (a next offset per partition named; the
// others start at their earliest), or Time (the first message stored at
// or after it).
type GroupStart struct {
	From    string           // StartEarliest, StartLatest, StartOffsets or StartTime
	Offsets map[string]int64 // partition name -> next offset, for StartOffsets
	Time    time.Time        // for StartTime
}

// The kinds of start position.
const (
	StartEarliest = "earliest"
	StartLatest   = "latest"
	StartOffsets  = "offsets"
	StartTime     = "time"
)

// Seek is where a seek moves a group: every partition of it, or the one
// named, to Offset (when Time is zero) or to the first message stored at
// or after Time.
type Seek struct {
	Partition string // "": every partition of the group
	Offset    int64
	Time      time.Time
}

// GroupMove is what a seek (or a create's start) did on one partition.
type GroupMove struct {
	Partition string
	// From and To are the group's next offset there before and after.
	From, To int64
	// Clamped: the offset asked for was below the first stored message
	// (retention deleted those before it) or past the last one, and To is
	// the nearest stored; for a time, it fell before the first stored
	// message and earlier ones were deleted.
	Clamped bool
	// LeaseEnded: a lease was running there; it ended.
	LeaseEnded bool
}

// GroupCreated is what creating a group answered.
type GroupCreated struct {
	Group
	// Created is false when the group existed, with the same start.
	Created bool
	Moves   []GroupMove
}

// GroupActivity is when a group was last active (consumer_group_active_at)
// and whether it still holds its queue's retention back.
type GroupActivity struct {
	Group    string
	IdleFor  time.Duration // 0 while a lease of it runs
	NotHolds bool          // idle past the queue's groupIdleSeconds
}

// GroupNoted is a consumer group's activity a gateway noted (a pop, an
// ack, a renewal, a release, or a long poll waiting): Ago before it is
// written.
type GroupNoted struct {
	GroupID int64
	Ago     time.Duration
}

// IdleGroup is a group idle past its queue's groupIdleSeconds: retention
// no longer waits for it.
type IdleGroup struct {
	ID           int64
	Queue, Group string
	ActiveAt     time.Time
}
