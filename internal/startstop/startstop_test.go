package startstop

import (
	"context"
	"errors"
	"sync"
	"testing"
)

// ticker is a service whose loop runs until its context ends.
type ticker struct {
	Base
	ran bool
}

func (t *ticker) Start(ctx context.Context) error {
	run, done, err := t.StartInit(ctx)
	if err != nil {
		return err
	}
	go func() {
		defer done()
		<-run.Done()
		t.ran = true
	}()
	return nil
}

func TestStopWaitsForTheServiceAndIsIdempotent(t *testing.T) {
	var s ticker
	s.Stop() // never started: nothing to wait for
	if err := s.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	<-s.Started()
	if err := s.Start(context.Background()); !errors.Is(err, ErrStarted) {
		t.Errorf("second Start: %v, want ErrStarted", err)
	}
	var wg sync.WaitGroup
	for range 3 {
		wg.Go(s.Stop)
	}
	wg.Wait()
	if !s.ran {
		t.Error("Stop returned before the service's goroutine finished")
	}
	<-s.Stopped()
}

func TestCancellingTheStartContextStopsTheService(t *testing.T) {
	var s ticker
	ctx, cancel := context.WithCancel(context.Background())
	if err := s.Start(ctx); err != nil {
		t.Fatal(err)
	}
	cancel()
	<-s.Stopped()
	s.Stop()
}

type failing struct{ Base }

func (f *failing) Start(context.Context) error { return errors.New("no") }

func TestStartAllStopsWhatStartedWhenOneFails(t *testing.T) {
	var a, b ticker
	_, err := StartAll(context.Background(), &a, &b, &failing{})
	if err == nil {
		t.Fatal("StartAll succeeded with a failing service")
	}
	for _, s := range []*ticker{&a, &b} {
		select {
		case <-s.Stopped():
		default:
			t.Error("a started service was left running")
		}
	}
	var c, d ticker
	stop, err := StartAll(context.Background(), &c, &d)
	if err != nil {
		t.Fatal(err)
	}
	stop()
	if !c.ran || !d.ran {
		t.Error("stop left a service running")
	}
}
