package gateway

import (
	"context"
	"sync"
	"sync/atomic"
	"time"
)

// StoreWatch pings PostgreSQL every interval and remembers whether it
// answered, so that routing can tell the fleet this gateway cannot reach
// the store (RoutingConfig.Ready) without a round trip per heartbeat.
type StoreWatch struct {
	store    StoreHealth
	every    time.Duration
	up       atomic.Bool
	stop     chan struct{}
	done     chan struct{}
	stopOnce sync.Once
}

// NewStoreWatch watches store every interval (default 1 s).
func NewStoreWatch(store StoreHealth, every time.Duration) *StoreWatch {
	if every <= 0 {
		every = time.Second
	}
	return &StoreWatch{store: store, every: every, stop: make(chan struct{}), done: make(chan struct{})}
}

// Start pings once, then keeps watching until Stop.
func (w *StoreWatch) Start(context.Context) error {
	w.ping()
	go func() {
		defer close(w.done)
		tick := time.NewTicker(w.every)
		defer tick.Stop()
		for {
			select {
			case <-w.stop:
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

// Stop ends the watch; it is safe to call twice.
func (w *StoreWatch) Stop() {
	w.stopOnce.Do(func() {
		close(w.stop)
		<-w.done
	})
}
