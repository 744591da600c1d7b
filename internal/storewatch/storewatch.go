// Package storewatch watches whether PostgreSQL answers: a heartbeat on a
// connection outside the pool, with recent commits as proof of life, so
// that a gateway cut off from its store stops taking pushes and hands
// its routing shards to others.
package storewatch

import (
	"context"
	"sync/atomic"
	"time"

	"github.com/queengate/queengate/internal/startstop"
)

// Heartbeater tells whether PostgreSQL answers; *pgstore.Store is one (on
// a connection of its own, outside the pool).
type Heartbeater interface {
	Heartbeat(ctx context.Context) error
}

// Config tunes a Watch.
type Config struct {
	// Every is the time between checks, and each check's timeout;
	// default 500 ms.
	Every time.Duration
	// DownAfter is how many checks in a row must fail before PostgreSQL
	// counts as down; default 2 (one lost packet is not an outage).
	DownAfter int
	// OnChange is called, from the watch's goroutine, whenever Up changes.
	OnChange func(up bool)
	// LastCommit, when set, is when the gateway last had a write
	// answered by PostgreSQL: proof of life as good as a heartbeat. A
	// heartbeat slow only because the machine is saturated then does not
	// take a busy gateway out of service.
	LastCommit func() time.Time
}

// Watch checks PostgreSQL every interval and remembers whether it
// answered, so that routing can tell the fleet this gateway cannot reach
// the store (routing.Config.Ready), and ingest can fail fast instead of
// letting producers wait out a frozen server (OnChange).
type Watch struct {
	startstop.Base
	store    Heartbeater
	cfg      Config
	up       atomic.Bool
	checks   atomic.Int64
	failures int
}

// New watches store; it counts as up until checks say otherwise.
func New(store Heartbeater, cfg Config) *Watch {
	if cfg.Every <= 0 {
		cfg.Every = 500 * time.Millisecond
	}
	if cfg.DownAfter <= 0 {
		cfg.DownAfter = 2
	}
	w := &Watch{store: store, cfg: cfg}
	w.up.Store(true)
	return w
}

// Start checks once, then keeps watching until Stop (or until ctx ends).
func (w *Watch) Start(ctx context.Context) error {
	run, done, err := w.StartInit(ctx)
	if err != nil {
		return err
	}
	w.check()
	go func() {
		defer done()
		tick := time.NewTicker(w.cfg.Every)
		defer tick.Stop()
		for {
			select {
			case <-run.Done():
				return
			case <-tick.C:
				w.check()
			}
		}
	}()
	return nil
}

func (w *Watch) check() {
	defer w.checks.Add(1)
	start := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), w.cfg.Every)
	defer cancel()
	if w.store.Heartbeat(ctx) == nil || w.cfg.LastCommit != nil && w.cfg.LastCommit().After(start.Add(-w.cfg.Every)) {
		w.failures = 0
		w.set(true)
		return
	}
	w.failures++
	if w.failures >= w.cfg.DownAfter {
		w.set(false)
	}
}

func (w *Watch) set(up bool) {
	if w.up.Swap(up) != up && w.cfg.OnChange != nil {
		w.cfg.OnChange(up)
	}
}

// Up reports whether PostgreSQL answered lately.
func (w *Watch) Up() bool { return w.up.Load() }

// Checks is how many checks have been made.
func (w *Watch) Checks() int64 { return w.checks.Load() }
