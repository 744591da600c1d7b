package consume_test

import (
	"context"
	"encoding/json"
	"strings"
	"sync"
	"testing"

	queengate "github.com/queengate/queengate"
	"github.com/queengate/queengate/ingest"
	"github.com/queengate/queengate/model"
)

func (e *testEnv) setMaxAckPending(t *testing.T, queue string, n int) {
	t.Helper()
	if _, _, err := e.Store.Configure(context.Background(), queue, model.OptionsPatch{MaxAckPending: &n}, false); err != nil {
		t.Fatal(err)
	}
}

// Pops of two consumers at once, none acknowledging: each consumer holds
// at most its pops' maxAckPending, the group at most its queue's, and
// both limits are reached (a pop under the limit delivers up to it).
func TestMaxAckPendingHoldsUnderConcurrentPops(t *testing.T) {
	t.Parallel()
	e, c := consuming(t, 5, "p1", "p2", "p3", "p4", "p5", "p6", "p7", "p8")
	e.setMaxAckPending(t, e.Queue, 12)
	var mu sync.Mutex
	held := map[string]int{}
	var pops sync.WaitGroup
	for i := range 6 {
		consumer := []string{"a", "b"}[i%2]
		pops.Go(func() {
			for range 4 {
				a, err := c.Pop(t.Context(), e.Queue, "", queengate.PopRequest{Group: "g", Consumer: consumer, Max: 10, MaxAckPending: 7})
				if err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				held[consumer] += len(a.Messages)
				mu.Unlock()
			}
		})
	}
	pops.Wait()
	if held["a"] > 7 || held["b"] > 7 || held["a"]+held["b"] != 12 {
		t.Errorf("delivered %v: want at most 7 to each consumer and 12 to the group", held)
	}
}

// What a consumer holds at its limit is freed by an ack (of part of a
// lease), a release and a lease's expiry, each letting the next pop
// deliver exactly what it freed.
func TestMaxAckPendingFreesOnAckReleaseAndExpiry(t *testing.T) {
	t.Parallel()
	e, c := consuming(t, 3, "p1", "p2", "p3", "p4")
	ctx := t.Context()
	pop := func(want int) queengate.PopAnswer {
		t.Helper()
		a, err := c.Pop(ctx, e.Queue, "", queengate.PopRequest{Group: "g", Consumer: "slow", Max: 10, MaxAckPending: 3})
		if err != nil || len(a.Messages) != want || (want == 0) != (a.LeaseID == "") {
			t.Fatalf("pop: %d messages (lease %q), %v; want %d", len(a.Messages), a.LeaseID, err, want)
		}
		return a
	}
	first := pop(3)
	pop(0)
	ack, err := c.Ack(ctx, e.Queue, first.Partition, queengate.AckRequest{Group: "g", LeaseID: first.LeaseID,
		Items: completeAll(first)[:1]})
	if err != nil || ack.LeaseEnded {
		t.Fatalf("ack of one: %+v, %v", ack, err)
	}
	second := pop(1)
	pop(0)
	if _, err := c.Release(ctx, e.Queue, second.Partition, queengate.LeaseRequest{Group: "g", LeaseID: second.LeaseID}); err != nil {
		t.Fatal(err)
	}
	pop(1)
	pop(0)
	if _, err := e.Store.Pool().Exec(ctx,
		"UPDATE queen.consumer_cursors SET lease_until = now() - interval '1 second' WHERE lease_id = $1", first.LeaseID); err != nil {
		t.Fatal(err)
	}
	pop(2)
	pop(0)
	// Another consumer of the group is not bound by this one's limit.
	if a, err := c.Pop(ctx, e.Queue, "", queengate.PopRequest{Group: "g", Consumer: "fast", Max: 10}); err != nil || len(a.Messages) == 0 {
		t.Fatalf("a pop of another consumer: %+v, %v", a, err)
	}
}

// wokenAtMaxAckPending holds a long poll at its consumer's limit (two
// messages held of two), lets settle settle part of the held lease, and
// answers what the woken pop got.
func wokenAtMaxAckPending(t *testing.T, settle func(c *queengate.Client, queue string, first queengate.PopAnswer) error) queengate.PopAnswer {
	t.Helper()
	e, consumers := wakeableOnlyByAnnouncements(t)
	e.fill(t, 2, "p1", "p2")
	c := e.queenClient(t)
	req := queengate.PopRequest{Group: "g", Consumer: "c", Max: 10, MaxAckPending: 2}
	first, err := c.Pop(t.Context(), e.Queue, "", req)
	if err != nil || len(first.Messages) != 2 {
		t.Fatalf("pop: %+v, %v", first, err)
	}
	got := waitingPop(t, c, consumers, e.Queue, "", req)
	if err := settle(c, e.Queue, first); err != nil {
		t.Fatal(err)
	}
	return woken(t, got)
}

// A long poll held at its limit sleeps until an ack settles part of a
// counted lease; the ack's announcement wakes it, and it delivers what
// the ack freed.
func TestALongPollHeldAtMaxAckPendingIsWokenByAnAck(t *testing.T) {
	t.Parallel()
	a := wokenAtMaxAckPending(t, func(c *queengate.Client, queue string, first queengate.PopAnswer) error {
		_, err := c.Ack(t.Context(), queue, first.Partition, queengate.AckRequest{Group: "g", LeaseID: first.LeaseID,
			Items: completeAll(first)[:1]})
		return err
	})
	if len(a.Messages) != 1 {
		t.Fatalf("the woken pop got %v, want the one message the ack made room for", txnIDs(a))
	}
}

// An ack-and-push that settles part of a counted lease wakes a long poll
// held at its limit, as an ack does, and it delivers what was freed.
func TestALongPollHeldAtMaxAckPendingIsWokenByAnAckAndPush(t *testing.T) {
	t.Parallel()
	a := wokenAtMaxAckPending(t, func(c *queengate.Client, queue string, first queengate.PopAnswer) error {
		settled := queengate.PopAnswer{Partition: first.Partition, Messages: first.Messages[:1]}
		_, err := c.AckAndPush(t.Context(), queue, first.Partition, queengate.AckPushRequest{Group: "g", LeaseID: first.LeaseID,
			Items: completeAll(settled), Push: derivedOf(settled, queue+"-out")})
		return err
	})
	if len(a.Messages) != 1 {
		t.Fatalf("the woken pop got %v, want the one message the ack-and-push made room for", txnIDs(a))
	}
}

// maxAckPending out of range, of the wrong type, or without a consumer
// is a 400 naming the fix; the refused pops lease nothing.
func TestMaxAckPendingBadInput(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	g := e.startOpsGateway("", ingest.Config{})
	e.fill(t, 1, "p")
	c := e.queenClient(t)
	for _, bad := range []struct{ body, says string }{
		{`{"group":"g","consumer":"c","maxAckPending":0}`, `"maxAckPending" is 0: from 1 to 1000000`},
		{`{"group":"g","consumer":"c","maxAckPending":-1}`, `"maxAckPending" is -1`},
		{`{"group":"g","consumer":"c","maxAckPending":1000001}`, `"maxAckPending" is 1000001`},
		{`{"group":"g","consumer":"c","maxAckPending":"5"}`, `"maxAckPending" must be a whole number`},
		{`{"group":"g","maxAckPending":5}`, `name it in "consumer"`},
	} {
		var eb queengate.ErrorBody
		msg := e.Request(t, e.Prefix+".consume.pop."+e.Queue, bad.body)
		if err := json.Unmarshal(msg.Data, &eb); err != nil || eb.Error.Code != 400 || !strings.Contains(eb.Error.Text, bad.says) {
			t.Errorf("pop %s: %s; want a 400 saying %q", bad.body, msg.Data, bad.says)
		}
	}
	for _, opts := range []string{`-1`, `1000001`, `"5"`} {
		body := `{"queue":"` + e.Queue + `","options":{"maxAckPending":` + opts + `}}`
		if status, answer := g.ViaNATS(t, "configure", "", body); status != 400 || !strings.Contains(string(answer), `\"maxAckPending\"`) {
			t.Errorf("configure %s: %d %s; want a 400 naming maxAckPending", body, status, answer)
		}
	}
	if cfg, err := e.Store.QueueConfig(t.Context(), e.Queue); err != nil || cfg.MaxAckPending != 0 {
		t.Errorf("after refused configures: %+v, %v; want maxAckPending 0", cfg, err)
	}
	if a, err := c.Pop(t.Context(), e.Queue, "p", queengate.PopRequest{Group: "g", Max: 10}); err != nil || len(a.Messages) != 1 {
		t.Errorf("the pop after the refused ones: %+v, %v; want the message, never leased", a, err)
	}
}
