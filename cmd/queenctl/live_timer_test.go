package main

import (
	"testing"
	"time"

	queengate "github.com/queengate/queengate"
	"github.com/queengate/queengate/internal/checkfor"
	"github.com/queengate/queengate/internal/ctl/queueopt"
)

// TestLiveTimers schedules, lists and cancels timers on a live gateway:
// schedule and cancel over NATS, list over HTTP and over NATS.
func TestLiveTimers(t *testing.T) {
	t.Parallel()
	g := startGateway(t)
	trs := transports(g)
	n := []string{"--nats", g.natsURL}

	// listed reports whether list (over tr) shows the timer.
	listed := func(tr transport, id string) bool {
		t.Helper()
		r := ctl(t, "", flags(tr.admin, "timer", "list", "--queue", "reminders", "-o", "json")...)
		r.expect(t, exitOK)
		for _, x := range jsonOf[queengate.TimersAnswer](t, r).Timers {
			if x.TimerID == id {
				return true
			}
		}
		return false
	}
	// lastOffset is the partition's allocator, -1 when nothing is stored.
	lastOffset := func(partition string) int64 {
		t.Helper()
		r := ctl(t, "", flags(trs[0].admin, "get", "queue", "reminders", "-o", "json")...)
		if r.code != exitOK {
			return -1 // the queue is not there yet
		}
		for _, p := range jsonOf[queueopt.Config](t, r).Partitions {
			if p.Partition == partition {
				return p.LastOffset
			}
		}
		return -1
	}
	eventually := func(what string, cond func() bool) {
		t.Helper()
		checkfor.Check(t, 15*time.Second, checkfor.Cond(what, cond))
	}
	schedule := func(args ...string) queengate.TimerScheduled {
		t.Helper()
		r := ctl(t, "", flags(n, append([]string{"timer", "schedule"}, append(args, "-o", "json")...)...)...)
		r.expect(t, exitOK)
		a := jsonOf[queengate.TimerScheduled](t, r)
		if a.Status != "scheduled" || a.TimerID == "" || a.FireAt.IsZero() {
			t.Fatalf("schedule answered %+v", a)
		}
		return a
	}

	// --in 0s fires at once: the message is stored, with the
	// transactionId fixed at schedule time, and the timer is gone.
	now := schedule("reminders", "now", `{"remind":1}`, "--in", "0s", "--txn-id", "now-1")
	if now.TransactionID != "now-1" {
		t.Errorf("schedule answered transactionId %q, want now-1", now.TransactionID)
	}
	eventually("the --in 0s timer's message stored", func() bool { return lastOffset("now") == 0 })
	for _, tr := range trs {
		if listed(tr, now.TimerID) {
			t.Errorf("list over %s still shows the fired timer %s", tr.name, now.TimerID)
		}
	}
	ctl(t, "", flags(n, "push", "reminders", "now", "again", "--txn-id", "now-1")...).expect(t, exitOK, "1 duplicate")
	ctl(t, "", flags(n, "timer", "cancel", now.TimerID)...).expect(t, exitOK, "absent")

	// --in 1h: pending, listed over both transports; cancel, then cancel
	// again: absent.
	later := schedule("reminders", "later", "hello", "--in", "1h")
	if later.TransactionID == "" {
		t.Errorf("no transactionId minted: %+v", later)
	}
	if d := time.Until(later.FireAt); d < 59*time.Minute || d > 61*time.Minute {
		t.Errorf("fireAt %s is %v away, want about 1h", later.FireAt, d)
	}
	for _, tr := range trs {
		if !listed(tr, later.TimerID) {
			t.Errorf("list over %s does not show the pending timer %s", tr.name, later.TimerID)
		}
		r := ctl(t, "", flags(tr.admin, "timer", "list")...)
		r.expect(t, exitOK, "TIMER ID", "QUEUE", "PARTITION", "TRANSACTION ID", "FIRE AT", later.TimerID, later.TransactionID)
		ctl(t, "", flags(tr.admin, "timer", "list", "--queue", "nothing-here")...).expect(t, exitOK, "no pending timers in queue nothing-here")
	}
	r := ctl(t, "", flags(n, "timer", "cancel", later.TimerID)...)
	if r.expect(t, exitOK); r.stdout != "cancelled\n" {
		t.Errorf("cancel of a pending timer printed %q, want cancelled", r.stdout)
	}
	r = ctl(t, "", flags(n, "timer", "cancel", later.TimerID)...)
	if r.expect(t, exitOK); r.stdout != "absent\n" {
		t.Errorf("second cancel printed %q, want absent", r.stdout)
	}
	for _, tr := range trs {
		if listed(tr, later.TimerID) {
			t.Errorf("list over %s still shows the cancelled timer", tr.name)
		}
	}
	if off := lastOffset("later"); off != -1 {
		t.Errorf("the cancelled timer stored a message: lastOffset %d", off)
	}

	// --at in the past fires at once.
	past := schedule("reminders", "past", "--at", time.Now().Add(-time.Hour).UTC().Format(time.RFC3339))
	eventually("the past --at timer's message stored", func() bool { return lastOffset("past") == 0 })
	if listed(trs[1], past.TimerID) {
		t.Errorf("list still shows the fired timer %s", past.TimerID)
	}

	// A timerId that is not one: the gateway's 400, exit 1.
	ctl(t, "", flags(n, "timer", "cancel", "not-a-uuid")...).expect(t, exitGateway, "timer cancel: gateway answered 400:", "timerId")
	// A delay the gateway refuses (queenctl cannot know its limit).
	ctl(t, "", flags(n, "timer", "schedule", "reminders", "p", "--in", "36500d")...).expect(t, exitGateway, "timer schedule: gateway answered 400:", "delayMs")
	// schedule and cancel need NATS; list takes either.
	ctl(t, "", "--http", g.httpURL, "timer", "schedule", "reminders", "p", "--in", "1s").expect(t, exitUsage, "timer schedule needs NATS")
	ctl(t, "", "--http", g.httpURL, "timer", "cancel", later.TimerID).expect(t, exitUsage, "timer cancel needs NATS")
	ctl(t, "", flags(n, "--prefix", "elsewhere", "timer", "cancel", later.TimerID)...).expect(t, exitUnreachable, "no gateway answers on elsewhere.timer.cancel")
}
