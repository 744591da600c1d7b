package queengate

import "time"

// OverviewAnswer is every queue at a glance (GET /overview,
// <prefix>.overview; docs/admin-api.md), in name order (byte order),
// from the first or from the one a QueuesRequest names.
type OverviewAnswer struct {
	// SampleSeconds is the interval of the queues' History.
	SampleSeconds float64         `json:"sampleSeconds"`
	Queues        []QueueOverview `json:"queues"`
	// Count, Truncated and NextQueue page as a QueuesAnswer's.
	Count     int    `json:"count"`
	Truncated bool   `json:"truncated,omitempty"`
	NextQueue string `json:"nextQueue,omitempty"`
}

// QueueOverview is what an operator looks at first about a queue: what
// PostgreSQL holds of it, and what the answering gateway's pushes did.
type QueueOverview struct {
	Queue          string       `json:"queue"`
	Options        QueueOptions `json:"options"`
	Partitions     int          `json:"partitions"`
	StoredMessages int64        `json:"storedMessages"`
	// DLQDepth counts the dead letters of the queue not yet redriven.
	DLQDepth int64 `json:"dlqDepth"`
	// Delayed counts the messages a delay holds back from its groups
	// (summed over them).
	Delayed int64 `json:"delayed"`
	// Groups are the consumer groups with the most lag (at most
	// MaxOverviewGroups), most first; GroupCount is how many it has.
	Groups     []GroupLagView `json:"groups"`
	GroupCount int            `json:"groupCount"`
	// Queued, Duplicates and Failed count this gateway's push answers
	// since it started; History, oldest first, the same per interval of
	// the last minutes.
	Queued     int64      `json:"queued"`
	Duplicates int64      `json:"duplicates"`
	Failed     int64      `json:"failed"`
	History    []RateView `json:"history"`
}

// MaxOverviewGroups bounds the groups a QueueOverview lists.
const MaxOverviewGroups = 10

// GroupLagView is a consumer group's lag over every partition.
type GroupLagView struct {
	Group string `json:"group"`
	Lag   int64  `json:"lag"`
	// Delayed is the part of Lag a failure's delay holds back.
	Delayed int64 `json:"delayed,omitempty"`
}

// RateView counts push answers of one interval, ending At.
type RateView struct {
	At         time.Time `json:"at"`
	Queued     int64     `json:"queued"`
	Duplicates int64     `json:"duplicates"`
	Failed     int64     `json:"failed"`
}
