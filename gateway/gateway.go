package gateway

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"

	queengate "github.com/queengate/queengate"
	"github.com/queengate/queengate/ingest"
	"github.com/queengate/queengate/internal/peers"
	"github.com/queengate/queengate/internal/promreg"
	"github.com/queengate/queengate/internal/wire"
	"github.com/queengate/queengate/model"
	"github.com/queengate/queengate/routing"
)

// ServiceName is the micro service name, and QueueGroup the queue group
// every gateway subscribes in, so that NATS spreads pushes across them.
const (
	ServiceName = "queengate"
	QueueGroup  = "queengate"
)

// MinMaxPayload is the smallest NATS max payload a gateway runs with:
// room for the answers of a known size, and for a message's data beside
// queengate.DeliveryReserve.
const MinMaxPayload = 2 * queengate.DeliveryReserve

// The defaults of Config's zero values (and queengate.DefaultPrefix and
// queengate.DefaultMaxBatch).
const (
	// DefaultVersion names a build that was not given a version.
	DefaultVersion      = "0.0.0-dev"
	DefaultReplyRetry   = 2 * time.Minute
	DefaultDrainTimeout = 10 * time.Second
)

// Config configures the NATS face. Zero values take the defaults.
type Config struct {
	// Prefix starts every subject; default queengate.DefaultPrefix.
	Prefix string
	// MaxBatch is the most messages one request may carry; default
	// queengate.DefaultMaxBatch.
	MaxBatch int
	// Version is reported by the micro service (semver); default
	// DefaultVersion.
	Version string
	// ReplyRetry bounds how long an answer waits for a lost NATS
	// connection to come back before it is given up; default
	// DefaultReplyRetry.
	ReplyRetry time.Duration
	// DrainTimeout bounds how long Stop waits for requests NATS already
	// delivered to be taken in; default DefaultDrainTimeout.
	DrainTimeout time.Duration
	// Endpoints are the request-reply endpoints served beside the push
	// endpoint, in this order: the operator API (*operator.Ops), the
	// timer subjects (*timers.Ops), the consuming subjects
	// (*consume.Consumers; give the ingester's OnCommit the gateway's
	// PublishCommitted so that waiting pops wake when messages arrive). A
	// set that is also an Authorizer (*operator.Ops) decides the operator
	// requests of every set.
	Endpoints []EndpointSet
	// Routing, when set, gives partitions affinity to gateways: pushes
	// mapped by NATS onto routing shards are taken by the shard's owner
	// (package routing). Nil: any gateway of the queue group takes any push.
	Routing *routing.Config
}

func (c Config) withDefaults() Config {
	if c.Prefix == "" {
		c.Prefix = queengate.DefaultPrefix
	}
	if c.MaxBatch <= 0 {
		c.MaxBatch = queengate.DefaultMaxBatch
	}
	if c.Version == "" {
		c.Version = DefaultVersion
	}
	if c.ReplyRetry <= 0 {
		c.ReplyRetry = DefaultReplyRetry
	}
	if c.DrainTimeout <= 0 {
		c.DrainTimeout = DefaultDrainTimeout
	}
	return c
}

// Ingester is what the gateway needs from ingest.
type Ingester interface {
	Submit(*ingest.Request) error
	Stop()
}

// Gateway serves the push subjects on a NATS connection.
type Gateway struct {
	cfg     Config
	nc      *nats.Conn
	ing     Ingester
	log     zerolog.Logger
	metrics *metrics
	// routingMetrics is nil without Config.Routing.
	routingMetrics *routing.Metrics

	mu  sync.Mutex
	svc *service
	// shardEndpoints are the endpoints beside the push's whose requests
	// NATS may map onto the routing shards (Endpoint.ShardVerb).
	shardEndpoints []routing.ShardEndpoint
	router         *routing.Router
	serving        bool           // between a completed Start and Stop
	inflight       sync.WaitGroup // operator and timer requests being answered
	stopping       bool           // under mu: no more requests join inflight
	stopOnce       sync.Once
	stopped        chan struct{}
	// draining is closed when Stop begins waiting for requests in
	// flight: long polls answer what they have instead of waiting on.
	draining chan struct{}
	// auth decides operator requests; nil: they need no token.
	auth Authorizer
}

// An EndpointSet is a group of request-reply endpoints a gateway serves
// (Config.Endpoints). Start calls Endpoints once, before the service
// starts: the set may subscribe there what else it listens to on the
// gateway's connection.
type EndpointSet interface {
	Endpoints(g *Gateway) ([]Endpoint, error)
}

// A MetricsSet is an EndpointSet with metrics of its own: New registers
// them on the gateway's registry (nil: none is registered).
type MetricsSet interface {
	RegisterMetrics(reg prometheus.Registerer) error
}

// An Authorizer decides whether an Authorization header value may make
// operator requests: nil if so, else the error to answer.
type Authorizer interface {
	Authorize(header string) *queengate.Error
}

// New builds a gateway. reg may be nil: then no metrics are registered.
func New(cfg Config, nc *nats.Conn, ing Ingester, log zerolog.Logger, reg prometheus.Registerer) (*Gateway, error) {
	cfg = cfg.withDefaults()
	if err := queengate.ValidPrefix(cfg.Prefix); err != nil {
		return nil, fmt.Errorf("gateway: %w", err)
	}
	m, err := newMetrics(reg)
	if err != nil {
		return nil, err
	}
	g := &Gateway{cfg: cfg, nc: nc, ing: ing, log: log, metrics: m, stopped: make(chan struct{}), draining: make(chan struct{})}
	storeLog.Store(&g.log)
	for _, set := range cfg.Endpoints {
		if m, ok := set.(MetricsSet); ok {
			if err := m.RegisterMetrics(reg); err != nil {
				return nil, err
			}
		}
		if a, ok := set.(Authorizer); ok && g.auth == nil {
			g.auth = a
		}
	}
	if cfg.Routing != nil {
		if err := cfg.Routing.Validate(); err != nil {
			return nil, err
		}
		if g.routingMetrics, err = routing.NewMetrics(reg); err != nil {
			return nil, err
		}
	}
	return g, nil
}

// Start subscribes the push endpoint, the operator and timer endpoints,
// and the service discovery subjects, and with routing takes this
// gateway's shards; ctx bounds that start. Stop ends the gateway: it is a
// sequence (hand the shards over, answer what it accepted, drain), not a
// cancel.
func (g *Gateway) Start(ctx context.Context) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	if mp := g.nc.MaxPayload(); mp > 0 && mp < MinMaxPayload {
		return fmt.Errorf("gateway: the NATS server's max payload is %d bytes: at least %d are needed to deliver a message with its fields", mp, MinMaxPayload)
	}
	subjects := queengate.Subjects{Prefix: g.cfg.Prefix}
	svc := newService(g.nc, ServiceName, g.cfg.Version,
		"exactly-once ingestion gateway: push to "+queengate.APIPush.Template(g.cfg.Prefix), g.log)
	svc.observer = g.metrics.requestObserver
	push := svc.addEndpoint("push", subjects.Under(queengate.APIPush), QueueGroup, g.handlePush)
	// The bare verb too, so that it is answered 400 (parsePushSubject)
	// rather than "no responders".
	for _, subject := range []string{push.subject, subjects.Verb(queengate.APIPush)} {
		if err := push.subscribe(subject); err != nil {
			return err
		}
	}
	// The misshapen forms too, answered 400 in JetStream's shape rather
	// than "no responders", which a JetStream client reads as JetStream
	// not enabled.
	jsVerb := subjects.Verb(queengate.APIJetStream)
	js := svc.addEndpoint("jetstream", subjects.Wildcard(queengate.APIJetStream), QueueGroup, g.handleJetStream)
	for _, subject := range []string{js.subject, jsVerb, jsVerb + ".*", jsVerb + ".*.*.>"} {
		if err := js.subscribe(subject); err != nil {
			return err
		}
	}
	if g.cfg.Routing == nil {
		// Without routing, every shard too: pushes are served whether or
		// not NATS maps them.
		for _, sub := range []struct {
			e    *endpoint
			verb queengate.API
		}{{push, peers.Shard}, {js, peers.JetStreamShard}} {
			if err := sub.e.subscribe(subjects.Under(sub.verb)); err != nil {
				return err
			}
		}
	}
	g.svc = svc
	for _, set := range g.cfg.Endpoints {
		endpoints, err := set.Endpoints(g)
		if err == nil {
			err = g.addRequestEndpoints(endpoints)
		}
		if err != nil {
			svc.stop(0)
			return err
		}
	}
	if err := svc.start(); err != nil {
		svc.stop(0)
		return err
	}
	// The subscriptions are live once the server has processed them: a
	// request sent right after Start must find a responder.
	if err := g.nc.Flush(); err != nil {
		return fmt.Errorf("gateway: flush subscriptions: %w", err)
	}
	if g.cfg.Routing != nil {
		endpoints := append([]routing.ShardEndpoint{{Verb: subjects.Verb(peers.Shard), Subscriber: shardSubscriber{push}},
			{Verb: subjects.Verb(peers.JetStreamShard), Subscriber: shardSubscriber{js}}},
			g.shardEndpoints...)
		r := routing.New(*g.cfg.Routing, g.nc, svc.id, g.cfg.Prefix, endpoints, g.log, g.routingMetrics)
		if err := r.Start(ctx); err != nil {
			svc.stop(0)
			return err
		}
		g.router = r
	}
	g.serving = true
	return nil
}

// Serving is nil while the gateway takes pushes, else why not: for
// /readyz (operator.Admin.AddReadiness).
func (g *Gateway) Serving() error {
	g.mu.Lock()
	defer g.mu.Unlock()
	switch {
	case g.serving:
		return nil
	case g.svc == nil:
		return errors.New("starting")
	}
	return errors.New("stopping")
}

// Stop ends the gateway in this order: it hands its routing shards over
// (serving them meanwhile). When another gateway took them, it drains its
// subscriptions at once: what still reaches it was sent before the
// handover, and is served, while NATS routes everything after to the
// others. Otherwise, its subscriptions kept, it answers every request
// that still reaches it 503 shutting down while it flushes and answers
// everything it accepted, and only then drains (NATS answers no
// responders from then on). Either way it answers everything accepted,
// waits for operator and timer requests in progress, and flushes the
// connection, so that every answer has left before it closes. It is safe
// to call twice.
func (g *Gateway) Stop() {
	g.stopOnce.Do(func() {
		g.mu.Lock()
		svc, r := g.svc, g.router
		g.serving = false
		g.mu.Unlock()
		handedOver := false
		if r != nil {
			// Hand the shards over before anything is refused, so that no
			// shard is left without a subscriber that serves it.
			handedOver = r.Leave(g.cfg.DrainTimeout)
			r.Close()
		}
		if handedOver && svc != nil {
			svc.stop(g.cfg.DrainTimeout)
		}
		// From here on a request is refused 503 (ingest refuses pushes
		// once stopping) rather than left to time out.
		g.mu.Lock()
		g.stopping = true
		g.mu.Unlock()
		close(g.draining)
		g.ing.Stop()
		// Operator and timer requests already taken are answered too (a
		// schedule or cancel that committed must not lose its answer).
		answered := make(chan struct{})
		go func() { g.inflight.Wait(); close(answered) }()
		select {
		case <-answered:
		case <-time.After(g.cfg.DrainTimeout):
			g.log.Warn().Msg("operator or timer requests still running at shutdown")
		}
		if !handedOver && svc != nil {
			// What NATS delivered before the unsubscribe is refused 503
			// too, by the handlers the drain runs.
			svc.stop(g.cfg.DrainTimeout)
		}
		if err := g.nc.FlushTimeout(g.cfg.DrainTimeout); err != nil && !errors.Is(err, nats.ErrConnectionClosed) {
			g.log.Warn().Err(err).Msg("flush answers")
		}
		close(g.stopped)
	})
}

// Prefix starts every subject the gateway serves.
func (g *Gateway) Prefix() string { return g.cfg.Prefix }

// Conn is the gateway's NATS connection, for what an endpoint set
// listens to or announces beside its endpoints.
func (g *Gateway) Conn() *nats.Conn { return g.nc }

// MaxPayload is the NATS connection's max payload: no answer may be
// larger.
func (g *Gateway) MaxPayload() int64 { return g.nc.MaxPayload() }

// Logger is the gateway's logger.
func (g *Gateway) Logger() zerolog.Logger { return g.log }

// Ingester is what the gateway hands pushes to.
func (g *Gateway) Ingester() Ingester { return g.ing }

// Draining is closed when Stop begins waiting for requests in flight:
// a long poll answers what it has instead of waiting on.
func (g *Gateway) Draining() <-chan struct{} { return g.draining }

// Stopped is closed once Stop has answered everything.
func (g *Gateway) Stopped() <-chan struct{} { return g.stopped }

// ID is this gateway's instance id: its micro service id, and its name
// among the gateways sharing routing shards. Empty before Start.
func (g *Gateway) ID() string {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.svc == nil {
		return ""
	}
	return g.svc.id
}

// handlePush runs on the subscription's goroutine: decode, validate and
// hand over without blocking; the answer is sent when ingest is done.
func (g *Gateway) handlePush(req *Request) {
	queue, partition, probe, werr := parsePushSubject(g.cfg.Prefix, req.Subject)
	if probe {
		return // the routing probe: it only looks where NATS delivers
	}
	if werr != nil {
		g.reject(req, "", werr)
		return
	}
	// Named only when it is used: a request with a reply subject is
	// answered there.
	var ackSubject string
	if req.Reply == "" {
		ackSubject = queengate.Subjects{Prefix: g.cfg.Prefix}.PushAnswer(queue, partition)
	}
	msgs, werr := wire.DecodePush(req.Data, g.cfg.MaxBatch)
	if werr == nil {
		werr = wire.WithNATSHeaders(msgs, req.Header)
	}
	if werr != nil {
		g.reject(req, ackSubject, werr)
		return
	}
	maxPayload := g.nc.MaxPayload()
	if werr := wire.CheckPushSizes(msgs, maxPayload); werr != nil {
		g.reject(req, ackSubject, werr)
		return
	}
	subject := req.Reply
	if subject == "" {
		subject = ackSubject
	}
	r := &ingest.Request{Queue: queue, Partition: partition, Messages: msgs}
	r.Done = func(results []model.PushOutcome) {
		// Not replaced by an error when too large, as other answers are:
		// an error says nothing was stored. A producer that hears nothing
		// retries, and is answered duplicate.
		g.answerPush(req, subject, results, func(b []byte) []byte { return wire.AppendReply(b, msgs, results, int(maxPayload)) })
	}
	if err := g.ing.Submit(r); err != nil {
		g.reject(req, ackSubject, submitError(err))
		return
	}
	g.metrics.requests.Inc()
}

// submitError is the answer to a push ingest refused.
func submitError(err error) *queengate.Error {
	switch {
	case errors.Is(err, ingest.ErrOverloaded):
		return &queengate.Error{Code: queengate.CodeUnavailable, Text: "overloaded: retry later"}
	case errors.Is(err, ingest.ErrStoreDown):
		return &queengate.Error{Code: queengate.CodeUnavailable, Text: "not stored: PostgreSQL unreachable from this gateway: retry (another gateway may serve it)"}
	case errors.Is(err, ingest.ErrStopped), errors.Is(err, ingest.ErrNotStarted):
		return &queengate.Error{Code: queengate.CodeUnavailable, Text: "shutting down: retry on another gateway"}
	}
	return &queengate.Error{Code: queengate.CodeInternal, Text: err.Error()}
}

// answerPush publishes the answer build writes (into a pooled buffer) to
// a push or a JetStream publish on subject, and records the request's
// outcome.
func (g *Gateway) answerPush(req *Request, subject string, results []model.PushOutcome, build func([]byte) []byte) {
	buf := answerBuffers.Get().(*[]byte)
	body := build((*buf)[:0])
	err := g.publish(&nats.Msg{Subject: subject, Data: body})
	if cap(body) <= maxPooledAnswer { // nats.go has copied it, sent or not
		*buf = body[:0]
		answerBuffers.Put(buf)
	}
	if err != nil {
		req.done(notSent(err))
		return
	}
	req.done(pushOutcome(results))
}

// answerBuffers keeps push answers' buffers for the next answers:
// nats.go copies what it publishes before PublishMsg returns.
var answerBuffers = sync.Pool{New: func() any { return new([]byte) }}

// maxPooledAnswer is the largest answer buffer kept: a rare answer to a
// large push leaves its buffer to the collector.
const maxPooledAnswer = 64 << 10

// pushOutcome is a push's outcome by its messages': a push with a failed
// message counts as an error in the service's figures, with the first
// failure's error; refused when every failure is a payload conflict
// (the producer's to fix), failed otherwise.
func pushOutcome(results []model.PushOutcome) outcome {
	var o outcome
	for _, r := range results {
		if r.Status != model.StatusFailed {
			continue
		}
		if o.errMsg == "" {
			o.errMsg = "not stored"
			if r.Err != nil {
				o.errMsg = r.Err.Error()
			}
		}
		if !errors.Is(r.Err, model.ErrPayloadConflict) {
			o.failed = true
		}
	}
	return o
}

// reject answers a request refused as a whole, with the micro error
// headers. A fire-and-forget request gets it on its ack subject when the
// subject named a valid partition.
func (g *Gateway) reject(req *Request, ackSubject string, werr *queengate.Error) {
	g.metrics.rejected(werr.Code)
	defer req.done(answeredWith(werr))
	subject := req.Reply
	if subject == "" {
		subject = ackSubject
	}
	if subject == "" {
		g.log.Warn().Str("subject", req.Subject).Str("error", werr.Text).Msg("fire-and-forget push rejected with no ack subject to answer on")
		return
	}
	g.publish(wire.ErrorMsg(werr, subject))
}

// publish sends an answer, and says why not when it could not. While
// NATS reconnects, nats.go buffers publishes; if that buffer is full the
// answer waits for the connection to come back (up to ReplyRetry) rather
// than being dropped. Anything else is final, and waiting would only
// hold the request (and a shutdown) up: an answer over the max payload,
// a bad subject, a closed connection. An answer given up is logged and
// counted once, by reason.
func (g *Gateway) publish(m *nats.Msg) error {
	deadline := time.Now().Add(g.cfg.ReplyRetry)
	for {
		err := g.nc.PublishMsg(m)
		if err == nil {
			return nil
		}
		if errors.Is(err, nats.ErrReconnectBufExceeded) && time.Now().Before(deadline) {
			time.Sleep(20 * time.Millisecond)
			continue
		}
		reason := unsentReason(err)
		g.metrics.lostAnswers.WithLabelValues(reason).Inc()
		g.log.Error().Err(err).Str("subject", m.Subject).Int("bytes", len(m.Data)).Int64("max_payload", g.nc.MaxPayload()).
			Str("reason", reason).Msg("answer not sent")
		return err
	}
}

// publishAnswer publishes an answer's body on subject. When NATS refuses
// it as too large (answers are built to fit: a bug), a 500 saying so goes
// in its place, so that the requester is not left waiting; the error is
// returned all the same.
func (g *Gateway) publishAnswer(subject string, body []byte) error {
	err := g.publish(&nats.Msg{Subject: subject, Data: body})
	if errors.Is(err, nats.ErrMaxPayload) {
		g.publish(wire.ErrorMsg(&queengate.Error{Code: queengate.CodeInternal, Text: fmt.Sprintf(
			"answer not sent: %d bytes, over the NATS max payload (%d bytes)", len(body), g.nc.MaxPayload())}, subject))
	}
	return err
}

// unsentReason is the reason label of an answer publish gave up on.
func unsentReason(err error) string {
	switch {
	case errors.Is(err, nats.ErrMaxPayload):
		return "too_large"
	case errors.Is(err, nats.ErrBadSubject):
		return "bad_subject"
	case errors.Is(err, nats.ErrConnectionClosed), errors.Is(err, nats.ErrConnectionDraining):
		return "closed"
	case errors.Is(err, nats.ErrReconnectBufExceeded):
		return "timeout" // still reconnecting after ReplyRetry
	}
	return "refused"
}

// notSent is the error a request whose answer was never published is
// recorded with.
func notSent(err error) outcome { return failedWith("answer not sent: " + err.Error()) }

// Undoable is an answer that changed something for its receiver alone (a
// pop leases and delivers messages): when it is never published, undo
// takes the change back, so that an answer nobody received costs nothing.
type Undoable interface {
	Undo()
}

type metrics struct {
	requests    prometheus.Counter
	rejects     *prometheus.CounterVec
	lostAnswers *prometheus.CounterVec
	duration    *prometheus.HistogramVec
}

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	m := &metrics{
		requests: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "queengate_requests_accepted_total",
			Help: "Push requests accepted for ingestion.",
		}),
		rejects: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "queengate_requests_rejected_total",
			Help: "Push requests rejected as a whole, by wire error code.",
		}, []string{"code"}),
		lostAnswers: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "queengate_answers_unsent_total",
			Help: "Answers that could not be published, by reason: too_large (over the NATS max payload), bad_subject, closed (the connection), timeout (NATS away past the retry bound), refused (anything else).",
		}, []string{"reason"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "queengate_request_duration_seconds",
			Help: "Time from a request's receipt to its answer's publish, by endpoint (push: through the commit) and result: ok; refused (answered with a 4xx, or a push with a message failed for a payload conflict: the requester's to fix); error (a 5xx, an answer not sent, or a push with a message not stored: the gateway's).",
			// 250 µs to ~65 s.
			Buckets: prometheus.ExponentialBuckets(0.00025, 2, 19),
		}, []string{"endpoint", "result"}),
	}
	if err := promreg.RegisterAll(reg, m.requests, m.rejects, m.lostAnswers, m.duration); err != nil {
		return nil, err
	}
	return m, nil
}

func (m *metrics) requestObserver(endpoint, result string) prometheus.Observer {
	return m.duration.WithLabelValues(endpoint, result)
}

func (m *metrics) rejected(code int) { m.rejects.WithLabelValues(strconv.Itoa(code)).Inc() }

// MaxOperatorBody bounds the body of every operation of the admin API
// (those with an HTTP form, and the operator requests), on NATS as on
// HTTP: docs/admin-api.md promises one limit on both transports.
const MaxOperatorBody = 64 << 10

// BodyTooLarge is the answer to a body over MaxOperatorBody, the same on
// both transports.
func BodyTooLarge() *queengate.Error {
	return &queengate.Error{Code: queengate.CodeTooLarge, Text: fmt.Sprintf("body over %d bytes", MaxOperatorBody)}
}

// WithSubjects gives each endpoint serving an API (Endpoint.API) its
// Verb under s's prefix.
func WithSubjects(s queengate.Subjects, endpoints []Endpoint) []Endpoint {
	for i, e := range endpoints {
		if e.API.Verb != "" {
			endpoints[i].Verb = s.Verb(e.API)
		}
	}
	return endpoints
}

// Endpoint is a request-reply operation served by the gateway on Verb
// followed by one token per name of its API; an EndpointSet gives them.
type Endpoint struct {
	Name string // the micro service's endpoint name, e.g. "read"
	// API is the subject of the wire contract served (subjects.go), its
	// Names the tokens after Verb: WithSubjects makes Verb of it, so
	// that a subject is spelt once, there.
	API  queengate.API
	Verb string // e.g. "queen.read"
	// AnyTokens: one or more tokens after Verb, which Op checks (a pop
	// names <queue> or <queue>.<partition>).
	AnyTokens bool
	// ShardVerb, when set, is where NATS may map the endpoint's requests
	// onto the routing shards (routing.PopMappings), as <ShardVerb>.<k>.
	// <queue>.<partition>: the gateway subscribes the shards it serves,
	// every shard without routing, and hands Op the subject as sent.
	ShardVerb string
	// Admin: the request spans queues (NATS permissions cannot scope it
	// to one), so with an admin token set it needs the token. The others
	// are governed by NATS permissions on their subjects
	// (docs/security.md); the Authorizer among Config.Endpoints decides.
	Admin bool
	// AnswerOnly: the request is for its answer (a read, a pop), so it is
	// not carried out without a reply subject. Others (an ack, a
	// schedule) are, as a push is.
	AnswerOnly bool
	// MisshapenOnly, when not nil, replaces the subjects misshapen would
	// answer, where those would overlap another endpoint's (timers).
	MisshapenOnly []string
	// Op carries the request out, off the subscription's goroutine, within
	// 30 s; the gateway answers what it returns (an Undoable answer not
	// published is undone).
	Op func(context.Context, *Request) (any, *queengate.Error)
	// HTTP are the operation's admin HTTP routes, if it has any (a
	// message get has two: by id, and by transaction id).
	HTTP []HTTPForm
}

// subject is the endpoint's subject, as NATS matches it.
func (e Endpoint) subject() string {
	if e.AnyTokens {
		return e.Verb + ".>"
	}
	return e.Verb + strings.Repeat(".*", len(e.API.Names))
}

// misshapen are the subjects under the endpoint's verb with too few or
// too many tokens. They share no subject with a well-formed one (both are
// in one queue group, where NATS hands a request to one subscription),
// and are answered 400 rather than left to "no responders", which a
// client takes for a gateway out of reach.
func (e Endpoint) misshapen() []string {
	if e.MisshapenOnly != nil {
		return e.MisshapenOnly
	}
	if e.AnyTokens {
		return []string{e.Verb}
	}
	var out []string
	for n := range len(e.API.Names) {
		out = append(out, e.Verb+strings.Repeat(".*", n))
	}
	return append(out, e.subject()+".>")
}

// Bounded says whether the endpoint's body is held to MaxOperatorBody:
// an operation of the admin API, which takes the same body on HTTP. A
// push, a pop, an ack or a timer is bounded by the NATS max payload
// alone (docs/protocol.md).
func (e Endpoint) Bounded() bool { return e.Admin || len(e.HTTP) > 0 }

// form is the endpoint's subject as documented, for a 400.
func (e Endpoint) form() string {
	return strings.Join(append([]string{e.Verb}, e.API.Names...), ".")
}

// unshard is subject as its requester sent it when NATS mapped it onto a
// routing shard (<ShardVerb>.<k>.<names> was <Verb>.<names>), else
// subject: Op and the checks see one form.
func (e Endpoint) unshard(subject string) string {
	if names, mapped := shardNames(subject, e.ShardVerb); e.ShardVerb != "" && mapped {
		return e.Verb + "." + names
	}
	return subject
}

// wellShaped says whether subject has the endpoint's number of tokens.
func (e Endpoint) wellShaped(subject string) bool {
	if e.AnyTokens {
		return len(subject) > len(e.Verb)
	}
	return strings.Count(subject, ".") == strings.Count(e.Verb, ".")+len(e.API.Names)
}

func (g *Gateway) addRequestEndpoints(endpoints []Endpoint) error {
	for _, e := range endpoints {
		handler := func(req *Request) {
			// Counted under mu, so that Stop's wait never races an Add: a
			// request arriving once Stop has begun waiting is refused.
			g.mu.Lock()
			if g.stopping {
				g.mu.Unlock()
				g.answer(req, nil, &queengate.Error{Code: queengate.CodeUnavailable, Text: "shutting down: retry on another gateway"})
				return
			}
			g.inflight.Add(1)
			g.mu.Unlock()
			// Off the subscription's goroutine: these read PostgreSQL.
			go g.serveRequest(req, e)
		}
		ep := g.svc.addEndpoint(e.Name, e.subject(), QueueGroup, handler)
		for _, subject := range append([]string{e.subject()}, e.misshapen()...) {
			if err := ep.subscribe(subject); err != nil {
				return err
			}
		}
		if e.ShardVerb == "" {
			continue
		}
		if g.cfg.Routing == nil { // every shard, as the push endpoint
			if err := ep.subscribe(e.ShardVerb + ".>"); err != nil {
				return err
			}
			continue
		}
		g.shardEndpoints = append(g.shardEndpoints, routing.ShardEndpoint{Verb: e.ShardVerb, Subscriber: shardSubscriber{ep}})
	}
	return nil
}

// serveRequest answers a request-reply operation; operator ones need the
// admin token.
func (g *Gateway) serveRequest(req *Request, e Endpoint) {
	defer g.inflight.Done()
	req.Subject = e.unshard(req.Subject)
	if !e.wellShaped(req.Subject) {
		g.answer(req, nil, wire.BadInput("subject %s: want %s", wire.Clip(req.Subject), e.form()))
		return
	}
	if names, ok := strings.CutPrefix(req.Subject, e.Verb+"."); ok {
		req.Names = strings.Split(names, ".")
	}
	if req.Reply == "" && e.AnswerOnly {
		// A read or a pop with nobody to receive the answer: refused, the
		// requester's doing.
		req.done(outcome{errMsg: "no reply subject: nothing to answer"})
		return
	}
	var werr *queengate.Error
	if e.Admin && g.auth != nil {
		werr = g.auth.Authorize(req.Header.Get("Authorization"))
	}
	var v any
	if werr == nil {
		if e.Bounded() && len(req.Data) > MaxOperatorBody {
			werr = BodyTooLarge()
		} else {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			v, werr = e.Op(ctx, req)
			cancel()
		}
	}
	g.answer(req, v, werr)
}

// answer publishes a request-reply operation's answer, or its error with
// the micro error headers, and records it. A schedule or cancel published
// without a reply subject is still carried out; its answer has nowhere to
// go.
func (g *Gateway) answer(req *Request, v any, werr *queengate.Error) {
	if werr != nil && werr.Code >= 500 {
		g.log.Warn().Str("subject", req.Subject).Str("error", werr.Text).Msg("request failed")
	}
	if req.Reply == "" {
		if werr != nil {
			g.log.Warn().Str("subject", req.Subject).Str("error", werr.Text).Msg("request without a reply subject refused")
			req.done(answeredWith(werr))
			return
		}
		req.done(answeredOK)
		return
	}
	if werr != nil {
		g.publish(wire.ErrorMsg(werr, req.Reply))
		req.done(answeredWith(werr))
		return
	}
	body, err := wire.EncodeAnswer(v)
	if err != nil {
		g.log.Error().Err(err).Msg("encode answer")
		werr = &queengate.Error{Code: queengate.CodeInternal, Text: "encode answer: " + err.Error()}
		g.publish(wire.ErrorMsg(werr, req.Reply))
		req.done(answeredWith(werr))
		return
	}
	if err := g.publishAnswer(req.Reply, body); err != nil {
		if u, ok := v.(Undoable); ok {
			u.Undo()
		}
		req.done(notSent(err))
		return
	}
	req.done(answeredOK)
}

// PublishCommitted announces to every gateway that queues have new
// messages (or a lease ended early: a pop may find something now); give
// it to the ingester's OnCommit.
func (g *Gateway) PublishCommitted(queues []string) {
	for _, q := range queues {
		_ = g.nc.Publish(peers.Subject(g.cfg.Prefix, peers.Committed, q), nil) // best effort: a list known empty is popped again within revalidate
	}
}
