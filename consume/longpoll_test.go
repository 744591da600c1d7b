package consume_test

import (
	"fmt"
	"math/rand/v2"
	"sync/atomic"
	"testing"
	"time"

	queengate "github.com/queengate/queengate"
	"github.com/queengate/queengate/consume"
	"github.com/queengate/queengate/gateway"
	"github.com/queengate/queengate/internal/checkfor"
	"github.com/queengate/queengate/internal/pgtest"
	"github.com/queengate/queengate/pgstore"
)

// pollEnv is a gateway serving consumers over a store of its own, whose
// statements are counted (one connection acquired per statement).
type pollEnv struct {
	*testEnv
	gw        *gateway.Gateway
	consumers *consume.Consumers
	store     *pgstore.Store
	client    *queengate.Client
}

func newPollEnv(t *testing.T, checkEvery time.Duration) *pollEnv {
	t.Helper()
	e := newEnv(t)
	store := pgtest.Store(t, e.PGURL)
	consumers := consume.New(store)
	consumers.SetCheckEvery(checkEvery)
	// Pops still waiting when the test ends are answered as the gateway
	// stops: it never needs its drain timeout for them.
	gw, _ := e.StartGateway(gatewayOpts{Gateway: gateway.Config{Endpoints: []gateway.EndpointSet{consumers}, DrainTimeout: time.Hour}})
	return &pollEnv{testEnv: e, gw: gw, consumers: consumers, store: store, client: e.queenClient(t)}
}

func (p *pollEnv) statements() int64 { return p.store.Pool().Stat().AcquireCount() }

// caughtUp creates group g by consuming and acknowledging one message of
// partition "p": a pop of the group then finds nothing.
func (p *pollEnv) caughtUp(t *testing.T, groups ...string) {
	t.Helper()
	p.fill(t, 1, "p")
	for _, g := range groups {
		a, err := p.client.Pop(t.Context(), p.Queue, "", queengate.PopRequest{Group: g, Max: 10})
		if err != nil || len(a.Messages) != 1 {
			t.Fatalf("pop of %s: %+v, %v", g, a, err)
		}
		if _, err := p.client.Ack(t.Context(), p.Queue, a.Partition, queengate.AckRequest{Group: g, LeaseID: a.LeaseID, Items: completeAll(a)}); err != nil {
			t.Fatal(err)
		}
	}
}

// hold pops n messages of group g under the longest lease.
func (p *pollEnv) hold(t *testing.T, n int) queengate.PopAnswer {
	t.Helper()
	a, err := p.client.Pop(t.Context(), p.Queue, "", queengate.PopRequest{Group: "g", Max: n, LeaseMs: queengate.MaxLeaseMs})
	if err != nil || len(a.Messages) != n {
		t.Fatalf("pop of %d: %+v, %v", n, a, err)
	}
	return a
}

// longPolls starts n pops of group waiting as long as a pop may; each
// answer goes to got.
func (p *pollEnv) longPolls(t *testing.T, n int, group string, got chan<- queengate.PopAnswer) {
	t.Helper()
	for range n {
		go func() {
			a, err := p.client.Pop(t.Context(), p.Queue, "", queengate.PopRequest{Group: group, Max: 10, WaitMs: queengate.MaxWaitMs})
			if err != nil && t.Context().Err() == nil {
				t.Error(err)
			}
			got <- a
		}()
	}
}

// asleep waits until n pops of the queue wait with none popping.
func (p *pollEnv) asleep(t *testing.T, n int) {
	t.Helper()
	checkfor.Check(t, 60*time.Second, checkfor.Cond(fmt.Sprintf("%d pops to wait, none popping", n), func() bool {
		return p.consumers.Sleeping(p.Queue) == n
	}))
}

// Waiting pops cost PostgreSQL nothing while nothing arrives: one
// statement per check of the gateway, however many wait, and more pops
// joining a list known empty wait without popping.
func TestIdleLongPollsCostOneStatementPerCheck(t *testing.T) {
	t.Parallel()
	p := newPollEnv(t, 10*time.Millisecond)
	p.consumers.SetRevalidate(time.Hour) // only the checks may ask PostgreSQL
	p.caughtUp(t, "g")
	const waiting = 200
	got := make(chan queengate.PopAnswer, 2*waiting)
	p.longPolls(t, waiting, "g", got)
	p.asleep(t, waiting)
	onlyChecks := func(what string, during func()) {
		t.Helper()
		s0, c0 := p.statements(), p.consumers.Checks()
		during()
		c1 := p.consumers.Checks()
		s1 := p.statements()
		// A check may be counted on either side of a read: one more.
		if s1-s0 > c1-c0+1 {
			t.Errorf("%s: %d statements over %d checks, want one a check", what, s1-s0, c1-c0)
		}
	}
	twentyChecks := func() {
		c0 := p.consumers.Checks()
		checkfor.Check(t, 60*time.Second, checkfor.Cond("20 checks", func() bool { return p.consumers.Checks() >= c0+20 }))
	}
	onlyChecks(fmt.Sprintf("%d pops waiting", waiting), twentyChecks)
	onlyChecks(fmt.Sprintf("%d more pops joining a list known empty", waiting), func() {
		p.longPolls(t, waiting, "g", got)
		p.asleep(t, 2*waiting)
	})
	onlyChecks(fmt.Sprintf("%d pops waiting", 2*waiting), twentyChecks)
	noAnswer(t, got)
}

// noAnswer fails the test if a pop answered on ch.
func noAnswer(t *testing.T, ch <-chan queengate.PopAnswer) {
	t.Helper()
	select {
	case a := <-ch:
		t.Fatalf("a pop answered: %+v", a)
	default:
	}
}

// One message pushed to a queue that many pops of two groups wait on
// costs a few pops per group, not one per waiting pop, and goes to the
// pop of each group that waited longest.
func TestOneCommitWakesAFewOfManyWaitingPops(t *testing.T) {
	t.Parallel()
	p := newPollEnv(t, time.Hour) // no checks: only the commit wakes
	p.caughtUp(t, "g", "h")
	const waiting = 50
	first := map[string]chan queengate.PopAnswer{"g": make(chan queengate.PopAnswer, 1), "h": make(chan queengate.PopAnswer, 1)}
	rest := make(chan queengate.PopAnswer, 2*waiting)
	p.longPolls(t, 1, "g", first["g"])
	p.longPolls(t, 1, "h", first["h"])
	p.asleep(t, 2)
	p.longPolls(t, waiting-1, "g", rest)
	p.longPolls(t, waiting-1, "h", rest)
	p.asleep(t, 2*waiting)
	s0 := p.statements()
	p.fill(t, 1, "q")
	for group, ch := range first {
		a := <-ch
		if len(a.Messages) != 1 || a.Messages[0].TransactionID != "q-0" {
			t.Errorf("group %s's pop waiting longest got %+v, want q-0", group, a.Messages)
		}
	}
	p.asleep(t, 2*(waiting-1))
	// Per group: the pop woken, and the two it lets in after it got a
	// message (there might have been more).
	if n := p.statements() - s0; n > 2*3 {
		t.Errorf("one message for %d waiting pops of 2 groups cost %d statements, want at most 3 a group", 2*waiting, n)
	}
	noAnswer(t, rest)
}

// A lease that runs out wakes a pop waiting on its group: the gateway's
// check finds it (the lease is backdated in PostgreSQL, not waited for).
func TestARunOutLeaseWakesAWaitingPop(t *testing.T) {
	t.Parallel()
	p := newPollEnv(t, 10*time.Millisecond)
	p.consumers.SetRevalidate(time.Hour) // only the check may wake it
	p.fill(t, 2, "p")
	held := p.hold(t, 2)
	got := make(chan queengate.PopAnswer, 1)
	p.longPolls(t, 1, "g", got)
	p.asleep(t, 1)
	c0 := p.consumers.Checks()
	checkfor.Check(t, 60*time.Second, checkfor.Cond("a check while the lease runs", func() bool { return p.consumers.Checks() > c0 }))
	if p.consumers.Sleeping(p.Queue) != 1 {
		t.Fatal("a check woke the pop while the lease ran")
	}
	if _, err := p.store.Pool().Exec(t.Context(),
		"UPDATE queen.consumer_cursors SET lease_until = now() - interval '1 second' WHERE lease_id = $1", held.LeaseID); err != nil {
		t.Fatal(err)
	}
	a := <-got
	if len(a.Messages) != 2 || a.Partition != held.Partition || a.LeaseID == held.LeaseID {
		t.Fatalf("the waiting pop got %+v, want the run-out lease's 2 messages under a new lease", a)
	}
}

// A list known empty is woken by whatever makes a pop find something:
// a push, a release, an ack that fails a message, an ack ending a lease
// with messages behind it, a seek of the group (each announced on NATS, as any gateway's
// would be). Each case: the group's only partition is leased, pops wait
// (the second one joins without popping), the event happens, and a
// waiting pop gets the messages.
func TestAListKnownEmptyIsWokenByWhatMakesWork(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name  string
		event func(t *testing.T, p *pollEnv, held queengate.PopAnswer)
	}{
		{"push", func(t *testing.T, p *pollEnv, _ queengate.PopAnswer) { p.fill(t, 1, "q") }},
		{"release", func(t *testing.T, p *pollEnv, held queengate.PopAnswer) {
			if _, err := p.client.Release(t.Context(), p.Queue, held.Partition, queengate.LeaseRequest{Group: "g", LeaseID: held.LeaseID}); err != nil {
				t.Fatal(err)
			}
		}},
		{"failed", func(t *testing.T, p *pollEnv, held queengate.PopAnswer) {
			items := completeAll(held)
			items[0].Status = queengate.AckFailed
			if _, err := p.client.Ack(t.Context(), p.Queue, held.Partition, queengate.AckRequest{Group: "g", LeaseID: held.LeaseID, Items: items}); err != nil {
				t.Fatal(err)
			}
		}},
		{"seek", func(t *testing.T, p *pollEnv, _ queengate.PopAnswer) {
			back := int64(0) // ends the lease, and makes its message work again
			if _, err := p.client.SeekGroup(t.Context(), p.Queue, "g", queengate.GroupSeekRequest{Offset: &back}); err != nil {
				t.Fatal(err)
			}
		}},
		{"acked with more behind", func(t *testing.T, p *pollEnv, held queengate.PopAnswer) {
			if _, err := p.client.Ack(t.Context(), p.Queue, held.Partition, queengate.AckRequest{Group: "g", LeaseID: held.LeaseID, Items: completeAll(held)}); err != nil {
				t.Fatal(err)
			}
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			p := newPollEnv(t, time.Hour) // no checks: only announcements wake
			p.consumers.SetRevalidate(time.Hour)
			p.fill(t, 3, "p")
			// One message leased, so that "acked with more behind" leaves two.
			held := p.hold(t, 1)
			got := make(chan queengate.PopAnswer, 2)
			p.longPolls(t, 1, "g", got)
			p.asleep(t, 1)
			s0 := p.statements()
			p.longPolls(t, 1, "g", got)
			p.asleep(t, 2)
			if n := p.statements() - s0; n != 0 {
				t.Fatalf("a pop joining a list known empty ran %d statements", n)
			}
			tc.event(t, p, held)
			if a := <-got; len(a.Messages) == 0 {
				t.Fatalf("after the %s a pop got nothing", tc.name)
			}
		})
	}
}

// Waiting pops that skip PostgreSQL agree with popping: after each of a
// random run of pushes, acks, failures, releases and leases run out, once
// the gateway is quiet, pops sleep only while a pop would find nothing
// (asked of PostgreSQL directly). Neither the revalidation nor per-pop
// rechecks stand in for a wake: only announcements and the run-out check.
func TestWaitingPopsSleepOnlyWhileAPopWouldFindNothing(t *testing.T) {
	t.Parallel()
	p := newPollEnv(t, 10*time.Millisecond)
	p.consumers.SetRevalidate(time.Hour)
	rng := rand.New(rand.NewPCG(23, 5))
	t.Logf("seed 23/5")
	const pollers = 3
	var started, returned atomic.Int64
	answers := make(chan queengate.PopAnswer, 100)
	poll := func() {
		started.Add(1)
		go func() {
			a, err := p.client.Pop(t.Context(), p.Queue, "", queengate.PopRequest{Group: "g", Max: 2, WaitMs: queengate.MaxWaitMs, LeaseMs: queengate.MaxLeaseMs})
			switch {
			case t.Context().Err() != nil:
			case err != nil:
				t.Error(err)
			case len(a.Messages) == 0:
				// Each step is over long before a wait: it ran out
				// while something was there to pop.
				t.Errorf("a pop waited %d ms for nothing", queengate.MaxWaitMs)
			}
			returned.Add(1)
			answers <- a
		}()
	}
	poppable := func() bool {
		var ok bool
		if err := p.store.Pool().QueryRow(t.Context(), `
			SELECT EXISTS (SELECT 1 FROM queen.log_partitions lp JOIN queen.queues q ON q.id = lp.queue_id
			  LEFT JOIN queen.consumer_groups g ON g.queue_id = q.id AND g.name = 'g'
			  LEFT JOIN queen.consumer_cursors cc ON cc.group_id = g.id AND cc.partition_id = lp.id
			 WHERE q.name = $1 AND coalesce(cc.next_offset, 0) <= lp.last_offset
			   AND (cc.lease_id IS NULL OR cc.lease_until <= now()))`, p.Queue).Scan(&ok); err != nil {
			t.Fatal(err)
		}
		return ok
	}
	var held []queengate.PopAnswer
	p.fill(t, 1, "first") // the queue exists
	pushed := 0
	for step := range 40 {
		for started.Load()-returned.Load() < pollers {
			poll()
		}
		switch k := rng.IntN(6); {
		case k == 0 || len(held) == 0:
			p.fill(t, 1+rng.IntN(2), fmt.Sprintf("p%d-%d", rng.IntN(3), pushed))
			pushed++
		default:
			a := held[0]
			held = held[1:]
			items := completeAll(a)
			switch k {
			case 1, 2:
			case 3:
				items[0].Status = queengate.AckFailed
			case 4:
				if _, err := p.client.Release(t.Context(), p.Queue, a.Partition, queengate.LeaseRequest{Group: "g", LeaseID: a.LeaseID}); err != nil {
					t.Fatal(err)
				}
				items = nil
			case 5:
				if _, err := p.store.Pool().Exec(t.Context(),
					"UPDATE queen.consumer_cursors SET lease_until = now() - interval '1 second' WHERE lease_id = $1", a.LeaseID); err != nil {
					t.Fatal(err)
				}
				items = nil
			}
			if items != nil {
				if _, err := p.client.Ack(t.Context(), p.Queue, a.Partition, queengate.AckRequest{Group: "g", LeaseID: a.LeaseID, Items: items}); err != nil {
					t.Fatal(err)
				}
			}
		}
		checkfor.Check(t, 60*time.Second, checkfor.Cond(fmt.Sprintf("step %d: the gateway quiet, pops asleep only with nothing to pop", step), func() bool {
			sleeping := int64(p.consumers.Sleeping(p.Queue))
			return sleeping+returned.Load() == started.Load() && (sleeping == 0 || !poppable())
		}))
		for len(answers) > 0 {
			if a := <-answers; len(a.Messages) > 0 {
				held = append(held, a)
			}
		}
	}
}
