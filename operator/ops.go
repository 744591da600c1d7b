package operator

import (
	"context"
	"crypto/subtle"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/rs/zerolog"

	queengate "github.com/queengate/queengate"
	"github.com/queengate/queengate/gateway"
	"github.com/queengate/queengate/ingest"
	"github.com/queengate/queengate/internal/wire"
	"github.com/queengate/queengate/model"
)

// ConfigStore is what the operator API needs from the store.
type ConfigStore interface {
	StoreHealth
	Configure(ctx context.Context, queue string, patch model.OptionsPatch, replace bool) (model.QueueConfig, bool, error)
	QueueConfig(ctx context.Context, queue string) (model.QueueConfig, error)
	Queues(ctx context.Context) ([]model.QueueConfig, error)
	Partitions(ctx context.Context, queueID int64) ([]model.PartitionInfo, error)
	GroupPartitions(ctx context.Context, queueID int64) ([]model.GroupPartition, error)
	GroupActivity(ctx context.Context, queueID int64) ([]model.GroupActivity, error)
	LogReader
	DeadLetterStore
	QueueFigures(ctx context.Context) ([]model.QueueFigures, error)
	QueueNames(ctx context.Context, ids []int64) (map[int64]string, error)
	QueueStore
}

// IngestStats is what the operator API reads from ingest.
type IngestStats interface {
	Counts(pid int64) ingest.PartitionCounts
	CacheState(pid int64) ingest.PartitionCache
	CacheSummary() (ingest.CacheSummary, bool)
	Buffered() int
	CacheLookup(pid int64, h model.Hash) ingest.HashLookup
	QueueCounts(queueID int64) ingest.PartitionCounts
	EachQueueCounts(f func(queueID int64, c ingest.PartitionCounts))
}

// Ops is the operator API: configure, queues, status. One implementation
// behind the admin HTTP routes and the NATS subjects, so both answer the
// same bodies with the same errors.
type Ops struct {
	store      ConfigStore
	reads      LogReader
	ing        IngestStats
	nc         *nats.Conn
	token      []byte // empty: no token required
	version    string
	wantSchema int
	started    time.Time
	// publish announces commits (a redrive's); set when the gateway serves.
	publish func(queues []string)
	// durability is the last reading of what an acknowledgement means.
	durability func() *queengate.DurabilityStat
	// rates samples push answers for the overview, while the admin
	// server runs.
	rates *pushRates
	// queues is told of the queues deleted and purged (WatchQueues).
	queues QueueWatcher
}

// OpsConfig configures the operator API.
type OpsConfig struct {
	// Token, when set, must be presented as "Authorization: Bearer <token>"
	// (HTTP header or NATS header) by every operator request.
	Token      string
	Version    string
	WantSchema int // the migration version readiness requires
	// SampleEvery is how often the overview samples push answers (0: 5 s).
	SampleEvery time.Duration
	// Durability, when set, is the last reading of what an
	// acknowledgement means on PostgreSQL (nil before the first), for
	// /status and /readyz.
	Durability func() *queengate.DurabilityStat
}

// NewOps builds the operator API.
func NewOps(cfg OpsConfig, store ConfigStore, ing IngestStats, nc *nats.Conn) *Ops {
	return &Ops{store: store, reads: store, ing: ing, nc: nc, token: []byte(cfg.Token), version: cfg.Version,
		wantSchema: cfg.WantSchema, started: time.Now(), rates: newPushRates(cfg.SampleEvery, ing, store), durability: cfg.Durability}
}

// Authorize checks an Authorization header value against the token.
func (o *Ops) Authorize(header string) *queengate.Error {
	if len(o.token) == 0 {
		return nil
	}
	// The scheme is case-insensitive (RFC 7235): "bearer" is "Bearer".
	scheme, got, _ := strings.Cut(strings.TrimSpace(header), " ")
	if !strings.EqualFold(scheme, "Bearer") || subtle.ConstantTimeCompare([]byte(strings.TrimSpace(got)), o.token) != 1 {
		return &queengate.Error{Code: queengate.CodeUnauthorized, Text: "unauthorized: send the admin token as \"Authorization: Bearer <token>\" (QUEEN_ADMIN_TOKEN)"}
	}
	return nil
}

func queueView(c model.QueueConfig) queengate.QueueView {
	return queengate.QueueView{Queue: c.Name, CreatedAt: c.CreatedAt.UTC(), UpdatedAt: c.UpdatedAt.UTC(),
		Options: queengate.QueueOptions{DedupWindowSeconds: c.DedupWindowSeconds, RetentionSeconds: c.RetentionSeconds,
			OnConflict: string(c.OnConflict), MaxAttempts: c.MaxAttempts, RetainUntil: string(c.RetainUntil),
			RetryDelayMs: c.RetryDelayMs, RetryBackoffMs: c.RetryBackoffMs, MaxAckPending: c.MaxAckPending,
			GroupIdleSeconds: c.GroupIdleSeconds, MaxUnheardDeliveries: c.MaxUnheardDeliveries}}
}

// Configure applies a configure request body.
func (o *Ops) Configure(ctx context.Context, body []byte) (any, *queengate.Error) {
	queue, patch, replace, werr := decodeConfigure(body)
	if werr != nil {
		return nil, werr
	}
	c, created, err := o.store.Configure(ctx, queue, patch, replace)
	if err != nil {
		var optErr *model.OptionError
		if errors.As(err, &optErr) {
			return nil, wire.BadInput("%s", optErr)
		}
		return nil, gateway.StoreError(err)
	}
	return queengate.ConfigureAnswer{QueueView: queueView(c), Created: created}, nil
}

// options are the configurable options and their JSON names.
var options = []string{"dedupWindowSeconds", "retentionSeconds", "onConflict", "maxAttempts", "retainUntil",
	"retryDelayMs", "retryBackoffMs", "maxAckPending", "groupIdleSeconds", "maxUnheardDeliveries"}

var (
	configureShape = wire.Shape{Name: "a configure request", Example: `{"queue": "...", "options": {...}, "mode": "merge"|"replace"}`}
	optionsShape   = wire.Shape{Name: "the options object", Example: `{"dedupWindowSeconds": 600}`}
)

// decodeConfigure parses {"queue", "options", "mode"} strictly: every
// problem is a 400 naming what to fix, and nothing is changed.
func decodeConfigure(body []byte) (queue string, patch model.OptionsPatch, replace bool, werr *queengate.Error) {
	werr = wire.DecodeObject(body, wire.TheBody, configureShape,
		wire.Field{Name: "queue", Decode: wire.NameInto("queue", &queue)},
		wire.Field{Name: "options", Decode: func(raw []byte) *queengate.Error {
			patch, werr = decodeOptions(raw)
			return werr
		}},
		wire.Field{Name: "mode", Decode: func(raw []byte) *queengate.Error {
			mode, _ := wire.DecodeString(raw)
			if mode != "merge" && mode != "replace" {
				return wire.BadInput(`"mode" must be "merge" (the default) or "replace", not %s`, wire.Describe(raw))
			}
			replace = mode == "replace"
			return nil
		}},
	)
	switch {
	case werr != nil:
		return "", model.OptionsPatch{}, false, werr
	case queue == "":
		return "", patch, false, wire.BadInput(`"queue" is missing: want %s`, configureShape.Example)
	}
	return queue, patch, replace, nil
}

// decodeOptions parses the options object: whole numbers, each option once.
func decodeOptions(raw []byte) (patch model.OptionsPatch, werr *queengate.Error) {
	werr = wire.DecodeObject(raw, `"options"`, optionsShape,
		wire.Field{Name: "dedupWindowSeconds", Decode: optionInto("dedupWindowSeconds", &patch.DedupWindowSeconds)},
		wire.Field{Name: "retentionSeconds", Decode: optionInto("retentionSeconds", &patch.RetentionSeconds)},
		wire.Field{Name: "onConflict", Decode: func(raw []byte) *queengate.Error {
			mode, ok := wire.DecodeString(raw)
			if m := model.ConflictMode(mode); ok && m.Valid() {
				patch.OnConflict = &m
				return nil
			}
			return wire.BadInput(`"onConflict" must be one of "ignore", "flag", "reject", not %s`, wire.Describe(raw))
		}},
		wire.Field{Name: "maxAttempts", Decode: optionInto("maxAttempts", &patch.MaxAttempts)},
		wire.Field{Name: "retainUntil", Decode: func(raw []byte) *queengate.Error {
			until, ok := wire.DecodeString(raw)
			if r := model.RetainUntil(until); ok && r.Valid() {
				patch.RetainUntil = &r
				return nil
			}
			return wire.BadInput(`"retainUntil" must be one of "age", "consumed", not %s`, wire.Describe(raw))
		}},
		wire.Field{Name: "retryDelayMs", Decode: boundedOptionInto("retryDelayMs", model.MaxRetryDelayMs, &patch.RetryDelayMs)},
		wire.Field{Name: "retryBackoffMs", Decode: backoffInto(&patch.RetryBackoffMs)},
		wire.Field{Name: "maxAckPending", Decode: boundedOptionInto("maxAckPending", model.MaxAckPendingLimit, &patch.MaxAckPending)},
		wire.Field{Name: "groupIdleSeconds", Decode: optionInto("groupIdleSeconds", &patch.GroupIdleSeconds)},
		wire.Field{Name: "maxUnheardDeliveries",
			Decode: boundedOptionInto("maxUnheardDeliveries", model.MaxUnheardDeliveriesLimit, &patch.MaxUnheardDeliveries)},
	)
	return patch, werr
}

// backoffInto decodes retryBackoffMs: an array of up to
// model.MaxRetryBackoff delays, each a whole number of milliseconds.
func backoffInto(dst **[]int) func([]byte) *queengate.Error {
	return func(raw []byte) *queengate.Error {
		elems, ok := wire.ScanArray(raw)
		if !ok {
			return wire.BadInput(`"retryBackoffMs" must be an array of delays in milliseconds such as [1000, 5000, 30000], not %s`, wire.Describe(raw))
		}
		if len(elems) > model.MaxRetryBackoff {
			return wire.BadInput(`"retryBackoffMs" has %d entries: at most %d`, len(elems), model.MaxRetryBackoff)
		}
		delays := make([]int, len(elems))
		for i, e := range elems {
			name := "retryBackoffMs[" + strconv.Itoa(i) + "]"
			if werr := wire.WholeNumberInto(name, 0, model.MaxRetryDelayMs, &delays[i])(e); werr != nil {
				return werr
			}
		}
		*dst = &delays
		return nil
	}
}

// optionInto decodes a numeric option: a whole number from 0 to
// model.MaxOptionSeconds.
func optionInto(name string, dst **int) func([]byte) *queengate.Error {
	return boundedOptionInto(name, model.MaxOptionSeconds, dst)
}

// boundedOptionInto decodes a numeric option: a whole number from 0 to
// most.
func boundedOptionInto(name string, most int64, dst **int) func([]byte) *queengate.Error {
	return func(raw []byte) *queengate.Error {
		var n int
		if werr := wire.WholeNumberInto(name, 0, most, &n)(raw); werr != nil {
			return werr
		}
		*dst = &n
		return nil
	}
}

// ListQueues lists the queues' configurations in name order, from the
// queue named from on ("": the first).
func (o *Ops) ListQueues(ctx context.Context, from string) (any, *queengate.Error) {
	qs, err := o.store.Queues(ctx)
	if err != nil {
		return nil, gateway.StoreError(err)
	}
	queueName := func(q model.QueueConfig) string { return q.Name }
	byName(qs, queueName)
	first, werr := fromName(qs, queueName, from, fmt.Sprintf("no queue %q", from))
	if werr != nil {
		return nil, werr
	}
	out := queengate.QueuesAnswer{Queues: make([]queengate.QueueView, 0, len(qs)-first), Count: len(qs)}
	for _, q := range qs[first:] {
		out.Queues = append(out.Queues, queueView(q))
	}
	fitQueues(&out, o.AnswerBudget())
	return out, nil
}

// GetQueue gives a queue's configuration and per-partition figures, in
// name order from the partition named from on ("": the first).
func (o *Ops) GetQueue(ctx context.Context, queue, from string) (any, *queengate.Error) {
	if werr := gateway.ValidQueue(queue); werr != nil {
		return nil, werr
	}
	c, err := o.store.QueueConfig(ctx, queue)
	if errors.Is(err, model.ErrQueueNotFound) {
		return nil, &queengate.Error{Code: queengate.CodeNotFound, Text: fmt.Sprintf("queue %q does not exist", queue)}
	}
	if err != nil {
		return nil, gateway.StoreError(err)
	}
	parts, err := o.store.Partitions(ctx, c.ID)
	if err != nil {
		return nil, gateway.StoreError(err)
	}
	partitionName := func(p model.PartitionInfo) string { return p.Name }
	byName(parts, partitionName)
	first, werr := fromName(parts, partitionName, from, fmt.Sprintf("no partition %q of queue %s", from, queue))
	if werr != nil {
		return nil, werr
	}
	out := queengate.QueueAnswer{QueueView: queueView(c), Partitions: make([]queengate.PartitionView, 0, len(parts)-first),
		PartitionCount: len(parts)}
	for _, p := range parts[first:] {
		n := o.ing.Counts(p.ID)
		cs := o.ing.CacheState(p.ID)
		v := queengate.PartitionView{
			Partition: p.Name, ID: p.ID, FirstOffset: p.FirstOffset, LastOffset: p.LastOffset,
			StoredMessages: p.StoredMessages(), StoredBytes: p.StoredBytes, TxnsStart: p.TxnsStart,
			Messages: n.Queued + n.Duplicate + n.Failed, Queued: n.Queued, Duplicates: n.Duplicate, Failed: n.Failed,
			ProbeSkipped: n.ProbeSkipped, ProbeNarrowed: n.ProbeNarrowed, ProbeFull: n.ProbeFull,
			Cache: queengate.CacheView{State: cs.State, ResidentHashes: cs.ResidentHashes, Bytes: cs.Bytes,
				HydratedFrom: cs.HydratedFrom, VerifiedUpto: cs.VerifiedUpto},
		}
		if !p.OldestAt.IsZero() {
			oldest, newest := p.OldestAt.UTC(), p.NewestAt.UTC()
			v.OldestAt, v.NewestAt = &oldest, &newest
		}
		out.Partitions = append(out.Partitions, v)
	}
	gps, err := o.store.GroupPartitions(ctx, c.ID)
	if err != nil {
		return nil, gateway.StoreError(err)
	}
	activity, err := o.store.GroupActivity(ctx, c.ID)
	if err != nil {
		return nil, gateway.StoreError(err)
	}
	out.Groups = gateway.GroupViews(gps, activity)
	if from != "" {
		dropGroupPartitions(out.Groups)
	}
	fitQueue(&out, o.AnswerBudget())
	return out, nil
}

// Status reports this gateway's health and figures.
func (o *Ops) Status(ctx context.Context) (any, *queengate.Error) {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	st := queengate.StatusAnswer{Version: o.version, StartedAt: o.started.UTC(), UptimeSeconds: time.Since(o.started).Seconds(),
		Postgres: "ok", NATS: "connected", Ingest: queengate.IngestStat{BufferedMessages: o.ing.Buffered()}}
	// Error texts are cut: the answer fits whatever max payload.
	log := gateway.StoreLog()
	if err := o.store.Ping(ctx); err != nil {
		st.Postgres = postgresProblem(log, "unreachable", err)
	} else if v, err := o.store.SchemaVersion(ctx); err != nil {
		st.Postgres = postgresProblem(log, "schema version unreadable", err)
	} else {
		st.SchemaVersion = v
		if v != o.wantSchema {
			st.Postgres = fmt.Sprintf("schema at version %d, want %d", v, o.wantSchema)
		}
	}
	if !o.nc.IsConnected() {
		st.NATS = strings.ToLower(o.nc.Status().String())
	}
	st.Ready = st.Postgres == "ok" && st.NATS == "connected"
	if o.durability != nil {
		st.Durability = o.durability()
	}
	if cs, ok := o.ing.CacheSummary(); ok {
		st.Cache = &queengate.CacheStat{BudgetBytes: cs.BudgetBytes, BudgetInForceBytes: cs.BudgetInForceBytes, ResidentBytes: cs.ResidentBytes, ResidentHashes: cs.ResidentHashes,
			Entries: cs.Entries, Suppressed: cs.Suppressed, Hydrations: cs.Hydrations, Births: cs.Births, Fills: cs.Fills, Gaps: cs.Gaps,
			Rebuilds: cs.Rebuilds, Evictions: cs.Evictions}
	}
	return st, nil
}

// postgresProblem says what is wrong with PostgreSQL in an answer: what
// failed and the class of the reason, never the driver's text (it names
// the server's address, port, user and database); that goes to the log.
func postgresProblem(log *zerolog.Logger, what string, err error) string {
	log.Warn().Err(err).Msg("PostgreSQL: " + what)
	return what + ": " + reasonClass(err)
}

// reasonClass names why a connection or query failed, in a few words.
func reasonClass(err error) string {
	var (
		netErr net.Error
		dnsErr *net.DNSError
		state  interface{ SQLState() string }
	)
	switch {
	case errors.Is(err, context.DeadlineExceeded), errors.As(err, &netErr) && netErr.Timeout():
		return "no answer in time"
	case errors.Is(err, syscall.ECONNREFUSED):
		return "connection refused"
	case errors.As(err, &dnsErr):
		return "host not found"
	case errors.As(err, &state):
		switch code := state.SQLState(); {
		case strings.HasPrefix(code, "28"):
			return "authentication refused"
		case code == "3D000":
			return "no such database"
		case strings.HasPrefix(code, "57P"):
			return "the server is shutting down or starting"
		case strings.HasPrefix(code, "53"):
			return "the server is out of resources (connections, memory, disk)"
		}
		return "the server refused (SQLSTATE " + state.SQLState() + ")"
	case errors.As(err, &netErr), errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		return "connection lost"
	}
	return "see the gateway's log"
}

// Endpoints serves the operator API over NATS request-reply.
func (o *Ops) Endpoints(g *gateway.Gateway) ([]gateway.Endpoint, error) {
	o.publish = g.PublishCommitted
	return o.Operations(g.Prefix(), g.Conn()), nil
}

// Operations are the operator API's entries, each with its NATS subject
// and its admin HTTP routes. Reads and explain name their queue in the
// subject, so NATS permissions can scope them to it: they go with the
// queue's data (pops hand out the same), not with the token
// (docs/security.md); on HTTP every route needs the token.
func (o *Ops) Operations(prefix string, _ *nats.Conn) []gateway.Endpoint {
	s := queengate.Subjects{Prefix: prefix}
	return gateway.WithSubjects(s, slices.Concat(o.queueOperations(s), o.queueDeleteOperations(), o.messageOperations(s)))
}

// queueOperations are configure and the views of queues and this gateway.
func (o *Ops) queueOperations(s queengate.Subjects) []gateway.Endpoint {
	return []gateway.Endpoint{
		{Name: "configure", API: queengate.APIConfigure, Admin: true, AnswerOnly: true, Op: func(ctx context.Context, req *gateway.Request) (any, *queengate.Error) {
			return o.Configure(ctx, req.Data)
		}, HTTP: []gateway.HTTPForm{{Route: queengate.APIConfigure.Route(), Op: func(r *http.Request, body []byte) (any, *queengate.Error) {
			return o.Configure(r.Context(), body)
		}}}},
		{Name: "queues-list", API: queengate.APIQueuesList, Admin: true, AnswerOnly: true, Op: func(ctx context.Context, req *gateway.Request) (any, *queengate.Error) {
			from, werr := decodeFrom(req.Data, queuesPageShape)
			if werr != nil {
				return nil, werr
			}
			return o.ListQueues(ctx, from)
		}, HTTP: []gateway.HTTPForm{{Route: queengate.APIQueuesList.Route(), Op: func(r *http.Request, _ []byte) (any, *queengate.Error) {
			from, werr := fromQuery(r.URL.Query(), "/queues")
			if werr != nil {
				return nil, werr
			}
			return o.ListQueues(r.Context(), from)
		}}}},
		{Name: "queues-get", API: queengate.APIQueuesGet, Admin: true, AnswerOnly: true, Op: func(ctx context.Context, req *gateway.Request) (any, *queengate.Error) {
			from, werr := decodeFrom(req.Data, queuePageShape)
			if werr != nil {
				return nil, werr
			}
			return o.GetQueue(ctx, req.Names[0], from)
		}, HTTP: []gateway.HTTPForm{{Route: queengate.APIQueuesGet.Route(), Op: func(r *http.Request, _ []byte) (any, *queengate.Error) {
			from, werr := fromQuery(r.URL.Query(), "/queues/<queue>")
			if werr != nil {
				return nil, werr
			}
			return o.GetQueue(r.Context(), r.PathValue("queue"), from)
		}}}},
		{Name: "status", API: queengate.APIStatus, Admin: true, AnswerOnly: true, Op: func(ctx context.Context, _ *gateway.Request) (any, *queengate.Error) {
			return o.Status(ctx)
		}, HTTP: []gateway.HTTPForm{{Route: queengate.APIStatus.Route(), Op: func(r *http.Request, _ []byte) (any, *queengate.Error) {
			return o.Status(r.Context())
		}}}},
		{Name: "overview", API: queengate.APIOverview, Admin: true, AnswerOnly: true, Op: func(ctx context.Context, req *gateway.Request) (any, *queengate.Error) {
			from, werr := decodeFrom(req.Data, overviewShape)
			if werr != nil {
				return nil, werr
			}
			return o.Overview(ctx, from)
		}, HTTP: []gateway.HTTPForm{{Route: queengate.APIOverview.Route(), Op: func(r *http.Request, _ []byte) (any, *queengate.Error) {
			from, werr := fromQuery(r.URL.Query(), "/overview")
			if werr != nil {
				return nil, werr
			}
			return o.Overview(r.Context(), from)
		}}}},
	}
}

// messageOperations are the reads of messages and dead letters.
func (o *Ops) messageOperations(s queengate.Subjects) []gateway.Endpoint {
	return []gateway.Endpoint{
		{Name: "read", API: queengate.APIRead, AnswerOnly: true, Op: func(ctx context.Context, req *gateway.Request) (any, *queengate.Error) {
			queue, partition := req.Names[0], req.Names[1]
			return o.Read(ctx, queue, partition, req.Data)
		}, HTTP: []gateway.HTTPForm{{Route: queengate.APIRead.Route(), Op: func(r *http.Request, _ []byte) (any, *queengate.Error) {
			return o.ReadQuery(r.Context(), r.PathValue("queue"), r.PathValue("partition"), r.URL.Query())
		}}}},
		// A messageId names no queue in the subject: NATS cannot scope it.
		{Name: "message-get", API: queengate.APIMessageGet, Admin: true, AnswerOnly: true, Op: func(ctx context.Context, req *gateway.Request) (any, *queengate.Error) {
			return o.GetMessage(ctx, req.Data)
		}, HTTP: []gateway.HTTPForm{gateway.PathForm(queengate.RouteTransaction, func(r *http.Request, _ []byte) (any, *queengate.Error) {
			return o.MessageByTxn(r.Context(), r.PathValue("queue"), r.PathValue("partition"), r.PathValue("transactionId"))
		}), gateway.PathForm(queengate.RouteMessage, func(r *http.Request, _ []byte) (any, *queengate.Error) {
			return o.MessageByID(r.Context(), r.PathValue("messageId"))
		})}},
		{Name: "explain", API: queengate.APIExplain, AnswerOnly: true, Op: func(ctx context.Context, req *gateway.Request) (any, *queengate.Error) {
			queue, partition := req.Names[0], req.Names[1]
			return o.Explain(ctx, queue, partition, req.Data)
		}, HTTP: []gateway.HTTPForm{{Route: queengate.APIExplain.Route(), Op: func(r *http.Request, _ []byte) (any, *queengate.Error) {
			return o.ExplainQuery(r.Context(), r.PathValue("queue"), r.PathValue("partition"), r.URL.Query())
		}}}},
		{Name: "dlq-list", API: queengate.APIDLQList, Admin: true, AnswerOnly: true, Op: func(ctx context.Context, req *gateway.Request) (any, *queengate.Error) {
			return o.ListDeadLetters(ctx, req.Names[0], req.Data)
		}, HTTP: []gateway.HTTPForm{{Route: queengate.APIDLQList.Route(), Op: func(r *http.Request, body []byte) (any, *queengate.Error) {
			return o.ListDeadLetters(r.Context(), r.PathValue("queue"), body)
		}}}},
		{Name: "dlq-redrive", API: queengate.APIDLQRedrive, Admin: true, Op: func(ctx context.Context, req *gateway.Request) (any, *queengate.Error) {
			return o.Redrive(ctx, req.Names[0], req.Data)
		}, HTTP: []gateway.HTTPForm{{Route: queengate.APIDLQRedrive.Route(), Op: func(r *http.Request, body []byte) (any, *queengate.Error) {
			return o.Redrive(r.Context(), r.PathValue("queue"), body)
		}}}},
	}
}
