package gateway

import (
	"context"
	"math/rand/v2"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"

	"github.com/queengate/queengate/pgstore"
)

// RetentionStore runs retention passes (pgstore.Store.Retain).
type RetentionStore interface {
	Retain(ctx context.Context, o pgstore.RetainOptions) (pgstore.RetainStats, error)
}

// Retention runs retention passes in the background, every Interval.
// Every gateway runs one: passes are safe to overlap (pgstore.Store.Retain),
// and a jitter keeps several gateways from starting theirs in lockstep.
type Retention struct {
	store    RetentionStore
	interval time.Duration
	opts     pgstore.RetainOptions
	log      zerolog.Logger

	passes   *prometheus.CounterVec
	deleted  *prometheus.CounterVec
	skipped  prometheus.Counter
	duration prometheus.Histogram

	cancel context.CancelFunc
	done   chan struct{}
}

// NewRetention builds the runner; reg may be nil.
func NewRetention(store RetentionStore, interval time.Duration, opts pgstore.RetainOptions, log zerolog.Logger, reg prometheus.Registerer) (*Retention, error) {
	r := &Retention{store: store, interval: interval, opts: opts, log: log,
		passes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "queengate_retention_passes_total",
			Help: "Retention passes, by result (ok, error).",
		}, []string{"result"}),
		deleted: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "queengate_retention_deleted_rows_total",
			Help: "Rows deleted by retention: log_txns (past the window) and segments (past retentionSeconds).",
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
		done: make(chan struct{}),
	}
	if reg != nil {
		for _, c := range []prometheus.Collector{r.passes, r.deleted, r.skipped, r.duration} {
			if err := reg.Register(c); err != nil {
				return nil, err
			}
		}
	}
	return r, nil
}

// Start runs passes until Stop.
func (r *Retention) Start(context.Context) error {
	ctx, cancel := context.WithCancel(context.Background())
	r.cancel = cancel
	go r.loop(ctx)
	return nil
}

// Stop ends the loop, cancelling a pass in progress (its completed steps
// stay committed; the rest waits for the next start).
func (r *Retention) Stop() {
	if r.cancel == nil {
		return
	}
	r.cancel()
	<-r.done
}

func (r *Retention) loop(ctx context.Context) {
	defer close(r.done)
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
func (r *Retention) Pass(ctx context.Context) {
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
	if st.TxnsDeleted+st.SegmentsDeleted > 0 || st.Skipped > 0 {
		r.log.Info().Int64("log_txns_deleted", st.TxnsDeleted).Int64("segments_deleted", st.SegmentsDeleted).
			Int("partitions_skipped", st.Skipped).Dur("took_ms", time.Since(start)).Msg("retention pass")
	}
}
