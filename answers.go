package queengate

import (
	"encoding/json"
	"time"
)

// Message is one message of a push. An empty TransactionID asks the
// gateway to mint one (such a message is never a duplicate); Data is any
// JSON value, null when empty.
type Message struct {
	TransactionID string          `json:"transactionId,omitempty"`
	Data          json.RawMessage `json:"data,omitempty"`
	// Headers are stored with the message and given back wherever its
	// data is (docs/protocol.md, "Headers").
	Headers Headers `json:"headers,omitempty"`
	// Binary, when not nil, is the message's data as bytes of any kind,
	// sent as base64 (docs/protocol.md, "Binary data"); Data is then
	// left empty.
	Binary []byte `json:"-"`
}

// PushStatus is what happened to a pushed message.
type PushStatus string

const (
	// StatusQueued: stored now, at Offset.
	StatusQueued PushStatus = "queued"
	// StatusDuplicate: stored before, within the queue's window; Offset
	// and MessageID are the original's, and nothing was written.
	StatusDuplicate PushStatus = "duplicate"
	// StatusFailed: not stored by this request (Error says why). Retry
	// with the same transactionId: if it was stored after all, the retry
	// answers duplicate. A payload conflict (Conflict) is failed again by
	// every retry: see [Result.Retryable].
	StatusFailed PushStatus = "failed"
)

// Result is one message's result in a push's answer, in the order of
// the request (docs/design.md, "Words": an answer is what a request gets
// back; a result is one message's part of it).
type Result struct {
	Index         int        `json:"index"`
	TransactionID string     `json:"transactionId"`
	Status        PushStatus `json:"status"`
	PartitionID   int64      `json:"partitionId,omitempty"`
	// MessageID and Offset say where the message is (for a duplicate,
	// the original); absent for a failed one.
	MessageID string `json:"messageId,omitempty"`
	Offset    int64  `json:"offset"`
	Error     string `json:"error,omitempty"`
	// Conflict: the transactionId is stored with different data (a queue
	// whose onConflict is flag answers duplicate, reject answers failed).
	Conflict bool `json:"conflict,omitempty"`
}

// Answer is Result's name before the project's words were fixed.
//
// Deprecated: use Result. Answer is removed in the release after next.
type Answer = Result

// TimerRequest is the body of a timer schedule: fireAt (RFC 3339 with a
// zone) or delayMs (from when the gateway reads it), not both.
type TimerRequest struct {
	TransactionID string          `json:"transactionId,omitempty"`
	Data          json.RawMessage `json:"data,omitempty"`
	FireAt        string          `json:"fireAt,omitempty"`
	DelayMs       *int64          `json:"delayMs,omitempty"`
}

// TimerScheduled answers a timer schedule.
type TimerScheduled struct {
	TimerID       string    `json:"timerId"`
	Status        string    `json:"status"` // "scheduled"
	FireAt        time.Time `json:"fireAt"`
	TransactionID string    `json:"transactionId"`
	// Existing: the transactionId was already pending in the partition;
	// that timer is answered and nothing changed (a retried schedule).
	Existing bool `json:"existing,omitempty"`
}

// TimerCancelled answers a cancel: "cancelled", or "absent" (no longer
// pending: fired, cancelled, or never existed).
type TimerCancelled struct {
	Status string `json:"status"`
}

// TimersAnswer lists pending timers, due first (by fireAt, then timerId).
// Truncated: more were asked for than fit one NATS message; Timers holds
// the first of them. Next, when more timers are pending after this page
// (it was cut, or reached its limit), is the position of the first left
// out: send it as a TimerListRequest's From for the next page.
type TimersAnswer struct {
	Timers    []TimerView    `json:"timers"`
	Truncated bool           `json:"truncated,omitempty"`
	Next      *TimerPosition `json:"next,omitempty"`
}

// TimerListRequest, the optional body of a timer list: the timers of
// Queue ("" for every queue), at most Limit (0: 100) of them, from the
// position From on (a TimersAnswer's Next; nil: from the first due).
type TimerListRequest struct {
	Queue string         `json:"queue,omitempty"`
	Limit int            `json:"limit,omitempty"`
	From  *TimerPosition `json:"from,omitempty"`
}

// TimerPosition is a place in the timer list's order: a timer's fireAt
// and timerId. Timers are listed from it on, whether or not that timer is
// still pending, so paging skips and repeats none.
type TimerPosition struct {
	FireAt  time.Time `json:"fireAt"`
	TimerID string    `json:"timerId"`
}

// TimerView is a pending timer.
type TimerView struct {
	TimerID       string    `json:"timerId"`
	Queue         string    `json:"queue"`
	Partition     string    `json:"partition"`
	TransactionID string    `json:"transactionId"`
	FireAt        time.Time `json:"fireAt"`
	CreatedAt     time.Time `json:"createdAt"`
}

// QueueOptions are a queue's options, always all of them.
type QueueOptions struct {
	DedupWindowSeconds int    `json:"dedupWindowSeconds"`
	RetentionSeconds   int    `json:"retentionSeconds"`
	OnConflict         string `json:"onConflict"` // ignore, flag or reject
	// MaxAttempts: deliveries to a consumer group before a message is
	// dead-lettered; 0 never.
	MaxAttempts int `json:"maxAttempts"`
	// RetainUntil: "age", or "consumed" (retention also waits for every
	// consumer group).
	RetainUntil string `json:"retainUntil"`
	// RetryDelayMs: how long a failed message waits before it is
	// delivered again, when its failure does not say; 0 not at all.
	RetryDelayMs int `json:"retryDelayMs"`
	// RetryBackoffMs: that wait by attempt instead, when not empty (the
	// n-th entry after the n-th attempt, the last after every later one).
	RetryBackoffMs []int `json:"retryBackoffMs"`
	// MaxAckPending: the most messages each consumer group holds
	// delivered and not yet settled; 0: no bound.
	MaxAckPending int `json:"maxAckPending"`
	// GroupIdleSeconds: a consumer group idle for longer no longer holds
	// retention back; 0: every group holds.
	GroupIdleSeconds int `json:"groupIdleSeconds"`
	// MaxUnheardDeliveries: every so many leases in a row that run out
	// unheard from the same message count their attempts (so a message
	// that kills its consumer is dead-lettered too); 0: none does.
	MaxUnheardDeliveries int `json:"maxUnheardDeliveries"`
}

// Options is QueueOptions' name before the project's words were fixed
// (a client's are Option).
//
// Deprecated: use QueueOptions. Options is removed in the release after
// next.
type Options = QueueOptions

// ConfigureRequest is the body of a configure: the options it sets
// (wire names, whole seconds), and Mode "merge" (keep what it omits; the
// default) or "replace" (return it to the default).
type ConfigureRequest struct {
	Queue   string           `json:"queue"`
	Options map[string]int64 `json:"-"`
	// OnConflict and RetainUntil, when set, are the options whose values
	// are words: onConflict (ignore, flag or reject) and retainUntil (age
	// or consumed).
	OnConflict  string `json:"-"`
	RetainUntil string `json:"-"`
	// RetryBackoffMs, when not nil, sets retryBackoffMs (empty: none).
	RetryBackoffMs []int  `json:"-"`
	Mode           string `json:"mode,omitempty"`
}

// MarshalJSON writes the options, numbers and OnConflict, as one object.
func (r ConfigureRequest) MarshalJSON() ([]byte, error) {
	options := make(map[string]any, len(r.Options)+1)
	for k, v := range r.Options {
		options[k] = v
	}
	if r.OnConflict != "" {
		options["onConflict"] = r.OnConflict
	}
	if r.RetainUntil != "" {
		options["retainUntil"] = r.RetainUntil
	}
	if r.RetryBackoffMs != nil {
		options["retryBackoffMs"] = r.RetryBackoffMs
	}
	wire := struct {
		Queue   string         `json:"queue"`
		Options map[string]any `json:"options,omitempty"`
		Mode    string         `json:"mode,omitempty"`
	}{r.Queue, options, r.Mode}
	if len(options) == 0 {
		wire.Options = nil
	}
	return json.Marshal(wire)
}

// QueueView is a queue's configuration.
type QueueView struct {
	Queue     string       `json:"queue"`
	Options   QueueOptions `json:"options"`
	CreatedAt time.Time    `json:"createdAt"`
	UpdatedAt time.Time    `json:"updatedAt"`
}

// ConfigureAnswer is the whole configuration after a configure.
type ConfigureAnswer struct {
	QueueView
	Created bool `json:"created"`
}

// QueuesAnswer lists every queue, in name order (byte order), from the
// first or from the one a QueuesRequest names.
type QueuesAnswer struct {
	Queues []QueueView `json:"queues"`
	// Count is how many queues there are; Truncated: Queues holds only
	// as many as fit one NATS message, and NextQueue names the first
	// left out (the next page's QueuesRequest.From).
	Count     int    `json:"count"`
	Truncated bool   `json:"truncated,omitempty"`
	NextQueue string `json:"nextQueue,omitempty"`
}

// QueuesRequest, the optional body of a queue list, asks for the queues
// from From on (a QueuesAnswer's NextQueue).
type QueuesRequest struct {
	From string `json:"from,omitempty"`
}

// QueueRequest, the optional body of a get queue, asks for the
// partitions from From on (a QueueAnswer's NextPartition).
type QueueRequest struct {
	From string `json:"from,omitempty"`
}

// QueueAnswer is a queue's configuration and partitions, in name order
// (byte order), from the first or from the one a QueueRequest names.
type QueueAnswer struct {
	QueueView
	Partitions []PartitionView `json:"partitions"`
	// Groups are the queue's consumer groups with their lag.
	Groups []GroupView `json:"groups"`
	// PartitionCount is how many partitions the queue has. Truncated: the
	// answer did not fit one NATS message whole, and was cut: the groups'
	// partitions lists are empty (a groups request pages them), and if
	// that was not enough, Partitions and Groups hold only their first
	// entries; NextPartition then names the first partition left out
	// (the next page's QueueRequest.From). A page asked for with From
	// has the groups' totals without their partitions.
	PartitionCount int    `json:"partitionCount"`
	Truncated      bool   `json:"truncated,omitempty"`
	NextPartition  string `json:"nextPartition,omitempty"`
}

// GroupView is a consumer group: its totals over all its partitions, and
// where it is on each, as many as fit in the answer from the first (or
// from the one asked for); NextPartition names the first left out.
type GroupView struct {
	Group             string `json:"group"`
	Lag               int64  `json:"lag"`
	PartitionCount    int    `json:"partitionCount"`
	Unconfirmed       int64  `json:"unconfirmed"`
	DeletedUnconsumed int64  `json:"deletedUnconsumed"`
	// IdleMs is the time since any of the group's consumers was last
	// heard from (a pop, even one that found nothing or a long poll while
	// it waits, an ack, a renewal or a release), or since it was created
	// or sought, to within 250 ms; 0 while a lease of it runs.
	IdleMs int64 `json:"idleMs"`
	// HoldsRetention is false once the group is idle past its queue's
	// groupIdleSeconds: retention no longer waits for it.
	HoldsRetention bool `json:"holdsRetention"`
	// DelayedPartitions counts the partitions a failure's delay holds
	// (each with its DelayedUntil), of all the group's, listed or not.
	DelayedPartitions int                  `json:"delayedPartitions,omitempty"`
	Partitions        []GroupPartitionView `json:"partitions"`
	NextPartition     string               `json:"nextPartition,omitempty"`
}

// GroupPartitionView is a group's position on one partition: every
// offset below NextOffset is consumed; Lag messages are not yet.
type GroupPartitionView struct {
	Partition     string     `json:"partition"`
	PartitionID   int64      `json:"partitionId"`
	NextOffset    int64      `json:"nextOffset"`
	LastOffset    int64      `json:"lastOffset"`
	Lag           int64      `json:"lag"`
	LeaseConsumer string     `json:"leaseConsumer,omitempty"`
	LeaseUntil    *time.Time `json:"leaseUntil,omitempty"`
	// Unconfirmed counts deliveries taken back because their lease ran
	// out with nothing heard from its consumer (not counted as attempts).
	Unconfirmed int64 `json:"unconfirmed,omitempty"`
	// DeletedUnconsumed counts messages retention deleted before the
	// group consumed them.
	DeletedUnconsumed int64 `json:"deletedUnconsumed,omitempty"`
	// DelayedUntil, while a failure's delay holds the partition for the
	// group (one asked for, or a run-out lease's), is when it stops: no
	// pop of the group takes the partition before.
	DelayedUntil *time.Time `json:"delayedUntil,omitempty"`
}

// PartitionView is one partition's figures: what PostgreSQL holds, then
// what the gateway answering the request has seen since it started.
type PartitionView struct {
	Partition      string     `json:"partition"`
	ID             int64      `json:"id"`
	FirstOffset    int64      `json:"firstOffset"`
	LastOffset     int64      `json:"lastOffset"`
	StoredMessages int64      `json:"storedMessages"`
	StoredBytes    int64      `json:"storedBytes"`
	OldestAt       *time.Time `json:"oldestAt"` // null when nothing is stored
	NewestAt       *time.Time `json:"newestAt"`
	TxnsStart      int64      `json:"txnsStart"`
	// This gateway's answers since it started (another gateway, or a
	// restart, counts apart): messages = queued + duplicates + failed.
	Messages   int64 `json:"messages"`
	Queued     int64 `json:"queued"`
	Duplicates int64 `json:"duplicates"`
	Failed     int64 `json:"failed"`
	// Flushes of the partition by this gateway, by what the probe did:
	// skipped (the cache vouched), narrowed (only the cache's offsets were
	// checked), full (the whole window was read).
	ProbeSkipped  int64     `json:"probeSkipped"`
	ProbeNarrowed int64     `json:"probeNarrowed"`
	ProbeFull     int64     `json:"probeFull"`
	Cache         CacheView `json:"cache"`
}

// CacheView is the answering gateway's cache entry for a partition.
type CacheView struct {
	// State is "vouching", "gap", "rebuild", "suppressed" or "absent".
	State          string `json:"state"`
	ResidentHashes int    `json:"residentHashes"`
	Bytes          int64  `json:"bytes"`
	HydratedFrom   int64  `json:"hydratedFrom"`
	VerifiedUpto   int64  `json:"verifiedUpto"`
}

// StatusAnswer is a gateway's health and figures.
type StatusAnswer struct {
	Version       string     `json:"version"`
	StartedAt     time.Time  `json:"startedAt"`
	UptimeSeconds float64    `json:"uptimeSeconds"`
	Ready         bool       `json:"ready"`
	Postgres      string     `json:"postgres"`
	NATS          string     `json:"nats"`
	SchemaVersion int        `json:"schemaVersion"`
	Cache         *CacheStat `json:"cache"` // null with the cache off
	Ingest        IngestStat `json:"ingest"`
	// Durability is what a push's acknowledgement means on the gateway's
	// PostgreSQL; null until first read.
	Durability *DurabilityStat `json:"durability"`
}

// DurabilityStat says what an acknowledged push survives, as read from
// PostgreSQL by the gateway's own sessions (docs/operations.md, "What an
// acknowledgement means").
type DurabilityStat struct {
	// Level is none, local-disk, standby-written, standby-disk or
	// standby-applied.
	Level                   string `json:"level"`
	SynchronousCommit       string `json:"synchronousCommit"`
	Fsync                   bool   `json:"fsync"`
	SynchronousStandbyNames string `json:"synchronousStandbyNames"`
	InRecovery              bool   `json:"inRecovery"`
	// Standbys streaming from the server; null when the gateway's role
	// may not see their state (it needs pg_monitor).
	Standbys []StandbyStat `json:"standbys"`
	// CommitsWait is true while commits wait for synchronous standbys
	// that are not streaming; null when that cannot be told.
	CommitsWait *bool `json:"commitsWait"`
	// Warning says how acknowledged messages could be lost, or why
	// commits wait; absent when neither.
	Warning   string    `json:"warning,omitempty"`
	CheckedAt time.Time `json:"checkedAt"`
}

// StandbyStat is a standby streaming from the gateway's PostgreSQL.
type StandbyStat struct {
	Name string `json:"name"`
	// SyncState is sync, quorum, potential or async (PostgreSQL's
	// pg_stat_replication.sync_state).
	SyncState string `json:"syncState"`
}

// CacheStat is the dedup cache's figures.
type CacheStat struct {
	BudgetBytes int64 `json:"budgetBytes"`
	// BudgetInForceBytes is BudgetBytes less what the cache yields to
	// the rest of the process under its memory limit.
	BudgetInForceBytes int64 `json:"budgetInForceBytes"`
	ResidentBytes      int64 `json:"residentBytes"`
	ResidentHashes     int64 `json:"residentHashes"`
	Entries            int   `json:"entries"`
	Suppressed         int   `json:"suppressed"`
	Hydrations         int64 `json:"hydrations"`
	Births             int64 `json:"births"`
	Fills              int64 `json:"fills"`
	Gaps               int64 `json:"gaps"`
	Rebuilds           int64 `json:"rebuilds"`
	Evictions          int64 `json:"evictions"`
}

// IngestStat is ingest's figures.
type IngestStat struct {
	BufferedMessages int `json:"bufferedMessages"`
}
