package consume_test

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	queengate "github.com/queengate/queengate"
	"github.com/queengate/queengate/ingest"
	"github.com/queengate/queengate/internal/checkfor"
	"github.com/queengate/queengate/model"
)

// Delayed redelivery over NATS (docs/protocol.md, "Delayed redelivery").
// Time moves by backdating the cursors' delays, never by sleeping.

// elapseDelays ends every delay of the queue's groups now, as if their
// time had come.
func (p *pollEnv) elapseDelays(t *testing.T) {
	t.Helper()
	if _, err := p.store.Pool().Exec(t.Context(),
		`UPDATE queen.consumer_cursors cc SET delayed_until = now() - interval '1 second'
		   FROM queen.consumer_groups g JOIN queen.queues q ON q.id = g.queue_id
		  WHERE g.id = cc.group_id AND q.name = $1 AND cc.delayed_until IS NOT NULL`, p.Queue); err != nil {
		t.Fatal(err)
	}
}

// A message failed with delayMs is not delivered to its group while the
// delay runs — to a pop of the partition, or to a long poll, which the
// gateway's checks leave asleep — while another group gets it at once;
// when the delay runs out, the gateway's check wakes the waiting pop,
// which gets it.
func TestAFailureWithADelayWakesALongPollWhenDue(t *testing.T) {
	t.Parallel()
	p := newPollEnv(t, 10*time.Millisecond)
	p.consumers.SetRevalidate(time.Hour) // only the check may wake it
	p.fill(t, 2, "p")
	ctx := t.Context()
	held := p.hold(t, 2)
	ack, err := p.client.Ack(ctx, p.Queue, "p", queengate.AckRequest{Group: "g", LeaseID: held.LeaseID, Items: []queengate.AckItem{
		{TransactionID: "p-0", Status: queengate.AckFailed, Error: "later", DelayMs: time.Hour.Milliseconds()},
		{TransactionID: "p-1", Status: queengate.AckCompleted}}})
	if err != nil || !ack.LeaseEnded || ack.Items[0].Result != "acked" {
		t.Fatalf("ack: %+v, %v", ack, err)
	}
	if a, err := p.client.Pop(ctx, p.Queue, "p", queengate.PopRequest{Group: "g"}); err != nil || len(a.Messages) != 0 {
		t.Fatalf("a pop of the partition while the delay runs: %+v, %v", a, err)
	}
	if a, err := p.client.Pop(ctx, p.Queue, "", queengate.PopRequest{Group: "other"}); err != nil || len(a.Messages) != 2 {
		t.Fatalf("another group's pop: %+v, %v; want both messages at once", a, err)
	}
	got := make(chan queengate.PopAnswer, 1)
	p.longPolls(t, 1, "g", got)
	p.asleep(t, 1)
	// The checks while the delay runs wake nothing: no pop, only their
	// own statement each (one more: a check may straddle a read).
	s0, c0 := p.statements(), p.consumers.Checks()
	checkfor.Check(t, 60*time.Second, checkfor.Cond("5 checks while the delay runs", func() bool { return p.consumers.Checks() >= c0+5 }))
	if s, c := p.statements()-s0, p.consumers.Checks()-c0; s > c+1 || p.consumers.Sleeping(p.Queue) != 1 {
		t.Fatalf("while the delay ran: %d statements over %d checks, %d pops asleep; want one a check and the pop asleep",
			s, c, p.consumers.Sleeping(p.Queue))
	}
	p.elapseDelays(t)
	checkfor.Check(t, 60*time.Second, checkfor.Cond("the waiting pop answered", func() bool { return len(got) > 0 }))
	a := <-got
	if len(a.Messages) != 1 || a.Messages[0].TransactionID != "p-0" || a.Messages[0].Attempts != 2 || a.Messages[0].LastError != "later" {
		t.Fatalf("the waiting pop got %+v, want p-0 at its second attempt", a)
	}
}

// A queue's retry options are set, read back and emptied over the
// operator API, on both faces.
func TestTheQueueRetryOptionsAreConfigured(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	g := e.startOpsGateway("", ingest.Config{})
	configure := func(via string, req queengate.ConfigureRequest) queengate.QueueOptions {
		t.Helper()
		body, err := json.Marshal(req)
		if err != nil {
			t.Fatal(err)
		}
		var status int
		var answer []byte
		if via == "http" {
			status, answer = g.ViaHTTP(t, "POST", "/configure", "", string(body))
		} else {
			status, answer = g.ViaNATS(t, "configure", "", string(body))
		}
		var conf queengate.ConfigureAnswer
		if status != 200 || json.Unmarshal(answer, &conf) != nil {
			t.Fatalf("%s configure %s: %d %s", via, body, status, answer)
		}
		return conf.Options
	}
	for _, via := range []string{"http", "nats"} {
		o := configure(via, queengate.ConfigureRequest{Queue: e.Queue, Options: map[string]int64{"retryDelayMs": 5000},
			RetryBackoffMs: []int{1000, 60000}})
		if o.RetryDelayMs != 5000 || !slices.Equal(o.RetryBackoffMs, []int{1000, 60000}) {
			t.Fatalf("%s: set: %+v", via, o)
		}
		o = configure(via, queengate.ConfigureRequest{Queue: e.Queue, Options: map[string]int64{"maxAttempts": 4}})
		if o.RetryDelayMs != 5000 || !slices.Equal(o.RetryBackoffMs, []int{1000, 60000}) {
			t.Fatalf("%s: a merge naming neither changed them: %+v", via, o)
		}
		o = configure(via, queengate.ConfigureRequest{Queue: e.Queue, RetryBackoffMs: []int{}, Options: map[string]int64{"retryDelayMs": 0}})
		if o.RetryDelayMs != 0 || o.RetryBackoffMs == nil || len(o.RetryBackoffMs) != 0 {
			t.Fatalf("%s: emptied: %+v", via, o)
		}
	}
}

// A failure that asks for no delay waits the queue's: here the backoff
// list's first entry; a pop-carried ack's failure holds the partition as
// an ack's does.
func TestTheQueueRetryDelaysHoldFailuresThatAskForNone(t *testing.T) {
	t.Parallel()
	p := newPollEnv(t, time.Hour)
	p.fill(t, 1, "p")
	ctx := t.Context()
	backoff := []int{60000, 3600000}
	if _, _, err := p.store.Configure(ctx, p.Queue, model.OptionsPatch{RetryBackoffMs: &backoff}, false); err != nil {
		t.Fatal(err)
	}
	first, err := p.client.Pop(ctx, p.Queue, "", queengate.PopRequest{Group: "g"})
	if err != nil || len(first.Messages) != 1 {
		t.Fatalf("pop: %+v, %v", first, err)
	}
	// Failed without a delay, carried by the next pop: the backoff list's
	// first entry (a minute) holds it.
	second, err := p.client.Pop(ctx, p.Queue, "", queengate.PopRequest{Group: "g", Ack: &queengate.PopAck{Partition: "p",
		LeaseID: first.LeaseID, Items: []queengate.AckItem{{TransactionID: "p-0", Status: queengate.AckFailed}}}})
	if err != nil || second.Ack == nil || second.Ack.Items[0].Result != "acked" || len(second.Messages) != 0 {
		t.Fatalf("the pop carrying the failure: %+v, %v; want it settled and nothing delivered", second, err)
	}
	p.elapseDelays(t)
	third, err := p.client.Pop(ctx, p.Queue, "", queengate.PopRequest{Group: "g"})
	if err != nil || len(third.Messages) != 1 || third.Messages[0].Attempts != 2 {
		t.Fatalf("once the delay ran out: %+v, %v", third, err)
	}
}

// A delay on a completed item, or out of range, is a 400 naming it, and
// settles nothing: the lease and its messages are as they were.
func TestABadDelayIsA400AndChangesNothing(t *testing.T) {
	t.Parallel()
	e, c := consuming(t, 1, "p")
	ctx := t.Context()
	a, err := c.Pop(ctx, e.Queue, "p", queengate.PopRequest{Group: "g"})
	if err != nil || len(a.Messages) != 1 {
		t.Fatalf("pop: %+v, %v", a, err)
	}
	for _, bad := range []struct {
		item queengate.AckItem
		says string
	}{
		{queengate.AckItem{TransactionID: "p-0", Status: queengate.AckCompleted, DelayMs: 1000}, `"delayMs" is for a failed item`},
		{queengate.AckItem{TransactionID: "p-0", Status: queengate.AckFailed, DelayMs: queengate.MaxDelayMs + 1}, `"delayMs" is 86400001: from 0 to 86400000`},
		{queengate.AckItem{TransactionID: "p-0", Status: queengate.AckFailed, DelayMs: -1}, `"delayMs" is -1: from 0 to 86400000`},
	} {
		_, err := c.Ack(ctx, e.Queue, "p", queengate.AckRequest{Group: "g", LeaseID: a.LeaseID, Items: []queengate.AckItem{bad.item}})
		if werr, ok := err.(*queengate.Error); !ok || werr.Code != 400 || !strings.Contains(werr.Text, bad.says) {
			t.Errorf("ack %+v: %v; want 400 saying %q", bad.item, err, bad.says)
		}
		_, err = c.Pop(ctx, e.Queue, "", queengate.PopRequest{Group: "g", Ack: &queengate.PopAck{Partition: "p", LeaseID: a.LeaseID,
			Items: []queengate.AckItem{bad.item}}})
		if werr, ok := err.(*queengate.Error); !ok || werr.Code != 400 || !strings.Contains(werr.Text, bad.says) {
			t.Errorf("a pop carrying %+v: %v; want 400 saying %q", bad.item, err, bad.says)
		}
	}
	ack, err := c.Ack(ctx, e.Queue, "p", queengate.AckRequest{Group: "g", LeaseID: a.LeaseID, Items: completeAll(a)})
	if err != nil || ack.Items[0].Result != "acked" || ack.NextOffset != 1 {
		t.Fatalf("the ack after the bad ones: %+v, %v", ack, err)
	}
}

// The groups list says, per partition, until when a failure's delay holds
// it for the group — one asked for, or a run-out lease's, whose consumer
// was heard from — and how many partitions are held; once the delays run
// out it says nothing of them.
func TestTheGroupsListSaysWhenADelayHoldsAPartition(t *testing.T) {
	t.Parallel()
	e, c := consuming(t, 1, "p1", "p2", "p3")
	ctx := t.Context()
	hour := int(time.Hour / time.Millisecond)
	if _, _, err := e.Store.Configure(ctx, e.Queue, model.OptionsPatch{RetryDelayMs: &hour}, false); err != nil {
		t.Fatal(err)
	}
	pop := func(partition string) queengate.PopAnswer {
		t.Helper()
		a, err := c.Pop(ctx, e.Queue, partition, queengate.PopRequest{Group: "g"})
		if err != nil || len(a.Messages) != 1 {
			t.Fatalf("pop of %s: %+v, %v", partition, a, err)
		}
		return a
	}
	failed := pop("p1")
	if _, err := c.Ack(ctx, e.Queue, "p1", queengate.AckRequest{Group: "g", LeaseID: failed.LeaseID, Items: []queengate.AckItem{
		{TransactionID: "p1-0", Status: queengate.AckFailed, DelayMs: 2 * int64(hour)}}}); err != nil {
		t.Fatal(err)
	}
	expired := pop("p2")
	if _, err := c.Renew(ctx, e.Queue, "p2", queengate.LeaseRequest{Group: "g", LeaseID: expired.LeaseID, LeaseMs: 1000}); err != nil {
		t.Fatal(err) // heard from: its expiry counts as a failure, with the queue's delay
	}
	if _, err := e.Store.Pool().Exec(ctx, `UPDATE queen.consumer_cursors SET lease_until = now() - interval '1 second'
		WHERE lease_id = $1`, expired.LeaseID); err != nil {
		t.Fatal(err)
	}
	pop("p3") // leased, not delayed
	groups := func() (queengate.GroupView, string) {
		t.Helper()
		a, err := c.Groups(ctx, e.Queue)
		raw, _ := json.Marshal(a)
		if err != nil || len(a.Groups) != 1 || len(a.Groups[0].Partitions) != 3 {
			t.Fatalf("groups: %s, %v", raw, err)
		}
		return a.Groups[0], string(raw)
	}
	v, raw := groups()
	now := time.Now()
	held := func(i int, from, to time.Time) {
		t.Helper()
		if u := v.Partitions[i].DelayedUntil; u == nil || u.Before(from) || u.After(to) {
			t.Errorf("%s: delayedUntil %v, want between %v and %v (%s)", v.Partitions[i].Partition, u, from, to, raw)
		}
	}
	held(0, now.Add(90*time.Minute), now.Add(2*time.Hour+time.Minute))
	held(1, now.Add(30*time.Minute), now.Add(time.Hour))
	if v.Partitions[2].DelayedUntil != nil || v.DelayedPartitions != 2 {
		t.Errorf("p3 under a running lease: delayedUntil %v; the group's delayedPartitions %d, want 2 (%s)",
			v.Partitions[2].DelayedUntil, v.DelayedPartitions, raw)
	}
	if _, err := e.Store.Pool().Exec(ctx, `UPDATE queen.consumer_cursors SET delayed_until = now() - interval '1 second',
		lease_until = now() - interval '2 hours' WHERE delayed_until IS NOT NULL OR lease_id = $1`, expired.LeaseID); err != nil {
		t.Fatal(err)
	}
	if _, raw := groups(); strings.Contains(raw, "delayed") {
		t.Errorf("after the delays ran out the groups list still says: %s", raw)
	}
}
