package ingest

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"
	"github.com/zeebo/xxh3"

	"github.com/queengate/queengate/dedup"
	"github.com/queengate/queengate/internal/startstop"
	"github.com/queengate/queengate/model"
	"github.com/queengate/queengate/tail"
)

var (
	// ErrOverloaded is returned by Submit when the owning shard's buffers
	// are full. Nothing of the request was accepted.
	ErrOverloaded = errors.New("ingest: overloaded")
	// ErrStoreDown is returned by Submit while PostgreSQL is known to be
	// out of reach (SetStoreReachable).
	ErrStoreDown = fmt.Errorf("ingest: %w", model.ErrStoreDown)
	// ErrStopped is returned by Submit once Stop has begun.
	ErrStopped = errors.New("ingest: shutting down")
	// ErrNotStarted is returned by Submit before Start.
	ErrNotStarted = errors.New("ingest: not started")
	// ErrOutcomeUnknown marks a failed push that reached PostgreSQL and
	// may have committed before the error (a connection lost during the
	// round trip). Retrying the same transactionId is safe: within the
	// window it answers duplicate if the first attempt was stored.
	ErrOutcomeUnknown = errors.New("ingest: the store may have committed before the error; retrying the same transactionId is safe")
	// ErrNotStored marks a failed push known to have stored nothing (the
	// statement never reached PostgreSQL, PostgreSQL refused it, or a
	// verification read found it absent).
	ErrNotStored = errors.New("ingest: not stored; retrying the same transactionId is safe")
)

// Store is what ingest needs from the log. *pgstore.Store implements it.
type Store interface {
	// EnsurePartitions resolves many partitions in one round trip,
	// creating the missing ones: parts[i] is (queues[i], partitions[i]),
	// ID 0 when it could not be ensured, and created[i] says this call
	// created it (it holds no message yet).
	EnsurePartitions(ctx context.Context, queues, partitions []string) (parts []model.Partition, created []bool, err error)
	// PushUnder pushes frames built under store epoch n, on a connection
	// of that epoch only (else it refuses with model.ErrStoreChanged,
	// storing nothing), and returns the epoch of the connection it used.
	PushUnder(ctx context.Context, n uint64, frames []model.Frame) ([]model.FrameResult, uint64, error)
	// Epoch is the store's latest epoch, which changes when PostgreSQL
	// does (a failover, a restart, a restored backup), and its server's
	// identity; Distrust starts a new one when a log is found shorter
	// than a push of epoch n left it.
	Epoch(ctx context.Context) (uint64, string)
	Distrust(n uint64)
	// Lacks tells which of the messages said stored at offsets (with
	// hashes) of partitions the store lacks, and the epoch it read under.
	Lacks(ctx context.Context, pids, offsets []int64, hashes []model.Hash) ([]bool, uint64, error)
	// HydrateMany reads many partitions' windows in one round trip; a
	// partition that does not exist is absent.
	HydrateMany(ctx context.Context, partitionIDs []int64) (map[int64]model.Hydration, error)
	HydrateAbove(ctx context.Context, partitionID, above int64) (model.Hydration, error)
	// Originals reads the data hashes of stored messages, by offset, for
	// a payload-conflict check; a purged message is absent.
	Originals(ctx context.Context, partitionID int64, offsets []int64) (map[int64]model.Hash, error)
}

// The defaults of Config's zero values.
const (
	DefaultFlushSize        = 1000
	DefaultLinger           = time.Millisecond
	DefaultMaxBuffered      = 100_000
	DefaultMaxBufferedBytes = 256 << 20
	// DefaultBundleFlushes is how many flush sizes one bundle may carry
	// (MaxBundleMessages).
	DefaultBundleFlushes = 20
	DefaultMaxInflight   = 1
	DefaultPushTimeout   = 5 * time.Second
	DefaultPartitionTTL  = 30 * time.Second
	DefaultJournal       = 1 << 18
)

// Config tunes the ingester. Zero values take the defaults.
type Config struct {
	// Shards is the number of shard goroutines; default GOMAXPROCS.
	Shards int
	// FlushSize flushes a partition's buffer once it holds this many
	// messages; default DefaultFlushSize. A single larger request is one frame.
	FlushSize int
	// Linger flushes a buffer this long after its first message arrived;
	// default DefaultLinger.
	Linger time.Duration
	// MaxBuffered bounds the messages a shard holds (buffered and in
	// flight); default DefaultMaxBuffered. Beyond it Submit answers ErrOverloaded.
	MaxBuffered int
	// MaxBufferedBytes bounds the data bytes a shard holds; default
	// DefaultMaxBufferedBytes. Beyond it Submit answers ErrOverloaded.
	MaxBufferedBytes int64
	// MaxBundleMessages caps one bundle, so that a backlog after a stall
	// goes out as several transactions of bounded size; default
	// DefaultBundleFlushes × the flush size.
	MaxBundleMessages int
	// MaxInflight is the number of bundles a shard may have in flight at
	// once (each on its own connection); default DefaultMaxInflight: shards already give
	// parallelism, and a bundle that waits fuses more (measured: +10% msg/s
	// on 2 cores).
	MaxInflight int
	// PushTimeout bounds one bundle's round trip; default
	// DefaultPushTimeout, well under
	// a producer's usual request timeout, so that a stalled PostgreSQL
	// ends in an answer rather than in the producer's timeout.
	PushTimeout time.Duration
	// PartitionTTL is how long a partition's id and window are memoised
	// before they are read again; default DefaultPartitionTTL. It bounds how long a
	// window change goes unnoticed by the cache.
	PartitionTTL time.Duration
	// Cache configures the dedup cache that lets pushes vouch for what the
	// broker already knows (p_verified), so SQL need not probe.
	Cache dedup.Config
	// NoCache sends every frame with p_verified = -1 (always correct,
	// always probing): for measuring the cache's effect.
	NoCache bool
	// TailBytes bounds the tail: the messages this gateway committed,
	// kept per partition so that consumers' usual cycle is served from
	// memory (docs/design.md, "The tail"); default tail.DefaultBudgetBytes.
	TailBytes int64
	// NoTail keeps no tail: every cycle reads its messages from SQL.
	NoTail bool
	// Journal is how many of the last acknowledged messages are kept
	// (40 bytes each), so that when PostgreSQL changes (a failover to an
	// asynchronous standby) those it lacks can be told and reported;
	// default DefaultJournal. Negative keeps none.
	Journal int
	// OnLost, when set, is called after each such check with the
	// messageIds of every acknowledged message the store lacked (none
	// when nothing was lost), from a goroutine of its own.
	OnLost func(messageIDs []string)
}

func (c Config) withDefaults() Config {
	if c.Shards <= 0 {
		c.Shards = runtime.GOMAXPROCS(0)
	}
	if c.FlushSize <= 0 {
		c.FlushSize = DefaultFlushSize
	}
	if c.Linger <= 0 {
		c.Linger = DefaultLinger
	}
	if c.MaxBuffered <= 0 {
		c.MaxBuffered = DefaultMaxBuffered
	}
	if c.TailBytes <= 0 {
		c.TailBytes = tail.DefaultBudgetBytes
	}
	if c.MaxBufferedBytes <= 0 {
		c.MaxBufferedBytes = DefaultMaxBufferedBytes
	}
	if c.MaxBundleMessages <= 0 {
		c.MaxBundleMessages = DefaultBundleFlushes * c.FlushSize
	}
	if c.MaxInflight <= 0 {
		c.MaxInflight = DefaultMaxInflight
	}
	if c.PushTimeout <= 0 {
		c.PushTimeout = DefaultPushTimeout
	}
	if c.PartitionTTL <= 0 {
		c.PartitionTTL = DefaultPartitionTTL
	}
	if c.Journal == 0 {
		c.Journal = DefaultJournal
	}
	return c
}

// DefaultConfig is the configuration zero values take.
func DefaultConfig() Config { return Config{}.withDefaults() }

// Request is the messages of one producer's request, for one partition.
type Request struct {
	Queue     string
	Partition string
	Messages  []model.Incoming
	// Done is called exactly once per accepted request, from an ingest
	// goroutine, after the outcome is committed or definitely failed, with
	// one Result per message in input order. It must not block for long.
	Done func([]model.PushOutcome)
}

// Ingester routes requests to shards. Start it, Submit to it, Stop it.
type Ingester struct {
	startstop.Base
	cfg     Config
	store   Store
	log     zerolog.Logger
	metrics *metrics
	cache   *dedup.Cache // nil with NoCache
	tail    *tail.Tail   // nil with NoTail
	shards  []*shard
	tallies tallies

	mu        sync.RWMutex // guards started/stopping against Submit
	started   bool
	stopping  bool
	answering sync.WaitGroup // bundles still handing out answers

	reach reachability

	// ep is the store epoch the cache and the memos speak of; journal
	// the last acknowledged messages (see failover.go).
	ep      storeEpoch
	journal journal

	// committed is told which queues a flush wrote to (OnCommit).
	committed atomic.Pointer[func(queues []string)]
}

// OnCommit has f called, after every flush that wrote messages, with the
// queues it wrote to (each once), from the flushing goroutine: f must not
// block. Consumers waiting for new messages are woken through it.
func (in *Ingester) OnCommit(f func(queues []string)) { in.committed.Store(&f) }

// announce tells OnCommit's function which queues the bundle wrote to.
func (in *Ingester) announce(parts []*partState, s *sent) {
	f := in.committed.Load()
	if f == nil {
		return
	}
	var queues []string
	for i, p := range parts {
		j := s.frameOf[i]
		if j < 0 || s.results[j].BaseOffset < 0 || slices.Contains(queues, p.queue) {
			continue
		}
		queues = append(queues, p.queue)
	}
	if len(queues) > 0 {
		(*f)(queues)
	}
}

// New builds an Ingester. reg may be nil: then no metrics are registered.
func New(store Store, cfg Config, log zerolog.Logger, reg prometheus.Registerer) (*Ingester, error) {
	cfg = cfg.withDefaults()
	m, err := newMetrics(reg)
	if err != nil {
		return nil, err
	}
	in := &Ingester{cfg: cfg, store: store, log: log, metrics: m, journal: journal{max: cfg.Journal}}
	in.reach.init()
	if !cfg.NoCache {
		cacheCfg := cfg.Cache
		if cacheCfg.Warn == nil {
			cacheCfg.Warn = func(n int) {
				log.Warn().Int("suppressed", n).Msg("dedup cache over budget: partitions suppressed (their pushes probe in SQL)")
			}
		}
		in.cache = dedup.New(cacheCfg)
		if err := m.registerCache(reg, in.cache); err != nil {
			return nil, err
		}
	}
	if !cfg.NoTail {
		in.tail = tail.New(cfg.TailBytes)
		if err := m.registerTail(reg, in.tail); err != nil {
			return nil, err
		}
	}
	for i := range cfg.Shards {
		in.shards = append(in.shards, newShard(in, i))
	}
	return in, nil
}

// yieldEvery is how often the cache's budget in force follows the
// process's memory: the live heap it reads changes once per collection.
const yieldEvery = time.Second

// Start starts the shard goroutines. They drain (flush and answer
// everything accepted) and end when Stop is called or ctx ends.
func (in *Ingester) Start(ctx context.Context) error {
	run, done, err := in.StartInit(ctx)
	if err != nil {
		return fmt.Errorf("ingest: %w", err)
	}
	in.mu.Lock()
	in.started = true
	in.mu.Unlock()
	var shards sync.WaitGroup
	for _, s := range in.shards {
		shards.Go(s.run)
	}
	if in.cache != nil {
		go in.cache.YieldToMemory(run, yieldEvery)
	}
	go func() {
		defer done()
		<-run.Done()
		// No Submit is mid-send once stopping is set under the write
		// lock: what the shards drain is everything accepted.
		in.mu.Lock()
		in.stopping = true
		in.mu.Unlock()
		for _, s := range in.shards {
			close(s.quit)
		}
		shards.Wait()
		in.answering.Wait()
	}()
	return nil
}

// Submit hands a request to its shard without blocking. On error nothing
// of the request was accepted and Done will not be called.
func (in *Ingester) Submit(req *Request) error {
	n := len(req.Messages)
	if n == 0 {
		return errors.New("ingest: empty request")
	}
	in.mu.RLock()
	defer in.mu.RUnlock()
	if in.stopping {
		return ErrStopped
	}
	if !in.started {
		return ErrNotStarted
	}
	if in.reach.down() {
		return ErrStoreDown
	}
	s := in.shards[in.shardOf(req.Queue, req.Partition)]
	size := req.bytes()
	if s.buffered.Add(int64(n)) > int64(in.cfg.MaxBuffered) || s.bufferedBytes.Add(size) > in.cfg.MaxBufferedBytes {
		s.buffered.Add(-int64(n))
		s.bufferedBytes.Add(-size)
		return ErrOverloaded
	}
	select {
	case s.in <- req:
		in.metrics.bufferDepth.Add(float64(n))
		return nil
	default:
		s.buffered.Add(-int64(n))
		s.bufferedBytes.Add(-size)
		return ErrOverloaded
	}
}

// bytes is what a request holds in memory, for the byte bound.
func (r *Request) bytes() int64 {
	var n int64
	for _, m := range r.Messages {
		n += int64(len(m.TxnID) + len(m.Data) + len(m.Meta))
	}
	return n
}

// shardOf is a stable hash of (queue, partition): the same partition is
// always owned by the same shard, which makes its flushes single-flight.
func (in *Ingester) shardOf(queue, partition string) int {
	h := xxh3.HashString(queue + "\x1f" + partition)
	return int(h % uint64(len(in.shards)))
}

// Stop refuses new requests, flushes and answers everything accepted, and
// waits for the shards to finish. It is safe to call more than once.
func (in *Ingester) Stop() { in.Base.Stop() }

// Buffered is the number of messages accepted and not yet answered.
func (in *Ingester) Buffered() int {
	total := 0
	for _, s := range in.shards {
		total += int(s.buffered.Load())
	}
	return total
}

// shard owns the partitions that hash to it. All fields but buffered, in
// and quit are touched only by its run goroutine.
type shard struct {
	in            chan *Request
	quit          chan struct{}
	forget        chan string // queues deleted (ForgetQueue)
	done          chan *bundle
	buffered      atomic.Int64 // messages accepted and not yet answered
	bufferedBytes atomic.Int64 // their bytes

	ing      *Ingester
	parts    map[string]*partState
	pending  map[*partState]struct{} // parts with an unsent buffer
	inflight int
	timer    *time.Timer
	timerAt  time.Time
}

func newShard(in *Ingester, i int) *shard {
	// The request channel is sized so that MaxBuffered, not the channel,
	// is what refuses work: every request carries at least one message.
	return &shard{
		in:      make(chan *Request, min(in.cfg.MaxBuffered, 65536)),
		quit:    make(chan struct{}),
		forget:  make(chan string, 64),
		done:    make(chan *bundle, in.cfg.MaxInflight),
		ing:     in,
		parts:   map[string]*partState{},
		pending: map[*partState]struct{}{},
	}
}

// partState is one partition's fusion state within its shard.
type partState struct {
	queue, partition string
	// buffers are the partition's unsent buffers, oldest first; only the
	// last one takes new requests. Only buffers[0] is ever in flight.
	buffers  []*buffer
	inflight bool
	// meta is the memoised id and window; owned by whoever holds the
	// partition in flight (the shard hands it over with the bundle).
	meta       model.Partition
	resolvedAt time.Time
	// epoch is the store epoch meta was resolved under: ids may name
	// other partitions after PostgreSQL changed.
	epoch    uint64
	lastUsed time.Time
}

func (s *shard) run() {
	sweep := time.NewTicker(time.Minute)
	defer sweep.Stop()
	s.timer = time.NewTimer(time.Hour)
	s.timer.Stop()
	for {
		select {
		case req := <-s.in:
			s.accept(req)
			// Take what else is already queued before deciding to flush,
			// so that bursts fuse into one bundle.
			for more := true; more; {
				select {
				case req := <-s.in:
					s.accept(req)
				default:
					more = false
				}
			}
		case f := <-s.done:
			s.landed(f)
		case <-s.timer.C:
			s.timerAt = time.Time{}
		case now := <-sweep.C:
			s.sweepIdle(now)
		case queue := <-s.forget:
			s.forgetQueue(queue)
		case <-s.quit:
			s.drain()
			return
		}
		s.maybeFlush(false)
	}
}

// drain is the shutdown path: accept what was submitted before Stop, then
// flush everything regardless of linger and wait for every bundle.
func (s *shard) drain() {
accepting:
	for {
		select {
		case req := <-s.in:
			s.accept(req)
		default:
			break accepting
		}
	}
	for len(s.pending) > 0 || s.inflight > 0 {
		s.maybeFlush(true)
		if s.inflight > 0 {
			s.landed(<-s.done)
		}
	}
}

func (s *shard) accept(req *Request) {
	key := req.Queue + "\x1f" + req.Partition
	p := s.parts[key]
	now := time.Now()
	if p == nil {
		p = &partState{queue: req.Queue, partition: req.Partition}
		s.parts[key] = p
	}
	p.lastUsed = now
	var b *buffer
	if n := len(p.buffers); n > 0 && !(p.inflight && n == 1) {
		b = p.buffers[n-1]
	}
	// A request is never split: if it would take the open buffer past the
	// flush size, it starts the next one.
	if b == nil || (b.size > 0 && b.size+len(req.Messages) > s.ing.cfg.FlushSize) {
		// Sized for this request: it grows if more come.
		b = newBuffer(now, min(s.ing.cfg.FlushSize, len(req.Messages)))
		p.buffers = append(p.buffers, b)
	}
	b.add(req)
	s.pending[p] = struct{}{}
}

// maybeFlush sends a bundle when one is due: some partition's buffer is
// full, the oldest buffered message has lingered long enough, or the shard
// is draining. A bundle takes every pending partition that is not in
// flight, so that a due flush carries whatever else is waiting.
func (s *shard) maybeFlush(draining bool) {
	for s.inflight < s.ing.cfg.MaxInflight && len(s.pending) > 0 {
		due, next := s.due(draining)
		if !due {
			s.armTimer(next)
			return
		}
		f := &bundle{shard: s}
		messages := 0
		for p := range s.pending {
			if p.inflight {
				continue
			}
			if messages > 0 && messages+p.buffers[0].size > s.ing.cfg.MaxBundleMessages {
				break // the rest go in the next bundle
			}
			messages += p.buffers[0].size
			p.inflight = true
			f.parts = append(f.parts, p)
			f.buffers = append(f.buffers, p.buffers[0])
		}
		if len(f.parts) == 0 {
			return // everything pending is already in flight
		}
		for _, p := range f.parts {
			if len(p.buffers) == 1 {
				delete(s.pending, p)
			}
		}
		s.inflight++
		s.ing.answering.Add(1)
		go f.fly()
	}
}

// due reports whether a flush is due now and, if not, when the earliest
// pending buffer will be.
func (s *shard) due(draining bool) (bool, time.Time) {
	var earliest time.Time
	linger := s.ing.cfg.Linger
	now := time.Now()
	for p := range s.pending {
		if p.inflight {
			continue
		}
		b := p.buffers[0]
		if draining || b.size >= s.ing.cfg.FlushSize || len(p.buffers) > 1 || now.Sub(b.firstAt) >= linger {
			return true, time.Time{}
		}
		if earliest.IsZero() || b.firstAt.Before(earliest) {
			earliest = b.firstAt
		}
	}
	if earliest.IsZero() {
		return false, time.Time{}
	}
	return false, earliest.Add(linger)
}

func (s *shard) armTimer(at time.Time) {
	if at.IsZero() || (!s.timerAt.IsZero() && !at.Before(s.timerAt)) {
		return
	}
	s.timerAt = at
	s.timer.Reset(time.Until(at))
}

// landed takes a bundle back: its partitions may be sent again.
func (s *shard) landed(f *bundle) {
	s.inflight--
	for _, p := range f.parts {
		p.inflight = false
		// The sent buffer must not stay reachable from the slice's array:
		// an idle partition would keep its last requests alive.
		p.buffers[0] = nil
		p.buffers = p.buffers[1:]
		if len(p.buffers) > 0 {
			s.pending[p] = struct{}{}
		} else {
			p.buffers = nil
		}
	}
}

// sweepIdle forgets partitions idle for longer than their memo lives (at
// least a minute), so that a workload churning through partition names
// does not grow the map without bound: such a partition's memo must be
// read again anyway, and a million idle partitions would otherwise keep
// ~330 bytes each.
func (s *shard) sweepIdle(now time.Time) {
	idle := max(s.ing.cfg.PartitionTTL, time.Minute)
	for key, p := range s.parts {
		if !p.inflight && len(p.buffers) == 0 && now.Sub(p.lastUsed) > idle {
			delete(s.parts, key)
		}
	}
}
