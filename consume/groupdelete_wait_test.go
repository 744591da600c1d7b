package consume_test

import (
	"context"
	"testing"
	"time"

	queengate "github.com/queengate/queengate"
	"github.com/queengate/queengate/consume"
	"github.com/queengate/queengate/gateway"
	"github.com/queengate/queengate/internal/checkfor"
	"github.com/queengate/queengate/internal/pgtest"
)

// TestAWaitingPopOfADeletedGroupStartsItAfresh: a pop long-polling for
// a group that has consumed everything is woken by the group's delete
// (not by a push, nor by a later look: revalidation is off here), finds
// the group gone, and pops the group made afresh, from the earliest
// message.
func TestAWaitingPopOfADeletedGroupStartsItAfresh(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	c := consume.New(pgtest.Store(t, e.PGURL))
	c.SetRevalidate(time.Hour)
	e.StartGateway(gatewayOpts{Gateway: gateway.Config{Endpoints: []gateway.EndpointSet{c}}})
	e.fill(t, 2, "p1")
	client := e.queenClient(t)
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	popAndAck(t, client, e.Queue, "p1", 2)
	waited := make(chan queengate.PopAnswer, 1)
	go func() {
		a, err := client.Pop(ctx, e.Queue, "p1", queengate.PopRequest{Group: "g", Consumer: "c", Max: 1, LeaseMs: 60000, WaitMs: 20000})
		if err != nil {
			t.Error(err)
		}
		waited <- a
	}()
	checkfor.Check(t, 30*time.Second, checkfor.Cond("the pop sleeps", func() bool { return c.Sleeping(e.Queue) == 1 }))
	if _, err := client.DeleteGroup(ctx, e.Queue, "g"); err != nil {
		t.Fatal(err)
	}
	if a := <-waited; len(a.Messages) != 1 || a.Messages[0].TransactionID != "p1-0" {
		t.Fatalf("the waiting pop answered %+v; want p1-0, from the group made afresh", a)
	}
}

// popAndAck pops n messages of partition for group g and completes them.
func popAndAck(t *testing.T, c *queengate.Client, queue, partition string, n int) queengate.PopAnswer {
	t.Helper()
	a, err := c.Pop(t.Context(), queue, partition, queengate.PopRequest{Group: "g", Max: 10})
	if err != nil || len(a.Messages) != n {
		t.Fatalf("pop: %+v, %v; want %d messages", a, err, n)
	}
	if _, err := c.Ack(t.Context(), queue, partition, queengate.AckRequest{Group: "g", LeaseID: a.LeaseID, Items: completeAll(a)}); err != nil {
		t.Fatal(err)
	}
	return a
}
