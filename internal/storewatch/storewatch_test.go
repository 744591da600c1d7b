package storewatch_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/queengate/queengate/internal/checkfor"
	"github.com/queengate/queengate/internal/storewatch"
)

// slowHeartbeat never answers in time, as on a saturated machine.
type slowHeartbeat struct{}

func (slowHeartbeat) Heartbeat(ctx context.Context) error {
	<-ctx.Done()
	return errors.New("heartbeat timed out")
}

// TestCommitsKeepABusyGatewayUp: heartbeats that time out do not mark
// PostgreSQL down while pushes keep committing; once commits stop too,
// it is down.
func TestCommitsKeepABusyGatewayUp(t *testing.T) {
	t.Parallel()
	var lastCommit atomic.Int64
	commit := func() { lastCommit.Store(time.Now().UnixNano()) }
	var changes atomic.Int32
	w := storewatch.New(slowHeartbeat{}, storewatch.Config{Every: 100 * time.Millisecond,
		LastCommit: func() time.Time { return time.Unix(0, lastCommit.Load()) },
		OnChange:   func(bool) { changes.Add(1) }})
	commit()
	stop := make(chan struct{})
	committing := make(chan struct{})
	go func() {
		defer close(committing)
		for {
			select {
			case <-stop:
				return
			case <-time.After(2 * time.Millisecond):
				commit()
			}
		}
	}()
	if err := w.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(w.Stop)
	// Ten checks while commits flow (every 2 ms; a check needs one within
	// its 100 ms): none may call PostgreSQL down.
	checkfor.Check(t, 10*time.Second, checkfor.Cond("ten checks", func() bool { return w.Checks() >= 10 }))
	if !w.Up() || changes.Load() != 0 {
		t.Errorf("up %v after %d changes while pushes committed; want up, unchanged", w.Up(), changes.Load())
	}
	close(stop)
	<-committing
	checkfor.Check(t, 10*time.Second, checkfor.Cond("the watch to see PostgreSQL down once commits stop", func() bool { return !w.Up() }))
}
