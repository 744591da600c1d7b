// Package retention runs retention passes in the background: the
// transactionIds of frames past each queue's window are retired and
// segments past its retentionSeconds deleted by the store
// (pgstore.Store.Retain), a step at a time.
package retention

import (
	"context"
	"math/rand/v2"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"

	"github.com/queengate/queengate/internal/promreg"
	"github.com/queengate/queengate/internal/startstop"
	"github.com/queengate/queengate/model"
)

// Store runs retention passes (pgstore.Store.Retain).
type Store interface {
	Retain(ctx context.Context, o model.RetainOptions) (model.RetainStats, error)
}

// Runner runs retention passes in the background, every interval.
// Every gateway runs one: passes are safe to overlap (pgstore.Store.Retain),
// and a jitter keeps several gateways from starting theirs in lockstep.
// Stop ends the loop, cancelling a pass in progress: its completed steps
// stay committed, the rest waits for the next pass.
type Runner struct {
	startstop.Base
	store    Store
	interval time.Duration
	opts     model.RetainOptions
	log      zerolog.Logger
	// idle are the groups the last pass found idle past their queue's
	// groupIdleSeconds: each is logged when it joins, once.
	idle map[int64]bool

	passes   *prometheus.CounterVec
	deleted  *prometheus.CounterVec
	skipped  prometheus.Counter
	duration prometheus.Histogram
}

// NewRunner builds the runner; reg may be nil.
func NewRunner(store Store, interval time.Duration, opts model.RetainOptions, log zerolog.Logger, reg prometheus.Registerer) (*Runner, error) {
	r := &Runner{store: store, interval: interval, opts: opts, log: log, idle: map[int64]bool{},
		passes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "queengate_retention_passes_total",
			Help: "Retention passes, by result (ok, error).",
		}, []string{"result"}),
		deleted: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "queengate_retention_deleted_rows_total",
			Help: "Frames retention retired: log_txns, frames whose transactionIds left the window (their log_txns rows deleted, or their hashes beside the data no longer read); log_segments, frames deleted past retentionSeconds.",
		}, []string{"table"}),
		skipped: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "queengate_retention_skipped_partitions_total",
			Help: "Partitions with work skipped because another transaction held them (done by a later pass).",
		}),
		duration: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "queengate_retention_pass_duration_seconds",
			Help:    "Duration of a retention pass.",
			Buckets: prometheus.ExponentialBuckets(0.001, 4, 10),
		}),
	}
	if err := promreg.RegisterAll(reg, r.passes, r.deleted, r.skipped, r.duration); err != nil {
		return nil, err
	}
	return r, nil
}

// Start runs passes until Stop (or until ctx ends).
func (r *Runner) Start(ctx context.Context) error {
	run, done, err := r.StartInit(ctx)
	if err != nil {
		return err
	}
	go func() {
		defer done()
		r.loop(run)
	}()
	return nil
}

func (r *Runner) loop(ctx context.Context) {
	// The first pass comes after a random part of the interval: gateways
	// started together spread out.
	wait := time.Duration(rand.Int64N(int64(r.interval)))
	for {
		select {
		case <-ctx.Done():
			return
		case <-time.After(wait):
		}
		r.Pass(ctx)
		wait = r.interval
	}
}

// Pass runs one retention pass now and records it.
func (r *Runner) Pass(ctx context.Context) {
	start := time.Now()
	st, err := r.store.Retain(ctx, r.opts)
	r.duration.Observe(time.Since(start).Seconds())
	r.deleted.WithLabelValues("log_txns").Add(float64(st.TxnsDeleted))
	r.deleted.WithLabelValues("log_segments").Add(float64(st.SegmentsDeleted))
	r.skipped.Add(float64(st.Skipped))
	if err != nil {
		if ctx.Err() == nil {
			r.passes.WithLabelValues("error").Inc()
			r.log.Warn().Err(err).Msg("retention pass failed; the next one retries")
		}
		return
	}
	r.passes.WithLabelValues("ok").Inc()
	r.logIdle(st.IdleGroups)
	if st.TxnsDeleted+st.SegmentsDeleted > 0 || st.Skipped > 0 {
		r.log.Info().Int64("log_txns_deleted", st.TxnsDeleted).Int64("segments_deleted", st.SegmentsDeleted).
			Int("partitions_skipped", st.Skipped).Dur("took_ms", time.Since(start)).Msg("retention pass")
	}
}

// logIdle logs each group that became idle past its queue's
// groupIdleSeconds since the last pass: retention stops waiting for it,
// never silently. A group active again and idle later is logged again.
func (r *Runner) logIdle(groups []model.IdleGroup) {
	now := make(map[int64]bool, len(groups))
	for _, g := range groups {
		now[g.ID] = true
		if !r.idle[g.ID] {
			r.log.Warn().Str("queue", g.Queue).Str("group", g.Group).Time("active_at", g.ActiveAt).
				Msg("consumer group idle past its queue's groupIdleSeconds: retention no longer waits for it")
		}
	}
	r.idle = now
}
