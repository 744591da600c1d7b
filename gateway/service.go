package gateway

import (
	"encoding/json"
	"fmt"
	"maps"
	"strconv"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/micro"
	"github.com/nats-io/nuid"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"

	queengate "github.com/queengate/queengate"
)

// service is the gateway's NATS service: its endpoints' subscriptions and
// the micro discovery protocol ($SRV.PING, $SRV.INFO, $SRV.STATS), which
// it answers itself with micro's own types, so `nats micro ls|info|stats`
// work as with any micro service. micro's endpoint wrapper stops its clock
// when the handler returns and counts only errors answered from inside
// it; the gateway answers later (after the commit), so it keeps its own
// figures: every endpoint's errors, and processing time until the answer
// is published.
type service struct {
	nc          *nats.Conn
	log         zerolog.Logger
	id          string
	name        string
	version     string
	description string
	started     time.Time

	// observer, when set, gives the observer of an endpoint's answered
	// requests of a result (ok, refused or error), told each one's time
	// from receipt to the answer's publish. Each endpoint asks once per
	// result: a push or publish is answered too often to look its
	// series up every time.
	observer func(endpoint, result string) prometheus.Observer

	mu        sync.Mutex
	endpoints []*endpoint
	verbSubs  []*nats.Subscription
}

// endpoint is one named operation: one or more subscriptions (a push
// endpoint may subscribe several subjects) sharing its figures.
type endpoint struct {
	svc      *service
	name     string
	subject  string // as reported by INFO and STATS
	queue    string
	metadata map[string]string
	handler  func(*Request)

	subs map[string]*nats.Subscription // by subject; under svc.mu

	// Figures, under svc.mu.
	requests, errors int
	lastError        string
	processing       time.Duration
	observers        [3]prometheus.Observer // by outcome.kind, once asked
}

// Request is one received message (its Subject, Data, Reply and Header)
// and when it arrived; answering it records the endpoint's figures.
type Request struct {
	*nats.Msg
	// Names are the subject's tokens after the endpoint's verb (its
	// queue, partition, group…), set before Op is called: no endpoint
	// parses its subject by hand.
	Names    []string
	ep       *endpoint
	received time.Time
}

func newService(nc *nats.Conn, name, version, description string, log zerolog.Logger) *service {
	return &service{nc: nc, log: log, id: nuid.Next(), name: name, version: version, description: description,
		started: time.Now().UTC()}
}

// addEndpoint registers an endpoint; it has no subscription until
// subscribe is called.
func (s *service) addEndpoint(name, subject, queue string, handler func(*Request)) *endpoint {
	e := &endpoint{svc: s, name: name, subject: subject, queue: queue, handler: handler,
		metadata: map[string]string{"format": "application/json"}, subs: map[string]*nats.Subscription{}}
	s.mu.Lock()
	s.endpoints = append(s.endpoints, e)
	s.mu.Unlock()
	return e
}

// subscribe adds a subscription on subject to the endpoint, in its queue
// group. Pending limits leave room for bursts far beyond what ingest
// buffers (NATS drops messages for a slow consumer), so that ingest's 503
// is what pushes back.
func (e *endpoint) subscribe(subject string) error {
	e.svc.mu.Lock()
	defer e.svc.mu.Unlock()
	if _, ok := e.subs[subject]; ok {
		return nil
	}
	sub, err := e.svc.nc.QueueSubscribe(subject, e.queue, func(m *nats.Msg) {
		e.handler(&Request{Msg: m, ep: e, received: time.Now()})
	})
	if err != nil {
		return fmt.Errorf("gateway: subscribe %s: %w", subject, err)
	}
	if err := sub.SetPendingLimits(1<<20, 1<<30); err != nil {
		_ = sub.Unsubscribe()
		return fmt.Errorf("gateway: subscribe %s: %w", subject, err)
	}
	e.subs[subject] = sub
	return nil
}

// unsubscribe drains the endpoint's subscription on subject: messages
// already delivered are still handled.
func (e *endpoint) unsubscribe(subject string) {
	e.svc.mu.Lock()
	sub := e.subs[subject]
	delete(e.subs, subject)
	e.svc.mu.Unlock()
	if sub != nil {
		if err := sub.Drain(); err != nil {
			e.svc.log.Warn().Err(err).Str("subject", subject).Msg("drain subscription")
		}
	}
}

// outcome is how a request was answered, as the figures count it.
type outcome struct {
	errMsg string // "" when answered without an error
	failed bool   // the gateway failed (a 5xx, an answer not sent), rather than refused the request
}

// answeredOK is the outcome of a request answered without an error.
var answeredOK = outcome{}

// answeredWith is the outcome of a request answered with werr: refused
// when it is a 4xx (the requester's to fix), failed when a 5xx.
func answeredWith(werr *queengate.Error) outcome {
	return outcome{errMsg: werr.Text, failed: werr.Code >= 500}
}

// failedWith is the outcome of a request the gateway failed, for why.
func failedWith(why string) outcome { return outcome{errMsg: why, failed: true} }

// results are the outcomes' labels in queengate_request_duration_seconds,
// by outcome.kind: ok, refused (answered with a 4xx) or error. Only error
// is the gateway's to mend, so it alone is worth an alert.
var results = [3]string{"ok", "refused", "error"}

// kind is the outcome's index in results.
func (o outcome) kind() int {
	switch {
	case o.errMsg == "":
		return 0
	case o.failed:
		return 2
	}
	return 1
}

// result is the outcome's label (results).
func (o outcome) result() string { return results[o.kind()] }

// done records an answered request: its time from receipt to the answer's
// publish, and its outcome. micro's num_errors counts every request
// answered with an error, refused or failed, as micro itself does.
func (r *Request) done(o outcome) {
	took := time.Since(r.received)
	s, k := r.ep.svc, o.kind()
	s.mu.Lock()
	r.ep.requests++
	r.ep.processing += took
	if o.errMsg != "" {
		r.ep.errors++
		r.ep.lastError = o.errMsg
	}
	obs := r.ep.observers[k]
	if obs == nil && s.observer != nil {
		obs = s.observer(r.ep.name, results[k])
		r.ep.observers[k] = obs
	}
	s.mu.Unlock()
	if obs != nil {
		obs.Observe(took.Seconds())
	}
}

// start subscribes the discovery subjects, for every service, for this
// service's name, and for this instance.
func (s *service) start() error {
	for _, verb := range []micro.Verb{micro.PingVerb, micro.InfoVerb, micro.StatsVerb} {
		for _, subj := range []struct{ name, id string }{{"", ""}, {s.name, ""}, {s.name, s.id}} {
			subject, err := micro.ControlSubject(verb, subj.name, subj.id)
			if err != nil {
				return err
			}
			sub, err := s.nc.Subscribe(subject, func(m *nats.Msg) { s.answerVerb(verb, m) })
			if err != nil {
				return fmt.Errorf("gateway: subscribe %s: %w", subject, err)
			}
			s.mu.Lock()
			s.verbSubs = append(s.verbSubs, sub)
			s.mu.Unlock()
		}
	}
	return nil
}

func (s *service) answerVerb(verb micro.Verb, m *nats.Msg) {
	if m.Reply == "" {
		return
	}
	var v any
	switch verb {
	case micro.PingVerb:
		v = micro.Ping{ServiceIdentity: s.identity(), Type: micro.PingResponseType}
	case micro.InfoVerb:
		v = s.info()
	case micro.StatsVerb:
		v = s.stats()
	}
	body, err := json.Marshal(v)
	if err != nil {
		s.log.Error().Err(err).Msg("encode discovery answer")
		return
	}
	if err := m.Respond(body); err != nil {
		s.log.Warn().Err(err).Msg("answer discovery request")
	}
}

func (s *service) identity() micro.ServiceIdentity {
	return micro.ServiceIdentity{Name: s.name, ID: s.id, Version: s.version, Metadata: map[string]string{}}
}

func (s *service) info() micro.Info {
	s.mu.Lock()
	defer s.mu.Unlock()
	info := micro.Info{ServiceIdentity: s.identity(), Type: micro.InfoResponseType, Description: s.description,
		Endpoints: make([]micro.EndpointInfo, 0, len(s.endpoints))}
	for _, e := range s.endpoints {
		info.Endpoints = append(info.Endpoints, micro.EndpointInfo{Name: e.name, Subject: e.subject,
			QueueGroup: e.queue, Metadata: e.infoMetadata()})
	}
	return info
}

// infoMetadata is the endpoint's metadata, with the subjects it is
// subscribed to when that is not just its reported subject. Under svc.mu.
func (e *endpoint) infoMetadata() map[string]string {
	md := maps.Clone(e.metadata)
	if len(e.subs) > 1 || len(e.subs) == 1 && e.subs[e.subject] == nil {
		md["subscriptions"] = strconv.Itoa(len(e.subs))
	}
	return md
}

func (s *service) stats() micro.Stats {
	s.mu.Lock()
	defer s.mu.Unlock()
	st := micro.Stats{ServiceIdentity: s.identity(), Type: micro.StatsResponseType, Started: s.started,
		Endpoints: make([]*micro.EndpointStats, 0, len(s.endpoints))}
	for _, e := range s.endpoints {
		es := &micro.EndpointStats{Name: e.name, Subject: e.subject, QueueGroup: e.queue,
			NumRequests: e.requests, NumErrors: e.errors, LastError: e.lastError, ProcessingTime: e.processing}
		if e.requests > 0 {
			es.AverageProcessingTime = e.processing / time.Duration(e.requests)
		}
		st.Endpoints = append(st.Endpoints, es)
	}
	return st
}

// stop drains every subscription, endpoints' and discovery's, and waits
// (up to timeout) until the messages already delivered have been handed
// to their handlers.
func (s *service) stop(timeout time.Duration) {
	s.mu.Lock()
	var subs []*nats.Subscription
	for _, e := range s.endpoints {
		for subject, sub := range e.subs {
			subs = append(subs, sub)
			delete(e.subs, subject)
		}
	}
	subs = append(subs, s.verbSubs...)
	s.verbSubs = nil
	s.mu.Unlock()
	deadline := time.After(timeout)
	for _, sub := range subs {
		closed := sub.StatusChanged(nats.SubscriptionClosed)
		if err := sub.Drain(); err != nil {
			continue // already closed, or the connection is
		}
		select {
		case <-closed:
		case <-deadline:
			s.log.Warn().Msg("requests still being taken in at shutdown")
			return
		}
	}
}
