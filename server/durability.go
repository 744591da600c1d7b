package server

import (
	"bytes"
	"context"
	"encoding/json"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"

	queengate "github.com/queengate/queengate"
	"github.com/queengate/queengate/internal/startstop"
	"github.com/queengate/queengate/pgstore"
)

// durabilityEvery is how often the gateway reads again what an
// acknowledgement means: settings change with a reload, standbys come
// and go.
const durabilityEvery = 30 * time.Second

// durabilityReader reads what the store's commits are acknowledged with;
// *pgstore.Store is one.
type durabilityReader interface {
	Durability(ctx context.Context) (pgstore.Durability, error)
}

// durabilityWatch reads, at start, every durabilityEvery and when asked
// (after PostgreSQL is reachable again: perhaps another server), what an
// acknowledgement means on the store, for /status, /readyz and the
// metrics, and logs it at start and on each change.
type durabilityWatch struct {
	startstop.Base
	store   durabilityReader
	log     zerolog.Logger
	current atomic.Pointer[queengate.DurabilityStat]
	kick    chan struct{}
}

func newDurabilityWatch(store durabilityReader, log zerolog.Logger, reg prometheus.Registerer) *durabilityWatch {
	w := &durabilityWatch{store: store, log: log, kick: make(chan struct{}, 1)}
	for _, level := range pgstore.DurabilityLevels {
		reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name:        "queengate_durability_level",
			Help:        "1 for what an acknowledged push survives on this gateway's PostgreSQL (none: a crash of the server can lose it; local-disk: on its disk; standby-written, standby-disk, standby-applied: confirmed by the synchronous standbys), 0 for the other levels; all 0 until read.",
			ConstLabels: prometheus.Labels{"level": string(level)},
		}, func() float64 { return w.is(level) }))
	}
	reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "queengate_durability_commits_waiting",
		Help: "1 while commits wait for synchronous standbys that are not streaming (no push is answered until one connects; one that times out is kept on the primary alone), else 0.",
	}, func() float64 {
		if d := w.Current(); d != nil && d.CommitsWait != nil && *d.CommitsWait {
			return 1
		}
		return 0
	}))
	return w
}

func (w *durabilityWatch) is(level pgstore.DurabilityLevel) float64 {
	if d := w.Current(); d != nil && d.Level == string(level) {
		return 1
	}
	return 0
}

// Current is the last reading; nil before the first.
func (w *durabilityWatch) Current() *queengate.DurabilityStat { return w.current.Load() }

// Refresh asks for a reading now, without waiting for it.
func (w *durabilityWatch) Refresh() {
	select {
	case w.kick <- struct{}{}:
	default:
	}
}

// Start reads once, then keeps reading until Stop (or until ctx ends).
func (w *durabilityWatch) Start(ctx context.Context) error {
	run, done, err := w.StartInit(ctx)
	if err != nil {
		return err
	}
	w.read(run)
	go func() {
		defer done()
		tick := time.NewTicker(durabilityEvery)
		defer tick.Stop()
		for {
			select {
			case <-run.Done():
				return
			case <-tick.C:
			case <-w.kick:
			}
			w.read(run)
		}
	}()
	return nil
}

func (w *durabilityWatch) read(ctx context.Context) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	d, err := w.store.Durability(ctx)
	if err != nil {
		// The last reading stands: the store watch says when PostgreSQL
		// is unreachable.
		w.log.Warn().Err(err).Msg("cannot read what an acknowledgement means on PostgreSQL")
		return
	}
	// Logged before stored, so that whoever sees the reading can see its
	// line; only the watch's goroutine stores.
	now := durabilityStat(d, time.Now())
	if prev := w.current.Load(); prev == nil || !sameDurability(*prev, *now) {
		w.logChange(now)
	}
	w.current.Store(now)
}

// durabilityMessage is the log message of a durability reading.
const durabilityMessage = "what an acknowledged push survives"

// logChange says what an acknowledgement means now: a warning when
// acknowledged messages could be lost or commits wait.
func (w *durabilityWatch) logChange(d *queengate.DurabilityStat) {
	e := w.log.Info()
	if d.Warning != "" {
		e = w.log.Warn().Str("warning", d.Warning)
	}
	e = e.Str("durability", d.Level).Str("synchronous_commit", d.SynchronousCommit).Bool("fsync", d.Fsync).
		Str("synchronous_standby_names", d.SynchronousStandbyNames)
	if d.Standbys != nil {
		e = e.Int("standbys", len(d.Standbys))
	}
	e.Msg(durabilityMessage)
}

// sameDurability compares readings but for when they were made.
func sameDurability(a, b queengate.DurabilityStat) bool {
	a.CheckedAt, b.CheckedAt = time.Time{}, time.Time{}
	ja, errA := json.Marshal(a)
	jb, errB := json.Marshal(b)
	return errA == nil && errB == nil && bytes.Equal(ja, jb)
}

// durabilityStat is the answer's form of a reading.
func durabilityStat(d pgstore.Durability, at time.Time) *queengate.DurabilityStat {
	out := &queengate.DurabilityStat{Level: string(d.Level()), SynchronousCommit: d.SynchronousCommit, Fsync: d.Fsync,
		SynchronousStandbyNames: d.SynchronousStandbyNames, InRecovery: d.InRecovery, Warning: d.Warning(), CheckedAt: at.UTC()}
	if d.Standbys != nil {
		out.Standbys = make([]queengate.StandbyStat, len(d.Standbys))
		for i, sb := range d.Standbys {
			out.Standbys[i] = queengate.StandbyStat{Name: sb.Name, SyncState: sb.SyncState}
		}
	}
	if wait, known := d.CommitsWait(); known {
		out.CommitsWait = &wait
	}
	return out
}
