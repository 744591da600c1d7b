package consume

import (
	"context"
	"testing"
	"time"

	"github.com/queengate/queengate/internal/checkfor"
	"github.com/queengate/queengate/model"
)

// foundNothing is a store whose every pop finds nothing; a waiting pop's
// end at shutdown does not depend on what PostgreSQL holds.
type foundNothing struct{ Store }

func (foundNothing) Pop(context.Context, model.PopQuery) (model.PopResult, error) {
	return model.PopResult{}, nil
}

// A pop waiting when the gateway begins to stop answers at once, with
// nothing, instead of holding the stop for its drain timeout and
// answering after the gateway has gone. Its wait here is an hour: without
// the drain it would outlast the test.
func TestDrainingAnswersWaitingPops(t *testing.T) {
	t.Parallel()
	c := New(foundNothing{})
	c.maxPayload = func() int64 { return 1 << 20 }
	draining := make(chan struct{})
	c.draining = draining
	answered := make(chan any)
	go func() {
		pr := model.PopQuery{Group: model.Group{ID: 1, Name: "g"}, Max: 10}
		a, werr := c.longPoll(context.Background(), "q", pr, time.Hour, true, false, &popAnswer{c: c, group: pr.Group})
		if werr != nil {
			t.Error(werr)
		}
		answered <- a
	}()
	checkfor.Check(t, time.Minute, checkfor.Cond("the pop to wait", func() bool { return c.Sleeping("q") == 1 }))
	close(draining)
	if a := <-answered; a == nil {
		t.Fatal("no answer")
	}
}
