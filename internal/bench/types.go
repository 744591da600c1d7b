package bench

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"time"

	"github.com/queengate/queengate/dedup"
	"github.com/queengate/queengate/model"
)

// Workload is what the producers send. Every target gets the same
// workload, generated from the same seed.
type Workload struct {
	Scenario   string // preset name, or "custom"
	Producers  int    // concurrent producers
	PerRequest int    // messages per request (a target's batch)
	// MinPerRequest, when set, makes requests vary in size, uniformly
	// from it to PerRequest.
	MinPerRequest int `json:",omitempty"`
	// Total messages to send; 0 means run for Duration.
	Total    int64
	Duration time.Duration
	Queues   int
	// Partitions per queue.
	Partitions   int
	PayloadBytes int // approximate size of each message's data, as JSON
	// RetryShare is the share of messages that repeat an id already sent
	// to the same partition (0 to 1). CrossShare is the share of those
	// retries that repeat another producer's id rather than the
	// producer's own.
	RetryShare float64
	CrossShare float64
	// WindowSeconds is the deduplication window (queengate's
	// dedupWindowSeconds, JetStream's duplicate window). 0 disables.
	WindowSeconds int
	// FlushSize and Linger configure gateways that queenbench starts.
	FlushSize int
	Linger    time.Duration
	// CacheMB is the gateways' dedup cache budget in MiB, given to the
	// gateways queenbench starts; 0 leaves theirs (CacheBudgetMB).
	CacheMB int `json:",omitempty"`
	// BudgetChecks adds the checks of a run with many partitions to the
	// report: no thrash (hydrations at most the partitions touched plus
	// the evictions) and the gateway's memory within its cache budget
	// plus rssAllowanceBytes.
	BudgetChecks bool `json:",omitempty"`
	// Gateways is how many queengate processes queenbench starts (--self).
	Gateways int
	// Replication is the PostgreSQL queenbench runs (--self): "" the
	// single server of the other benchmarks; otherwise a primary ready
	// for streaming replication with synchronous_commit on, and for
	// ReplicationAsync and the synchronous modes one standby
	// ([ReplicationModes]).
	Replication string `json:",omitempty"`
	// Prefill is how many unique messages are pushed before the measured
	// run (the "window" scenario fills the window first); it sends to the
	// partitions in turn, so that one at least as large as a request per
	// partition makes every partition exist.
	Prefill int64
	// FireAndForget publishes without a reply subject and reads the
	// answers on the ack subjects (queengate only).
	FireAndForget bool
	// JSPublish makes the queengate target's producers publish as the
	// jetstream target's do: each message alone with a JetStream client's
	// PublishMsgAsync, to <prefix>.jetstream.<queue>.<partition>, its
	// transactionId as Nats-Msg-Id, and wait for the batch's PubAcks.
	JSPublish bool `json:",omitempty"`
	// Headers is how many small headers every message carries (Headers
	// gives them): a push's "headers", a publish's NATS headers.
	Headers int `json:",omitempty"`
	// KillAt, when positive, is the share of the run's messages answered
	// before one gateway is killed outright (the failover scenario).
	KillAt float64
	// RetryFailed makes a producer resend a failed request, with the same
	// transactionIds, until it is answered; RequestTimeout bounds one
	// attempt (default a minute).
	RetryFailed    bool
	RequestTimeout time.Duration
	Seed           int64
	// RunID names this run's queues and ids, so that runs never see each
	// other's messages; set per round by the runner.
	RunID string `json:"-"`
}

// The --replication modes.
const (
	ReplicationNone        = "none"
	ReplicationAsync       = "async"
	ReplicationSync        = "sync"
	ReplicationRemoteApply = "remote_apply"
)

// ReplicationModes are the values Workload.Replication may take besides "".
var ReplicationModes = []string{ReplicationNone, ReplicationAsync, ReplicationSync, ReplicationRemoteApply}

// SynchronousCommit is the synchronous_commit of the primary queenbench
// runs for w.Replication: remote_apply for that mode, else on; "" without
// Replication.
func (w Workload) SynchronousCommit() string {
	switch w.Replication {
	case "":
		return ""
	case ReplicationRemoteApply:
		return "remote_apply"
	}
	return "on"
}

// CacheBudgetMB is the dedup cache budget the gateways run with: CacheMB,
// else what this environment gives them, else their default.
func (w Workload) CacheBudgetMB() int {
	if w.CacheMB > 0 {
		return w.CacheMB
	}
	if mb, err := strconv.Atoi(os.Getenv("QUEEN_DEDUP_CACHE_MB")); err == nil {
		return mb
	}
	return dedup.DefaultBudgetBytes >> 20
}

// AttemptTimeout bounds one attempt of a request: RequestTimeout, else a
// minute.
func (w Workload) AttemptTimeout() time.Duration {
	if w.RequestTimeout > 0 {
		return w.RequestTimeout
	}
	return time.Minute
}

// Batch is one request: messages for one partition of one queue.
type Batch struct {
	Queue     string
	Partition string
	IDs       []string // transactionIds, in order
	// Data is each message's data as JSON (the same length for all).
	Data [][]byte
}

// Target is a system under test. Send is called concurrently, once per
// producer at a time; it returns one Status per message of the batch, in
// order, once the outcome is durable, or an error when the whole batch
// failed (every message then counts as failed).
type Target interface {
	Name() string
	// Setup prepares a fresh place to write (tables, streams) for the
	// workload; called once per run, before any Send.
	Setup(ctx context.Context, w Workload) error
	Send(ctx context.Context, producer int, b *Batch) ([]model.Status, error)
	// Figures reports what the target can say about its own cost for the
	// run so far; any field may be left zero when unknown.
	Figures(ctx context.Context) (Figures, error)
	Close() error
}

// Figures are a target's own cost figures over a run.
type Figures struct {
	// ServerCPUSeconds is CPU time spent by the server process(es) of the
	// target (the gateways, or the JetStream server) during the run.
	ServerCPUSeconds float64
	// PeakRSSBytes is the largest resident set seen of those processes;
	// GatewayPeakRSSBytes that of the gateways alone (queengate, started
	// by queenbench), 0 when unknown.
	PeakRSSBytes        int64
	GatewayPeakRSSBytes int64
	// ProbeSkippedShare is the share of segments whose SQL probe was
	// skipped (queengate), -1 when unknown; ProbeNarrowedShare the share
	// narrowed to the cache's candidates.
	ProbeSkippedShare  float64
	ProbeNarrowedShare float64
	// UnrolledShare is the stored hashes the probes compared over what
	// full probes of the same segments would have (queengate), -1 when
	// unknown.
	UnrolledShare float64
	// CacheBytesPerHash is the dedup cache's resident bytes per hash
	// (queengate), -1 when unknown; CacheBytesPerEntry per resident
	// entry (a partition's).
	CacheBytesPerHash  float64
	CacheBytesPerEntry float64
	// MeanFrame is the messages per segment written (queengate), -1 when
	// unknown.
	MeanFrame float64
	// StoredBytesPerMessage is what the log's tables (heap, TOAST and
	// indexes of log_segments and log_txns) grew by per message stored
	// during the run (queengate with --pg-url or --self), -1 when unknown.
	StoredBytesPerMessage float64
	// Hydrations, Fills and Evictions are the gateways' cache
	// hydrations, gap fills and entries evicted for the budget during the
	// run (queengate), -1 when unknown.
	Hydrations, Fills, Evictions int64
	// Births are the cache entries installed without a read, for
	// partitions a flush created (queengate), -1 when unknown.
	Births int64
	// Suppressed is the partitions the cache's admission gate keeps out
	// at the run's end (queengate), -1 when unknown.
	Suppressed int64
}

// UnknownFigures are Figures with every optional figure unknown.
func UnknownFigures() Figures {
	return Figures{ProbeSkippedShare: -1, ProbeNarrowedShare: -1, UnrolledShare: -1, CacheBytesPerHash: -1,
		CacheBytesPerEntry: -1, MeanFrame: -1, StoredBytesPerMessage: -1, Hydrations: -1, Fills: -1, Evictions: -1, Births: -1, Suppressed: -1}
}

// Result is one run of one target.
type Result struct {
	Target   string        `json:"target"`
	Scenario string        `json:"scenario"`
	Round    int           `json:"round"`
	Messages int64         `json:"messages"` // answered (all statuses)
	Requests int64         `json:"requests"`
	Elapsed  time.Duration `json:"elapsedNs"`
	// Throughput is answered messages per second.
	Throughput float64 `json:"msgPerSecond"`
	// Request latency percentiles.
	P50 time.Duration `json:"p50Ns"`
	P90 time.Duration `json:"p90Ns"`
	P99 time.Duration `json:"p99Ns"`
	Max time.Duration `json:"maxNs"`
	// Answers by status.
	Queued    int64 `json:"queued"`
	Duplicate int64 `json:"duplicate"`
	Failed    int64 `json:"failed"`
	// Exactness: DistinctIDs is the number of distinct (partition,
	// transactionId) pairs sent and answered not failed; Violations counts
	// ids queued more than once, and ids answered duplicate that were never
	// answered queued. Every run must report zero.
	DistinctIDs int64 `json:"distinctIds"`
	Violations  int64 `json:"violations"`
	// CPUSecondsPerMillion is server CPU seconds per million messages.
	CPUSecondsPerMillion float64 `json:"cpuSecondsPerMillion"`
	// AutovacuumCPUPerMillion is the CPU seconds PostgreSQL's automatic
	// vacuums and analyzes reported during the run, per million messages
	// (-1 when queenbench does not run the cluster). Autovacuum lags the
	// writes: in a comparison, part of one target's may land in the next
	// one's run; a long single-target run attributes it best.
	AutovacuumCPUPerMillion float64 `json:"autovacuumCpuSecondsPerMillion"`
	PeakRSSBytes            int64   `json:"peakRssBytes"`
	ProbeSkippedShare       float64 `json:"probeSkippedShare"`
	ProbeNarrowedShare      float64 `json:"probeNarrowedShare"`
	UnrolledShare           float64 `json:"unrolledShare"`
	CacheBytesPerHash       float64 `json:"cacheBytesPerHash"`
	CacheBytesPerEntry      float64 `json:"cacheBytesPerEntry"`
	MeanFrame               float64 `json:"meanFrameMessages"`
	StoredBytesPerMessage   float64 `json:"storedBytesPerMessage"`
	Hydrations              int64   `json:"hydrations"`
	Births                  int64   `json:"births"`
	Fills                   int64   `json:"fills"`
	Evictions               int64   `json:"evictions"`
	Suppressed              int64   `json:"suppressedPartitions"`
	// GatewayPeakRSSBytes is the gateways' own peak resident set since
	// they started (without their NATS server), 0 when unknown.
	GatewayPeakRSSBytes int64 `json:"gatewayPeakRssBytes"`
	// PartitionsTouched is how many partitions the measured run sent to.
	PartitionsTouched int64 `json:"partitionsTouched"`
	// Retries are requests sent again after a failure (RetryFailed);
	// Killed the gateways killed during the run (KillAt).
	Retries int64 `json:"retries"`
	Killed  int64 `json:"killed"`
	// MaxGap is the longest a producer went without a successful answer
	// (from the run's start, or its previous one); FleetGap the longest
	// no producer had one.
	MaxGap   time.Duration `json:"maxGapNs"`
	FleetGap time.Duration `json:"fleetGapNs"`

	// PrimaryCPUPerMillion and StandbyCPUPerMillion are the CPU seconds
	// of the PostgreSQL primary's processes and of its standby's per
	// million messages, with Workload.Replication (0 without). Neither
	// is in CPUSecondsPerMillion, the target's own.
	PrimaryCPUPerMillion float64 `json:"primaryCpuSecondsPerMillion,omitempty"`
	StandbyCPUPerMillion float64 `json:"standbyCpuSecondsPerMillion,omitempty"`
	// PostgresCPUPerMillion is the two together, for every run where
	// queenbench runs PostgreSQL (--self), -1 otherwise: what the
	// queengate target costs beyond its own processes. A peer's run
	// (JetStream) shows the autovacuum that lagged into it.
	PostgresCPUPerMillion float64 `json:"postgresCpuSecondsPerMillion"`
}

// Ratio summarises queengate's throughput relative to a target over the
// rounds of a --compare run: queengate msg/s divided by the target's msg/s
// in the same round (2 means queengate was twice as fast). For a fleet of
// several gateways (queengate@N) it is the other way round: the fleet's
// msg/s divided by one gateway's, as Label says.
type Ratio struct {
	Target string  `json:"target"`
	Label  string  `json:"label"` // e.g. "queengate ÷ naive"
	Min    float64 `json:"min"`
	Median float64 `json:"median"`
	Max    float64 `json:"max"`
}

// Report is everything a run prints.
type Report struct {
	Machine  string   `json:"machine"` // e.g. "2 cores, 23 GiB, linux/amd64"
	Command  string   `json:"command"`
	Workload Workload `json:"workload"`
	Results  []Result `json:"results"`
	// Medians per target over the rounds (one entry per target).
	Medians []Result `json:"medians"`
	// Ratios of queengate's throughput to each other target's, present for
	// --compare runs.
	Ratios []Ratio `json:"ratios,omitempty"`
	// Checks are the budget checks of each gateway round, for workloads
	// that ask for them (BudgetChecks).
	Checks []Check `json:"checks,omitempty"`
}

// Check is one target's figure of one round held to its limit.
type Check struct {
	Target string `json:"target"`
	Round  int    `json:"round"`
	// Name says what is checked; Figures the figures it compared.
	Name    string `json:"name"`
	Figures string `json:"figures"`
	Met     bool   `json:"met"`
}

// MessageHeaders are the first n of the small headers a benchmark's
// messages carry (Workload.Headers): what producers typically send, a
// content type, a tenant, a schema version, then numbered ones.
func MessageHeaders(n int) [][2]string {
	base := [][2]string{{"content-type", "application/json"}, {"x-tenant", "acme"}, {"x-schema", "v3"}}
	out := make([][2]string, 0, n)
	for i := range n {
		if i < len(base) {
			out = append(out, base[i])
			continue
		}
		out = append(out, [2]string{fmt.Sprintf("x-h%d", i), "v"})
	}
	return out
}
