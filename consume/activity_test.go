package consume_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/rs/zerolog"

	queengate "github.com/queengate/queengate"
	"github.com/queengate/queengate/consume"
	"github.com/queengate/queengate/gateway"
	"github.com/queengate/queengate/internal/checkfor"
	"github.com/queengate/queengate/internal/pgtest"
	"github.com/queengate/queengate/model"
)

// Group activity (docs/protocol.md, "Idle groups and retention"): a
// group that pops, even finding nothing, is not idle; one that stops is,
// after its queue's groupIdleSeconds.

// groupIdle is the queues' groupIdleSeconds here: short, with room for
// a poll, a flush or two late on a loaded machine (at 2 s, a poller of
// every 700 ms was once listed idle 2404 ms under a race-detector suite).
const groupIdle = 4 * time.Second

// activityEnv is a gateway serving consumers with its ActivityFlusher
// running, over a database of its own: its retention passes touch no
// other test's queues.
type activityEnv struct {
	*testEnv
	flusher *consume.ActivityFlusher
	client  *queengate.Client
}

// newActivityEnv starts the gateway; its queue keeps what is not consumed
// (retainUntil consumed, retentionSeconds 1) and lets groups idle for
// groupIdle stop holding it.
func newActivityEnv(t *testing.T) *activityEnv {
	t.Helper()
	e := newEnv(t)
	e.PGURL = pgtest.NewDB(t)
	e.Store = pgtest.Store(t, e.PGURL)
	until, one, idle := model.RetainUntilConsumed, 1, int(groupIdle/time.Second)
	if _, _, err := e.Store.Configure(t.Context(), e.Queue, model.OptionsPatch{GroupIdleSeconds: &idle, RetentionSeconds: &one,
		RetainUntil: &until}, false); err != nil {
		t.Fatal(err)
	}
	consumers := consume.New(pgtest.Store(t, e.PGURL))
	e.StartGateway(gatewayOpts{Gateway: gateway.Config{Endpoints: []gateway.EndpointSet{consumers}, DrainTimeout: time.Hour}})
	f := consumers.ActivityFlusher(zerolog.New(zerolog.NewTestWriter(t)).Level(zerolog.WarnLevel))
	if err := f.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(f.Stop)
	return &activityEnv{testEnv: e, flusher: f, client: e.queenClient(t)}
}

// poll pops group's messages of the queue, waiting up to wait; it must
// find nothing.
func (a *activityEnv) poll(t *testing.T, group string, wait time.Duration) {
	t.Helper()
	ans, err := a.client.Pop(t.Context(), a.Queue, "", queengate.PopRequest{Group: group, WaitMs: wait.Milliseconds()})
	if err != nil || len(ans.Messages) != 0 {
		t.Fatalf("pop of %s: %+v, %v; want nothing", group, ans, err)
	}
}

// group is group's line of the groups answer.
func (a *activityEnv) group(t *testing.T, group string) queengate.GroupView {
	t.Helper()
	ans, err := a.client.Groups(t.Context(), a.Queue)
	if err != nil {
		t.Fatal(err)
	}
	i := slices.IndexFunc(ans.Groups, func(v queengate.GroupView) bool { return v.Group == group })
	if i < 0 {
		t.Fatalf("groups answer %+v has no %s", ans, group)
	}
	return ans.Groups[i]
}

// active fails unless group is listed active, holding retention, and
// no retention pass finds it idle.
func (a *activityEnv) active(t *testing.T, group string, after time.Duration) {
	t.Helper()
	if v := a.group(t, group); !v.HoldsRetention || v.IdleMs >= groupIdle.Milliseconds() {
		t.Fatalf("after %s popping, %s is listed idle %d ms, holdsRetention %v; want under %d ms, holding",
			after.Round(time.Millisecond), group, v.IdleMs, v.HoldsRetention, groupIdle.Milliseconds())
	}
	idle, err := a.Store.IdleGroups(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if len(idle) != 0 {
		t.Fatalf("after %s popping, idle groups %+v; want none", after.Round(time.Millisecond), idle)
	}
}

// flushed waits until the flusher has flushed twice more: what was noted
// before has reached PostgreSQL.
func (a *activityEnv) flushed(t *testing.T) {
	t.Helper()
	n := a.flusher.Flushes()
	checkfor.Check(t, 30*time.Second, checkfor.Cond("two flushes of the activity", func() bool { return a.flusher.Flushes() >= n+2 }))
}

// delayed gives group's partition p one message it failed with a delay
// of an hour, stored for an hour already (past retentionSeconds): only
// the group holds it.
func (a *activityEnv) delayed(t *testing.T, group string) {
	t.Helper()
	ctx := t.Context()
	a.Push(t, a.Subject("p"), msgs("m-0"))
	got, err := a.client.Pop(ctx, a.Queue, "", queengate.PopRequest{Group: group})
	if err != nil || len(got.Messages) != 1 {
		t.Fatalf("pop: %+v, %v", got, err)
	}
	ack, err := a.client.Ack(ctx, a.Queue, got.Partition, queengate.AckRequest{Group: group, LeaseID: got.LeaseID, Items: []queengate.AckItem{
		{TransactionID: "m-0", Status: queengate.AckFailed, Error: "later", DelayMs: time.Hour.Milliseconds()}}})
	if err != nil || !ack.LeaseEnded {
		t.Fatalf("ack: %+v, %v", ack, err)
	}
	if _, err := a.Store.Pool().Exec(ctx, `UPDATE queen.log_segments SET created_at = created_at - interval '1 hour'`); err != nil {
		t.Fatal(err)
	}
}

// delayOver ends the delays, as if their time had come.
func (a *activityEnv) delayOver(t *testing.T) {
	t.Helper()
	if _, err := a.Store.Pool().Exec(t.Context(), `UPDATE queen.consumer_cursors SET delayed_until = now() - interval '1 second'
		WHERE delayed_until IS NOT NULL`); err != nil {
		t.Fatal(err)
	}
}

// retain runs a retention pass.
func (a *activityEnv) retain(t *testing.T) {
	t.Helper()
	if _, err := a.Store.Retain(t.Context(), model.DefaultRetainOptions()); err != nil {
		t.Fatal(err)
	}
}

// A group polling a caught-up queue — long polls answered empty, and
// pops that wait for nothing — is not idle: however long it goes on,
// past its queue's groupIdleSeconds, the groups answer lists it idle
// less than that and holding retention, and retention finds no group
// idle. (A pop that finds nothing writes no cursor.)
func TestAGroupPollingACaughtUpQueueIsNotIdle(t *testing.T) {
	t.Parallel()
	a := newActivityEnv(t)
	ctx := t.Context()
	a.Push(t, a.Subject("p"), msgs("m-0"))
	got, err := a.client.Pop(ctx, a.Queue, "", queengate.PopRequest{Group: "watcher"})
	if err != nil || len(got.Messages) != 1 {
		t.Fatalf("pop: %+v, %v", got, err)
	}
	if _, err := a.client.Ack(ctx, a.Queue, got.Partition, queengate.AckRequest{Group: "watcher", LeaseID: got.LeaseID, Items: completeAll(got)}); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	for time.Since(start) < 3*groupIdle {
		a.poll(t, "watcher", 700*time.Millisecond)
		a.active(t, "watcher", time.Since(start))
		a.poll(t, "watcher", 0)
		a.flushed(t)
		a.active(t, "watcher", time.Since(start))
	}
}

// A group whose partition a failure's delay holds for longer than
// groupIdleSeconds, polling meanwhile (its pops find nothing), holds
// retention: the message it has not consumed outlives every pass, and
// it gets it when the delay is over.
func TestAGroupWaitingOutADelayKeepsItsMessages(t *testing.T) {
	t.Parallel()
	a := newActivityEnv(t)
	a.delayed(t, "patient")
	start := time.Now()
	for time.Since(start) < 2*groupIdle {
		a.poll(t, "patient", 700*time.Millisecond)
		a.retain(t)
		if n := a.StoredCount(t); n != 1 {
			t.Fatalf("after %s waiting out the delay, polling, the queue stores %d messages; want the one it has not consumed",
				time.Since(start).Round(time.Millisecond), n)
		}
		a.active(t, "patient", time.Since(start))
	}
	a.delayOver(t)
	got, err := a.client.Pop(t.Context(), a.Queue, "", queengate.PopRequest{Group: "patient"})
	if err != nil || len(got.Messages) != 1 || got.Messages[0].TransactionID != "m-0" || got.Messages[0].Attempts != 2 {
		t.Fatalf("the pop after the delay: %+v, %v; want m-0 at its second attempt", got, err)
	}
}

// A group that stops polling is idle once groupIdleSeconds have passed
// since its last pop (a long poll's end), not before: listed not holding
// retention, and retention deletes what only it held; popping again, it
// holds again, the deleted message (once its delay is over) counted
// deletedUnconsumed.
func TestAGroupThatStopsIsIdleAfterGroupIdleSeconds(t *testing.T) {
	t.Parallel()
	a := newActivityEnv(t)
	a.delayed(t, "quitter")
	a.poll(t, "quitter", 700*time.Millisecond)
	a.flushed(t)
	a.active(t, "quitter", 0)
	checkfor.Check(t, 30*time.Second, func() error {
		if v := a.group(t, "quitter"); v.HoldsRetention || v.IdleMs < groupIdle.Milliseconds() {
			return fmt.Errorf("quitter is listed idle %d ms, holdsRetention %v", v.IdleMs, v.HoldsRetention)
		}
		return nil
	})
	a.retain(t)
	if n := a.StoredCount(t); n != 0 {
		t.Fatalf("the pass after quitter went idle left %d messages; want none", n)
	}
	a.delayOver(t)
	a.poll(t, "quitter", 0)
	a.flushed(t)
	if v := a.group(t, "quitter"); v.DeletedUnconsumed != 1 || !v.HoldsRetention {
		t.Fatalf("quitter popping again: deletedUnconsumed %d, holdsRetention %v; want 1, holding again", v.DeletedUnconsumed, v.HoldsRetention)
	}
}

// Waiting pops keep their groups active at one statement a flush for all
// of them: 200 pops of two groups waiting cost, beside the checks, one
// statement a tick of the flusher, and both groups are written.
func TestWaitingPopsCostOneActivityWriteAFlush(t *testing.T) {
	t.Parallel()
	p := newPollEnv(t, time.Hour) // no checks: only the flusher asks PostgreSQL
	p.consumers.SetRevalidate(time.Hour)
	p.caughtUp(t, "g", "h")
	if _, err := p.store.Pool().Exec(t.Context(), `UPDATE queen.consumer_groups SET created_at = now() - interval '1 hour', active_at = NULL
		WHERE queue_id = (SELECT id FROM queen.queues WHERE name = $1)`, p.Queue); err != nil {
		t.Fatal(err)
	}
	if _, err := p.store.Pool().Exec(t.Context(), `UPDATE queen.consumer_cursors SET leased_at = now() - interval '1 hour'
		WHERE group_id IN (SELECT g.id FROM queen.consumer_groups g JOIN queen.queues q ON q.id = g.queue_id WHERE q.name = $1)`, p.Queue); err != nil {
		t.Fatal(err)
	}
	const waiting = 100
	got := make(chan queengate.PopAnswer, 2*waiting)
	p.longPolls(t, waiting, "g", got)
	p.longPolls(t, waiting, "h", got)
	p.asleep(t, 2*waiting)
	f := p.consumers.ActivityFlusher(zerolog.New(zerolog.NewTestWriter(t)).Level(zerolog.WarnLevel))
	s0, f0 := p.statements(), f.Flushes()
	if err := f.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(f.Stop)
	checkfor.Check(t, 60*time.Second, checkfor.Cond("20 flushes", func() bool { return f.Flushes() >= f0+20 }))
	s1, f1 := p.statements(), f.Flushes()
	// A flush may be counted on either side of a read: one more.
	if s1-s0 > f1-f0+1 {
		t.Errorf("%d pops of 2 groups waiting: %d statements over %d flushes, want one a flush", 2*waiting, s1-s0, f1-f0)
	}
	q, err := p.store.QueueConfig(t.Context(), p.Queue)
	if err != nil {
		t.Fatal(err)
	}
	act, err := p.store.GroupActivity(t.Context(), q.ID)
	if err != nil || len(act) != 2 {
		t.Fatalf("activity %+v, %v; want 2 groups", act, err)
	}
	for _, a := range act {
		if a.IdleFor > time.Minute {
			t.Errorf("group %s, its pops waiting, is idle %s", a.Group, a.IdleFor)
		}
	}
	noAnswer(t, got)
}
