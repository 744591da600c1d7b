// Package timers implements scheduled messages whose fire is exactly once
// (docs/design.md, "Timers"; docs/protocol.md, "Timers").
//
// A timer is a row in queen.timers until it fires or is cancelled. Every
// gateway runs a fire loop: it takes due rows with FOR UPDATE SKIP LOCKED
// and, in one transaction, deletes them and pushes their messages
// (pgstore/timers' FireDue). The guarantee is that transaction, not the
// deduplication window: re-scheduling a timer whose fire has committed
// produces a second message.
//
// Ops serves the timer subjects: producers' schedules and cancels, and
// the operators' list (also GET /timers on the admin HTTP).
package timers

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"

	"github.com/queengate/queengate/internal/promreg"
	"github.com/queengate/queengate/internal/startstop"
	"github.com/queengate/queengate/model"
)

// Store is what timers need from pgstore.
type Store interface {
	EnsurePartition(ctx context.Context, queue, partition string) (model.Partition, error)
	ScheduleTimer(ctx context.Context, partitionID int64, txnID string, data, meta []byte, fireAt time.Time) (model.ScheduledTimer, error)
	CancelTimer(ctx context.Context, id string) (bool, error)
	ListTimers(ctx context.Context, queue string, limit int, from *model.TimerKey) ([]model.TimerInfo, error)
	FireDue(ctx context.Context, limit int, beforeCommit func([]model.FiredTimer) error) ([]model.FiredTimer, error)
	NextTimerDue(ctx context.Context) (time.Duration, int64, bool, error)
	PendingTimers(ctx context.Context) (int64, error)
	ListenTimers(ctx context.Context) (model.TimerListener, error)
}

// The defaults of Config's zero values (and model.TimerNotifyHorizon).
const (
	DefaultBatchSize    = 1000
	DefaultPendingEvery = 15 * time.Second
)

// Config tunes the fire loop. Zero values take the defaults.
type Config struct {
	// BatchSize is the most timers one fire transaction takes; default
	// DefaultBatchSize.
	BatchSize int
	// MaxSleep bounds how long the loop sleeps with nothing due sooner,
	// in case a notification was lost (a reconnect); default
	// model.TimerNotifyHorizon (30 s): a timer due later than that does
	// not notify, and the loop looks again by then.
	MaxSleep time.Duration
	// PendingEvery is how often the pending gauge is refreshed (a count
	// over the table); default DefaultPendingEvery.
	PendingEvery time.Duration
	// BeforeCommit, when set, runs inside each fire transaction before
	// COMMIT; an error rolls the fire back. For fault injection in tests.
	BeforeCommit func([]model.FiredTimer) error
	// NoFire schedules and cancels without running a fire loop.
	NoFire bool
	// OnFired, when set, is told of every committed fire, in partition
	// and offset order (the gateway tells its dedup cache, which would
	// otherwise meet the fired offsets as another writer's and rehydrate).
	OnFired func([]model.FiredTimer)
	// OnSleep, when set, is told each time the fire loop goes to sleep and
	// wakes up: a signal tests wait on instead of guessing with sleeps.
	OnSleep func(Sleep)
}

// Sleep is the fire loop sleeping (Woken empty) or waking up.
type Sleep struct {
	Planned time.Duration // how long it meant to sleep
	// Woken says what ended it: "timer" (the planned time), "schedule" (a
	// schedule due sooner) or "stopped".
	Woken string
	// For is the fireAt (Unix ms) of the schedule that woke it.
	For int64
}

func (c Config) withDefaults() Config {
	if c.BatchSize <= 0 {
		c.BatchSize = DefaultBatchSize
	}
	if c.MaxSleep <= 0 {
		c.MaxSleep = model.TimerNotifyHorizon
	}
	if c.PendingEvery <= 0 {
		c.PendingEvery = DefaultPendingEvery
	}
	return c
}

// Service schedules, cancels and fires timers. Stop ends its loops: a fire
// in progress is cancelled and rolls back, and its timers stay pending to
// fire later, here or in another gateway.
type Service struct {
	startstop.Base
	cfg     Config
	store   Store
	log     zerolog.Logger
	metrics *metrics

	wake *wakeup // schedules (local and, through LISTEN, any gateway's)
}

// New builds a Service; reg may be nil.
func New(store Store, cfg Config, log zerolog.Logger, reg prometheus.Registerer) (*Service, error) {
	m, err := newMetrics(reg)
	if err != nil {
		return nil, err
	}
	return &Service{cfg: cfg.withDefaults(), store: store, log: log, metrics: m,
		wake: newWakeup()}, nil
}

// Scheduled is what a schedule stored (the gateway answers it as
// queengate.TimerScheduled).
type Scheduled struct {
	TimerID string
	Status  string // "scheduled"
	FireAt  time.Time
	TxnID   string
	// Existing: the transactionId was already pending in the partition;
	// that timer is answered and nothing changed (a retried schedule).
	Existing bool
}

// Schedule stores a timer for (queue, partition) that fires at fireAt
// (at once if it is past). txnID is fixed now; the caller mints one when
// the producer gave none. data is the message's JSON.
func (s *Service) Schedule(ctx context.Context, queue, partition, txnID string, data, meta []byte, fireAt time.Time) (Scheduled, error) {
	p, err := s.store.EnsurePartition(ctx, queue, partition)
	if err != nil {
		return Scheduled{}, err
	}
	t, err := s.store.ScheduleTimer(ctx, p.ID, txnID, data, meta, fireAt)
	if err != nil {
		return Scheduled{}, err
	}
	if t.Existing {
		s.metrics.existing.Inc()
	} else {
		s.metrics.scheduled.Inc()
		s.wake.note(t.FireAt.UnixMilli())
	}
	return Scheduled{TimerID: t.ID, Status: "scheduled", FireAt: t.FireAt.UTC(), TxnID: t.TxnID, Existing: t.Existing}, nil
}

// Cancel answers "cancelled" if the timer was pending, else "absent": no
// longer pending (fired, cancelled, or never existed), never "not
// delivered".
func (s *Service) Cancel(ctx context.Context, timerID string) (string, error) {
	ok, err := s.store.CancelTimer(ctx, timerID)
	if err != nil {
		return "", err
	}
	answer := "absent"
	if ok {
		answer = "cancelled"
	}
	s.metrics.cancels.WithLabelValues(answer).Inc()
	return answer, nil
}

// List lists pending timers, due first, from the position from on (nil:
// the first); queue "" lists every queue's.
func (s *Service) List(ctx context.Context, queue string, limit int, from *model.TimerKey) ([]model.TimerInfo, error) {
	return s.store.ListTimers(ctx, queue, limit, from)
}

// Start runs the fire loop (unless NoFire) and the pending gauge.
func (s *Service) Start(ctx context.Context) error {
	run, done, err := s.StartInit(ctx)
	if err != nil {
		return err
	}
	go func() {
		defer done()
		var gauge sync.WaitGroup
		gauge.Go(func() { s.gaugeLoop(run) })
		if !s.cfg.NoFire {
			s.fireLoop(run)
		}
		gauge.Wait()
	}()
	return nil
}

func (s *Service) gaugeLoop(ctx context.Context) {
	for {
		if n, err := s.store.PendingTimers(ctx); err == nil {
			s.metrics.pending.Set(float64(n))
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(s.cfg.PendingEvery):
		}
	}
}

// fireLoop fires what is due, then sleeps until the earliest pending timer
// is due, a schedule earlier than that notifies (LISTEN, any gateway) or
// signals (this one), or MaxSleep passes. Only a schedule due before the
// planned wake-up ends the sleep, so a steady stream of schedules does not
// keep every gateway's loop querying.
func (s *Service) fireLoop(ctx context.Context) {
	go s.listen(ctx)
	const minBackoff = 10 * time.Millisecond
	backoff := minBackoff
	for ctx.Err() == nil {
		n, err := s.fireOnce(ctx)
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			s.log.Warn().Err(err).Msg("timer fire failed; its timers stay pending")
			sleep(ctx, max(backoff, 50*time.Millisecond))
			backoff = min(2*backoff, 5*time.Second)
			continue
		}
		if n == s.cfg.BatchSize {
			backoff = minBackoff
			continue // more may be due now
		}
		wait, atMs, ok, err := s.store.NextTimerDue(ctx)
		if err != nil {
			if ctx.Err() == nil {
				s.log.Warn().Err(err).Msg("reading the next timer failed")
			}
			sleep(ctx, max(backoff, 50*time.Millisecond))
			backoff = min(2*backoff, 5*time.Second)
			continue
		}
		target := int64(math.MaxInt64) // fireAt that should end the sleep early
		switch {
		case !ok:
			wait = s.cfg.MaxSleep
		case wait == 0 && n == 0:
			// Due, yet none could be taken: another gateway's fire holds
			// them (SKIP LOCKED). Back off rather than spin; if that fire
			// rolls back, they are taken on a later turn.
			wait = backoff
			backoff = min(2*backoff, 250*time.Millisecond)
		case wait == 0:
			backoff = minBackoff
			continue
		default:
			backoff = minBackoff
			target = atMs
			wait = min(wait, s.cfg.MaxSleep)
		}
		s.sleepUntil(ctx, wait, target)
	}
}

// sleepUntil waits for d, or for a schedule due before target (Unix ms).
func (s *Service) sleepUntil(ctx context.Context, d time.Duration, target int64) {
	s.signal(Sleep{Planned: d})
	timer := time.NewTimer(d)
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
			s.signal(Sleep{Planned: d, Woken: "stopped"})
			return
		case <-timer.C:
			s.signal(Sleep{Planned: d, Woken: "timer"})
			return
		case <-s.wake.ch:
			if at, ok := s.wake.take(); ok && at < target {
				s.signal(Sleep{Planned: d, Woken: "schedule", For: at})
				return
			}
		}
	}
}

func (s *Service) signal(e Sleep) {
	if s.cfg.OnSleep != nil {
		s.cfg.OnSleep(e)
	}
}

// wakeup coalesces wake-up requests into the earliest fireAt asked for
// since the loop last looked, so none is lost however many arrive while
// the loop is busy firing.
type wakeup struct {
	mu       sync.Mutex
	earliest int64
	pending  bool
	ch       chan struct{} // one slot: "look at earliest"
}

func newWakeup() *wakeup { return &wakeup{ch: make(chan struct{}, 1)} }

func (w *wakeup) note(atMs int64) {
	w.mu.Lock()
	if !w.pending || atMs < w.earliest {
		w.earliest, w.pending = atMs, true
	}
	w.mu.Unlock()
	select {
	case w.ch <- struct{}{}:
	default:
	}
}

func (w *wakeup) take() (int64, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	at, ok := w.earliest, w.pending
	w.pending = false
	return at, ok
}

func (s *Service) fireOnce(ctx context.Context) (int, error) {
	start := time.Now()
	fired, err := s.store.FireDue(ctx, s.cfg.BatchSize, s.cfg.BeforeCommit)
	if err != nil {
		s.metrics.fireErrors.Inc()
		return 0, err
	}
	if len(fired) > 0 {
		if s.cfg.OnFired != nil {
			s.cfg.OnFired(fired)
		}
		s.metrics.fires.Add(float64(len(fired)))
		s.metrics.fireDuration.Observe(time.Since(start).Seconds())
		for _, f := range fired {
			// Both times are PostgreSQL's: no clock skew in the lag.
			s.metrics.lag.Observe(max(0, f.FiredAt.Sub(f.FireAt).Seconds()))
		}
	}
	return len(fired), nil
}

// listen forwards schedule notifications (their fireAt) to the loop,
// reconnecting as needed.
func (s *Service) listen(ctx context.Context) {
	backoff := 100 * time.Millisecond
	for ctx.Err() == nil {
		l, err := s.store.ListenTimers(ctx)
		if err != nil {
			sleep(ctx, backoff)
			backoff = min(2*backoff, 5*time.Second)
			continue
		}
		backoff = 100 * time.Millisecond
		s.wake.note(0) // notifications may have been missed while not listening
		for {
			at, err := l.Wait(ctx)
			if err != nil {
				if ctx.Err() == nil && !errors.Is(err, context.Canceled) {
					s.log.Warn().Err(err).Msg("timer notifications: reconnecting")
				}
				break
			}
			s.wake.note(at)
		}
		l.Close()
	}
}

func sleep(ctx context.Context, d time.Duration) {
	select {
	case <-ctx.Done():
	case <-time.After(d):
	}
}

type metrics struct {
	pending      prometheus.Gauge
	scheduled    prometheus.Counter
	existing     prometheus.Counter
	fires        prometheus.Counter
	fireErrors   prometheus.Counter
	fireDuration prometheus.Histogram
	lag          prometheus.Histogram
	cancels      *prometheus.CounterVec
}

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	m := &metrics{
		pending: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "queengate_timers_pending",
			Help: "Pending timers (all gateways), refreshed periodically.",
		}),
		scheduled: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "queengate_timers_scheduled_total",
			Help: "Timers created through this gateway.",
		}),
		existing: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "queengate_timers_existing_total",
			Help: "Schedules that found their transactionId already pending (retries): answered, nothing created.",
		}),
		fires: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "queengate_timers_fired_total",
			Help: "Timers fired (committed) by this gateway.",
		}),
		fireErrors: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "queengate_timers_fire_errors_total",
			Help: "Fire transactions that failed and rolled back (their timers stay pending).",
		}),
		fireDuration: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "queengate_timers_fire_duration_seconds",
			Help:    "Duration of a fire transaction that fired at least one timer.",
			Buckets: prometheus.ExponentialBuckets(0.0005, 2, 14),
		}),
		lag: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "queengate_timers_fire_lag_seconds",
			Help:    "Time from a timer's fireAt to its message's push, by PostgreSQL's clock.",
			Buckets: []float64{0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60},
		}),
		cancels: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "queengate_timers_cancels_total",
			Help: "Cancels by answer: cancelled, or absent (no longer pending).",
		}, []string{"answer"}),
	}
	if err := promreg.RegisterAll(reg, m.pending, m.scheduled, m.existing, m.fires, m.fireErrors, m.fireDuration, m.lag, m.cancels); err != nil {
		return nil, fmt.Errorf("timers: register metrics: %w", err)
	}
	return m, nil
}
