package gateway

import (
	"context"
	"sync/atomic"
	"time"

	"github.com/queengate/queengate/internal/startstop"
)

// StoreWatch pings PostgreSQL every interval and remembers whether it
// answered, so that routing can tell the fleet this gateway cannot reach
// the store (RoutingConfig.Ready) without a round trip per heartbeat.
type StoreWatch struct {
	startstop.Base
	store StoreHealth
	every time.Duration
	up    atomic.Bool
}

// NewStoreWatch watches store every interval (default 1 s).
func NewStoreWatch(store StoreHealth, every time.Duration) *StoreWatch {
	if every <= 0 {
		every = time.Second
	}
	return &StoreWatch{store: store, every: every}
}

// Start pings once, then keeps watching until Stop (or until ctx ends).
func (w *StoreWatch) Start(ctx context.Context) error {
	run, done, err := w.StartInit(ctx)
	if err != nil {
		return err
	}
	w.ping()
	go func() {
		defer done()
		tick := time.NewTicker(w.every)
		defer tick.Stop()
		for {
			select {
			case <-run.Done():
				return
			case <-tick.C:
				w.ping()
			}
		}
	}()
	return nil
}

func (w *StoreWatch) ping() {
	ctx, cancel := context.WithTimeout(context.Background(), w.every)
	defer cancel()
	w.up.Store(w.store.Ping(ctx) == nil)
}

// Up reports whether the last ping was answered.
func (w *StoreWatch) Up() bool { return w.up.Load() }
