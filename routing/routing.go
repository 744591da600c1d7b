package routing

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"hash/fnv"
	"math/bits"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"
	"github.com/zeebo/xxh3"

	queengate "github.com/queengate/queengate"
	"github.com/queengate/queengate/internal/peers"
	"github.com/queengate/queengate/internal/promreg"
)

// Routing shards give partitions affinity to gateways. The NATS server
// maps every push subject onto one of a fixed number of shard subjects
// with its deterministic partition() function (ShardMappings), and each
// gateway subscribes the shards it owns, so a partition's pushes reach one
// gateway: its fusion buffers see the partition's whole traffic and its
// cache sees every commit, so it keeps vouching.
//
// Ownership needs no new component: every gateway publishes a heartbeat
// on <prefix>.gateways.heartbeat (every HeartbeatEvery), and from the
// members it hears, each computes the same owner for every shard by
// rendezvous hashing (the member with the highest xxh3 of its id and the
// shard). Handovers are make-before-break: a gateway keeps serving a shard
// it no longer owns until the owner's heartbeat says it serves it, so a
// join or a graceful leave leaves no shard without a subscriber. Shard
// subscriptions are in the queue group, so while two gateways serve a
// shard each request still goes to one of them.
//
// Failure modes. A gateway killed outright stops heartbeating; its NATS
// subscriptions go with its connection at once, and the others take its
// shards once they miss its heartbeats for MemberTimeout (requests in
// between get no responders, or time out if they were in flight there,
// and a retry is exact). Gateways that disagree for a moment about who is
// alive may both serve a shard (harmless) or, briefly, neither (the same
// no-responders) until their views converge within a heartbeat or two. A
// gateway that cannot reach PostgreSQL says so in its heartbeats and
// loses its shards to ready ones; if none is ready, everyone live serves.
// Correctness never depends on any of this: two gateways pushing to one
// partition are exact, only slower.

// The defaults of Config's zero values.
const (
	// DefaultShards is the number of routing shards of a deployment.
	DefaultShards           = 64
	DefaultHeartbeatEvery   = 100 * time.Millisecond
	DefaultMemberHeartbeats = 5
	DefaultLeaveTimeout     = 2 * time.Second
	DefaultProbeEvery       = 30 * time.Second
	DefaultProbeTimeout     = 2 * time.Second
)

// MaxShards bounds the shard count (heartbeats carry a bitset).
const MaxShards = 1024

// ShardMappings are the NATS subject mappings that route pushes onto n
// shards: the two push forms (partition named, and Default), each mapped
// by partition() over its queue and partition tokens, and the JetStream
// publish form onto the same shard as its partition's pushes.
func ShardMappings(prefix string, n int) map[string]string {
	s := queengate.Subjects{Prefix: prefix}
	push, shard := s.Verb(queengate.APIPush), s.Verb(peers.Shard)
	return map[string]string{
		s.Wildcard(queengate.APIPush): fmt.Sprintf("%s.{{partition(%d,1,2)}}.{{wildcard(1)}}.{{wildcard(2)}}", shard, n),
		push + ".*":                   fmt.Sprintf("%s.{{partition(%d,1)}}.{{wildcard(1)}}", shard, n), // the Default partition's form
		s.Wildcard(queengate.APIJetStream): fmt.Sprintf("%s.{{partition(%d,1,2)}}.{{wildcard(1)}}.{{wildcard(2)}}",
			s.Verb(peers.JetStreamShard), n),
	}
}

// PopMappings are the NATS subject mappings that route a pop naming its
// partition onto the shard of the partition's pushes (the same
// partition() over the same tokens), so that it reaches the gateway
// whose tail holds the partition's fresh messages (docs/design.md, "The
// tail"). Optional: without them any gateway answers a pop, from SQL
// when the pop's partition is another gateway's. Pops of any partition
// are not mapped: no one gateway owns them.
func PopMappings(prefix string, n int) map[string]string {
	s := queengate.Subjects{Prefix: prefix}
	return map[string]string{
		s.Verb(queengate.APIPop) + ".*.*": fmt.Sprintf("%s.{{partition(%d,1,2)}}.{{wildcard(1)}}.{{wildcard(2)}}",
			s.Verb(peers.PopShard), n),
	}
}

// ShardOf is the shard NATS maps a push to queue and partition onto, as
// its partition() function computes it: FNV-1a of the tokens, concatenated,
// modulo n. A push to <prefix>.push.<queue> hashes the queue alone, so it
// may land on another shard than <prefix>.push.<queue>.Default.
func ShardOf(n int, tokens ...string) int {
	h := fnv.New32a()
	for _, t := range tokens {
		_, _ = h.Write([]byte(t))
	}
	return int(h.Sum32() % uint32(n))
}

// heartbeat is what a gateway says of itself to the others.
type heartbeat struct {
	ID      string `json:"id"`
	Shards  int    `json:"shards"`
	Ready   bool   `json:"ready"`
	Leaving bool   `json:"leaving,omitempty"`
	// Hello asks every gateway that hears it to beat at once: a starting
	// gateway learns the fleet before it takes shards.
	Hello   bool   `json:"hello,omitempty"`
	Serving string `json:"serving"` // base64 bitset of the shards it subscribes
}

// member is another gateway as last heard.
type member struct {
	lastSeen time.Time
	ready    bool
	leaving  bool
	serving  bitset
}

// bitset is a set of shards.
type bitset []uint64

func newBitset(n int) bitset    { return make(bitset, (n+63)/64) }
func (b bitset) has(i int) bool { return i/64 < len(b) && b[i/64]&(1<<(i%64)) != 0 }
func (b bitset) set(i int, on bool) {
	if on {
		b[i/64] |= 1 << (i % 64)
	} else {
		b[i/64] &^= 1 << (i % 64)
	}
}

func (b bitset) count() int {
	n := 0
	for _, w := range b {
		n += bits.OnesCount64(w)
	}
	return n
}

func (b bitset) encode() string {
	buf := make([]byte, 8*len(b))
	for i, w := range b {
		for j := range 8 {
			buf[8*i+j] = byte(w >> (8 * j))
		}
	}
	return base64.RawStdEncoding.EncodeToString(buf)
}

func decodeBitset(s string, n int) (bitset, error) {
	buf, err := base64.RawStdEncoding.DecodeString(s)
	if err != nil || len(buf) != 8*((n+63)/64) {
		return nil, fmt.Errorf("bad serving set")
	}
	b := newBitset(n)
	for i := range b {
		for j := range 8 {
			b[i] |= uint64(buf[8*i+j]) << (8 * j)
		}
	}
	return b, nil
}

// DecodeServing reads a heartbeat's serving set: which of n shards a
// gateway says it subscribes. For tools and tests that watch the fleet.
func DecodeServing(s string, n int) ([]bool, error) {
	b, err := decodeBitset(s, n)
	if err != nil {
		return nil, err
	}
	out := make([]bool, n)
	for k := range out {
		out[k] = b.has(k)
	}
	return out, nil
}

// Config tunes shard ownership. Zero values take the defaults.
type Config struct {
	// Shards is the deployment's routing shard count; default
	// DefaultShards. Every
	// gateway and the NATS mapping must agree on it.
	Shards int
	// HeartbeatEvery is how often a gateway says it is alive; default
	// DefaultHeartbeatEvery (3 gateways: 30 small messages a second).
	HeartbeatEvery time.Duration
	// MemberTimeout is how long without a heartbeat before a gateway is
	// taken for gone and its shards served by others; default
	// DefaultMemberHeartbeats heartbeats (500 ms): a killed gateway's
	// partitions wait that long.
	MemberTimeout time.Duration
	// LeaveTimeout bounds how long a stopping gateway waits for the
	// others to serve its shards; default DefaultLeaveTimeout.
	LeaveTimeout time.Duration
	// ProbeEvery is how often the NATS mapping is probed again (it may
	// be added, changed or removed while the gateway runs); default
	// DefaultProbeEvery.
	ProbeEvery time.Duration
	// ProbeTimeout bounds one probe; default DefaultProbeTimeout.
	ProbeTimeout time.Duration
	// Ready tells whether this gateway can serve pushes now (PostgreSQL
	// reachable); nil: always.
	Ready func() bool
}

func (c Config) withDefaults() Config {
	if c.Shards == 0 {
		c.Shards = DefaultShards
	}
	if c.HeartbeatEvery <= 0 {
		c.HeartbeatEvery = DefaultHeartbeatEvery
	}
	if c.MemberTimeout <= 0 {
		c.MemberTimeout = DefaultMemberHeartbeats * c.HeartbeatEvery
	}
	if c.LeaveTimeout <= 0 {
		c.LeaveTimeout = DefaultLeaveTimeout
	}
	if c.ProbeEvery <= 0 {
		c.ProbeEvery = DefaultProbeEvery
	}
	if c.ProbeTimeout <= 0 {
		c.ProbeTimeout = DefaultProbeTimeout
	}
	if c.Ready == nil {
		c.Ready = func() bool { return true }
	}
	return c
}

// Validate checks c with its defaults applied.
func (c Config) Validate() error {
	c = c.withDefaults()
	if c.Shards < 1 || c.Shards > MaxShards {
		return fmt.Errorf("gateway: routing shards %d: 1 to %d", c.Shards, MaxShards)
	}
	if c.MemberTimeout < 2*c.HeartbeatEvery {
		return fmt.Errorf("gateway: routing member timeout %v must be at least two heartbeats (%v)", c.MemberTimeout, 2*c.HeartbeatEvery)
	}
	return nil
}

// Router owns this gateway's share of the routing shards.
type Router struct {
	cfg    Config
	nc     *nats.Conn
	id     string
	prefix string
	// endpoints take the shard subscriptions: the push endpoint's, and
	// the named pops'.
	endpoints []ShardEndpoint
	log       zerolog.Logger
	m         *Metrics

	mu      sync.Mutex
	members map[string]*member // others, by id
	serving bitset
	leaving bool
	mapping mappingState // what the last probe found
	sub     *nats.Subscription
	changed chan struct{} // a heartbeat arrived: reconcile soon
	stop    chan struct{}
	done    chan struct{}
}

// Subscriber is an endpoint as the router sees it: the shards it takes
// are subscribed on it (in its queue group, with its handler and
// figures), and the shards it hands over unsubscribed.
type Subscriber interface {
	Subscribe(subject string) error
	Unsubscribe(subject string)
}

// ShardEndpoint is an endpoint whose requests NATS maps onto the routing
// shards under Verb (with the prefix, "queen.shard"): shard k is
// <Verb>.<k>.>.
type ShardEndpoint struct {
	Verb string
	Subscriber
}

// New builds the router of the gateway named id, whose shards go to
// endpoints; m is from NewMetrics. Start takes its shards.
func New(cfg Config, nc *nats.Conn, id, prefix string, endpoints []ShardEndpoint, log zerolog.Logger, m *Metrics) *Router {
	cfg = cfg.withDefaults()
	return &Router{cfg: cfg, nc: nc, id: id, prefix: prefix, endpoints: endpoints, log: log, m: m,
		members: map[string]*member{}, serving: newBitset(cfg.Shards),
		changed: make(chan struct{}, 1), stop: make(chan struct{}), done: make(chan struct{})}
}

func (r *Router) heartbeatSubject() string {
	return queengate.Subjects{Prefix: r.prefix}.Verb(peers.Heartbeat)
}

func shardSubject(verb string, k int) string {
	return verb + "." + strconv.Itoa(k) + ".>"
}

// subscribeShard subscribes every endpoint to shard k, or none.
func (r *Router) subscribeShard(k int) error {
	for i, e := range r.endpoints {
		if err := e.Subscribe(shardSubject(e.Verb, k)); err != nil {
			for _, done := range r.endpoints[:i] {
				done.Unsubscribe(shardSubject(done.Verb, k))
			}
			return err
		}
	}
	return nil
}

func (r *Router) unsubscribeShard(k int) {
	for _, e := range r.endpoints {
		e.Unsubscribe(shardSubject(e.Verb, k))
	}
}

// Start probes the NATS mapping (a mapping onto another shard count is
// an error: shards this fleet does not serve would go unanswered), says
// hello, listens to the fleet for a heartbeat's time, takes the shards it
// owns, and keeps reconciling until Close.
func (r *Router) Start(ctx context.Context) error {
	sub, err := r.nc.Subscribe(r.heartbeatSubject(), r.onHeartbeat)
	if err != nil {
		return fmt.Errorf("gateway: subscribe heartbeats: %w", err)
	}
	r.sub = sub
	if err := r.checkMapping(); err != nil {
		_ = sub.Unsubscribe()
		return err
	}
	r.publish(true)
	select {
	case <-time.After(r.cfg.HeartbeatEvery):
	case <-ctx.Done():
		_ = sub.Unsubscribe()
		return fmt.Errorf("gateway: start routing: %w", ctx.Err())
	}
	r.reconcile(time.Now())
	r.publish(false)
	// Start returns with its shards live at the server. (nats.go wants a
	// deadline on a flush's context.)
	flushCtx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := r.nc.FlushWithContext(flushCtx); err != nil {
		_ = sub.Unsubscribe()
		return fmt.Errorf("gateway: flush shard subscriptions: %w", err)
	}
	go r.loop()
	return nil
}

func (r *Router) loop() {
	defer close(r.done)
	tick := time.NewTicker(r.cfg.HeartbeatEvery)
	defer tick.Stop()
	probe := time.NewTicker(r.cfg.ProbeEvery)
	defer probe.Stop()
	for {
		select {
		case <-r.stop:
			return
		case <-tick.C:
			if r.nc.IsClosed() {
				return // for good: nothing left to serve or say
			}
			r.reconcile(time.Now())
			r.publish(false)
		case <-r.changed:
			r.reconcile(time.Now())
		case <-probe.C:
			if err := r.checkMapping(); err != nil {
				r.log.Error().Err(err).Msg("routing mapping")
			}
		}
	}
}

func (r *Router) onHeartbeat(m *nats.Msg) {
	var hb heartbeat
	if err := json.Unmarshal(m.Data, &hb); err != nil || hb.ID == "" || hb.ID == r.id {
		return
	}
	if hb.Shards != r.cfg.Shards {
		r.m.mismatches.Inc()
		r.log.Error().Str("member", hb.ID).Int("its_shards", hb.Shards).Int("our_shards", r.cfg.Shards).
			Msg("a gateway with another routing shard count: every gateway and the NATS mapping must use the same QUEEN_ROUTING_SHARDS")
		return
	}
	serving, err := decodeBitset(hb.Serving, r.cfg.Shards)
	if err != nil {
		return
	}
	r.mu.Lock()
	r.members[hb.ID] = &member{lastSeen: time.Now(), ready: hb.Ready, leaving: hb.Leaving, serving: serving}
	r.mu.Unlock()
	if hb.Hello {
		r.publish(false)
	}
	select {
	case r.changed <- struct{}{}:
	default:
	}
}

// publish sends this gateway's heartbeat.
func (r *Router) publish(hello bool) {
	r.mu.Lock()
	hb := heartbeat{ID: r.id, Shards: r.cfg.Shards, Ready: r.cfg.Ready(), Leaving: r.leaving, Hello: hello,
		Serving: r.serving.encode()}
	r.mu.Unlock()
	body, _ := json.Marshal(hb)
	if err := r.nc.Publish(r.heartbeatSubject(), body); err != nil {
		r.log.Debug().Err(err).Msg("publish heartbeat")
	}
}

// owner is the live member that owns shard k: the highest rendezvous
// score among the eligible ones.
func owner(k int, eligible []string) string {
	best, bestScore := "", uint64(0)
	for _, id := range eligible {
		score := xxh3.HashString(id + "/" + strconv.Itoa(k))
		if best == "" || score > bestScore || score == bestScore && id > best {
			best, bestScore = id, score
		}
	}
	return best
}

// reconcile subscribes the shards this gateway owns and releases, once
// their owner serves them, those it does not.
func (r *Router) reconcile(now time.Time) {
	r.mu.Lock()
	var live, ready []string
	for id, m := range r.members {
		if now.Sub(m.lastSeen) > r.cfg.MemberTimeout {
			delete(r.members, id)
			continue
		}
		if m.leaving {
			continue
		}
		live = append(live, id)
		if m.ready {
			ready = append(ready, id)
		}
	}
	if !r.leaving {
		live = append(live, r.id)
		if r.cfg.Ready() {
			ready = append(ready, r.id)
		}
	}
	eligible := ready
	if len(eligible) == 0 {
		eligible = live // nobody can reach PostgreSQL: everyone answers, fast
	}
	slices.Sort(eligible)
	var take, release []int
	for k := range r.cfg.Shards {
		o := owner(k, eligible)
		switch {
		case o == r.id && !r.serving.has(k):
			take = append(take, k)
		case o != r.id && r.serving.has(k) && (o == "" || r.members[o] != nil && r.members[o].serving.has(k)):
			release = append(release, k)
		}
	}
	members := len(r.members) + 1
	r.mu.Unlock()

	for _, k := range take {
		if err := r.subscribeShard(k); err != nil {
			r.log.Warn().Err(err).Int("shard", k).Msg("take shard")
			continue
		}
		r.setServing(k, true)
		r.m.handovers.WithLabelValues("taken").Inc()
	}
	for _, k := range release {
		r.setServing(k, false)
		r.unsubscribeShard(k)
		r.m.handovers.WithLabelValues("released").Inc()
	}
	r.mu.Lock()
	r.m.served.Set(float64(r.serving.count()))
	r.mu.Unlock()
	r.m.members.Set(float64(members))
}

func (r *Router) setServing(k int, on bool) {
	r.mu.Lock()
	r.serving.set(k, on)
	r.mu.Unlock()
}

// Leave hands this gateway's shards over before it stops: it says it is
// leaving, and waits (up to the smaller of limit and Config.LeaveTimeout)
// until the others serve what it serves. Its subscriptions are drained by
// the push endpoint's owner afterwards. handedOver: another live gateway
// serves every shard this one serves (false when none is live, or the
// wait ran out).
func (r *Router) Leave(limit time.Duration) (handedOver bool) {
	r.mu.Lock()
	r.leaving = true
	r.mu.Unlock()
	deadline := time.Now().Add(min(limit, r.cfg.LeaveTimeout))
	for time.Now().Before(deadline) {
		r.publish(false)
		if served, others := r.othersServeMine(); served {
			return others > 0
		}
		select {
		case <-r.changed:
		case <-time.After(r.cfg.HeartbeatEvery):
		}
	}
	return false
}

// othersServeMine reports whether every shard this gateway serves is also
// served by a live member (or no other member is live to take it), and
// how many other members are live.
func (r *Router) othersServeMine() (served bool, others int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	now := time.Now()
	var live []*member
	for _, m := range r.members {
		if now.Sub(m.lastSeen) <= r.cfg.MemberTimeout && !m.leaving {
			live = append(live, m)
		}
	}
	if len(live) == 0 {
		return true, 0
	}
	for k := range r.cfg.Shards {
		if !r.serving.has(k) {
			continue
		}
		if !slices.ContainsFunc(live, func(m *member) bool { return m.serving.has(k) }) {
			return false, len(live)
		}
	}
	return true, len(live)
}

// Close stops the heartbeats.
func (r *Router) Close() {
	select {
	case <-r.stop:
		return
	default:
	}
	close(r.stop)
	<-r.done
	if r.sub != nil {
		_ = r.sub.Unsubscribe()
	}
}

// Metrics describe shard ownership.
type Metrics struct {
	served     prometheus.Gauge
	members    prometheus.Gauge
	handovers  *prometheus.CounterVec
	mismatches prometheus.Counter
	mapping    *prometheus.GaugeVec
}

// NewMetrics registers the routing metrics with reg (nil: none).
func NewMetrics(reg prometheus.Registerer) (*Metrics, error) {
	m := &Metrics{
		served: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "queengate_routing_shards_served",
			Help: "Routing shards this gateway subscribes.",
		}),
		members: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "queengate_routing_members",
			Help: "Gateways this gateway hears heartbeats from, itself included.",
		}),
		handovers: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "queengate_routing_handovers_total",
			Help: "Routing shards this gateway took or released.",
		}, []string{"change"}),
		mismatches: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "queengate_routing_shard_count_mismatches_total",
			Help: "Heartbeats from gateways configured with another routing shard count (ignored).",
		}),
		mapping: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "queengate_routing_mapping",
			Help: "1 for what the last probe found of NATS's push subject mapping: present (pushes reach their shard's gateway), absent (pushes reach any gateway of the queue group), or unknown.",
		}, []string{"state"}),
	}
	if err := promreg.RegisterAll(reg, m.served, m.members, m.handovers, m.mismatches, m.mapping); err != nil {
		return nil, err
	}
	return m, nil
}
