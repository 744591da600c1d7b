// Package startstop gives the daemon's background services one lifecycle.
// A service embeds Base: Start calls StartInit, runs its goroutines under
// the context it returns and calls the done function when the last one
// has finished; Stop cancels that context and waits. Both are safe to
// call more than once and from several goroutines, and Started and
// Stopped are signals tests wait on instead of sleeping.
package startstop

import (
	"context"
	"errors"
	"sync"
)

// Service is what the daemon starts in order and stops in reverse.
type Service interface {
	Start(ctx context.Context) error
	Stop()
}

// ErrStarted is returned by StartInit for a service started before.
var ErrStarted = errors.New("already started")

// Base is the lifecycle a service embeds. The zero value is ready to use.
type Base struct {
	mu       sync.Mutex
	begun    bool
	cancel   context.CancelFunc
	started  chan struct{}
	stopped  chan struct{}
	doneOnce sync.Once
}

func (b *Base) init() {
	if b.started == nil {
		b.started, b.stopped = make(chan struct{}), make(chan struct{})
	}
}

// StartInit begins a start. It returns the service's context, cancelled
// by Stop or when ctx is, and done, which the service calls once all it
// started has finished. A second start is refused with ErrStarted.
func (b *Base) StartInit(ctx context.Context) (run context.Context, done func(), err error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.init()
	if b.begun {
		return nil, nil, ErrStarted
	}
	b.begun = true
	run, b.cancel = context.WithCancel(ctx)
	close(b.started)
	return run, func() { b.doneOnce.Do(func() { close(b.stopped) }) }, nil
}

// Stop cancels the service's context and waits until it is done. It does
// nothing for a service never started.
func (b *Base) Stop() {
	b.mu.Lock()
	b.init()
	begun, cancel := b.begun, b.cancel
	b.mu.Unlock()
	if !begun {
		return
	}
	cancel()
	<-b.stopped
}

// Started is closed once the service has started.
func (b *Base) Started() <-chan struct{} {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.init()
	return b.started
}

// Stopped is closed once the service has finished.
func (b *Base) Stopped() <-chan struct{} {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.init()
	return b.stopped
}

// StartAll starts services in order; if one fails, those started are
// stopped in reverse and its error returned. stop stops them all, in
// reverse order.
func StartAll(ctx context.Context, services ...Service) (stop func(), err error) {
	stopAll := func(started []Service) {
		for i := len(started) - 1; i >= 0; i-- {
			started[i].Stop()
		}
	}
	for i, s := range services {
		if err := s.Start(ctx); err != nil {
			stopAll(services[:i])
			return func() {}, err
		}
	}
	return func() { stopAll(services) }, nil
}
