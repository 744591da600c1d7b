package consume_test

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	queengate "github.com/queengate/queengate"
	"github.com/queengate/queengate/consume"
	"github.com/queengate/queengate/gateway"
	"github.com/queengate/queengate/internal/checkfor"
	"github.com/queengate/queengate/internal/pgtest"
)

func (e *testEnv) queenClient(t *testing.T) *queengate.Client {
	t.Helper()
	c, err := queengate.NewClient(e.Client, queengate.WithPrefix(e.Prefix))
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// consuming starts a gateway serving consumers, fills each partition
// with n messages, and returns the env and a client.
func consuming(t *testing.T, n int, partitions ...string) (*testEnv, *queengate.Client) {
	t.Helper()
	e := newEnv(t)
	_, e.ing = e.StartGateway(gatewayOpts{Consume: true})
	e.fill(t, n, partitions...)
	return e, e.queenClient(t)
}

// fill pushes n messages to each partition, transactionIds <p>-<i>.
func (e *testEnv) fill(t *testing.T, n int, partitions ...string) {
	t.Helper()
	for _, p := range partitions {
		var ids []string
		for i := range n {
			ids = append(ids, fmt.Sprintf("%s-%d", p, i))
		}
		wantStatus(t, e.Push(t, e.Subject(p), msgs(ids...)), slices.Repeat([]string{"queued"}, n)...)
	}
}

func txnIDs(a queengate.PopAnswer) []string {
	var out []string
	for _, m := range a.Messages {
		out = append(out, m.TransactionID)
	}
	return out
}

func completeAll(a queengate.PopAnswer) []queengate.AckItem {
	var items []queengate.AckItem
	for _, m := range a.Messages {
		items = append(items, queengate.AckItem{TransactionID: m.TransactionID, Status: queengate.AckCompleted})
	}
	return items
}

// Consumers of one group get disjoint partitions while leases run; a
// second group gets everything again.
func TestConsumersOfAGroupShareAndGroupsEachGetEverything(t *testing.T) {
	t.Parallel()
	e, c := consuming(t, 3, "p1", "p2")
	ctx := t.Context()
	a, err := c.Pop(ctx, e.Queue, "", queengate.PopRequest{Group: "billing", Consumer: "one", Max: 10})
	if err != nil || len(a.Messages) != 3 || a.LeaseID == "" {
		t.Fatalf("first pop: %+v, %v", a, err)
	}
	b, err := c.Pop(ctx, e.Queue, "", queengate.PopRequest{Group: "billing", Consumer: "two", Max: 10})
	if err != nil || len(b.Messages) != 3 || b.Partition == a.Partition {
		t.Fatalf("second pop: %+v, %v; want the other partition than %s", b, err, a.Partition)
	}
	if n, err := c.Pop(ctx, e.Queue, "", queengate.PopRequest{Group: "billing", Max: 10}); err != nil || len(n.Messages) != 0 || n.LeaseID != "" {
		t.Fatalf("a third pop while both leases run: %+v, %v", n, err)
	}
	if got := txnIDs(a); !slices.Equal(got, []string{a.Partition + "-0", a.Partition + "-1", a.Partition + "-2"}) {
		t.Errorf("delivered %v, want the partition's messages in offset order", got)
	}
	if string(a.Messages[1].Data) != `{"id":"`+a.Partition+`-1","n":1}` || a.Messages[0].Attempts != 1 {
		t.Errorf("message %+v: data as pushed, first attempt", a.Messages[1])
	}
	for _, got := range []queengate.PopAnswer{a, b} {
		ack, err := c.Ack(ctx, e.Queue, got.Partition, queengate.AckRequest{Group: "billing", LeaseID: got.LeaseID, Items: completeAll(got)})
		if err != nil || !ack.LeaseEnded || ack.NextOffset != 3 || ack.Items[2].Result != "acked" || *ack.Items[2].Offset != 2 {
			t.Fatalf("ack: %+v, %v", ack, err)
		}
	}
	seen := 0
	for range 2 {
		o, err := c.Pop(ctx, e.Queue, "", queengate.PopRequest{Group: "audit", Max: 10})
		if err != nil {
			t.Fatal(err)
		}
		seen += len(o.Messages)
	}
	if seen != 6 {
		t.Errorf("the second group saw %d messages, want all 6", seen)
	}
	groups, err := c.Groups(ctx, e.Queue)
	if err != nil || len(groups.Groups) != 2 || groups.Groups[0].Group != "audit" || groups.Groups[1].Lag != 0 ||
		groups.Groups[0].Lag != 6 || len(groups.Groups[0].Partitions) != 2 || groups.Groups[0].Partitions[0].LeaseUntil == nil {
		t.Errorf("groups: %+v, %v", groups, err)
	}
}

// A pop that finds nothing waits, and a push wakes it: the answer holds
// the pushed message well before the wait is over.
func TestALongPollingPopIsWokenByAPush(t *testing.T) {
	t.Parallel()
	e, consumers := wakeableOnlyByAnnouncements(t)
	e.fill(t, 1, "p")
	c := e.queenClient(t)
	popAndAck(t, c, e.Queue, "p", 1)
	got := waitingPop(t, c, consumers, e.Queue, "p", queengate.PopRequest{Group: "g", Max: 10})
	e.Push(t, e.Subject("p"), msgs("late"))
	if a := woken(t, got); !slices.Equal(txnIDs(a), []string{"late"}) {
		t.Fatalf("the woken pop got %v", txnIDs(a))
	}
}

// wakeableOnlyByAnnouncements starts a gateway whose waiting pops only an
// announcement wakes (its check for run-out leases is an hour away).
func wakeableOnlyByAnnouncements(t *testing.T) (*testEnv, *consume.Consumers) {
	t.Helper()
	e := newEnv(t)
	consumers := consume.New(pgtest.Store(t, e.PGURL))
	consumers.SetCheckEvery(time.Hour)
	e.StartGateway(gatewayOpts{Gateway: gateway.Config{Endpoints: []gateway.EndpointSet{consumers}}})
	return e, consumers
}

// waitingPop sends req as a long poll of the longest wait, and returns
// once it waits; its answer comes on the channel.
func waitingPop(t *testing.T, c *queengate.Client, consumers *consume.Consumers, queue, partition string, req queengate.PopRequest) <-chan queengate.PopAnswer {
	t.Helper()
	got := make(chan queengate.PopAnswer, 1)
	req.WaitMs = queengate.MaxWaitMs
	go func() {
		a, err := c.Pop(t.Context(), queue, partition, req)
		if err != nil {
			t.Error(err)
		}
		got <- a
	}()
	checkfor.Check(t, 10*time.Second, checkfor.Cond("the pop to wait", func() bool { return consumers.Waiting(queue) }))
	return got
}

// woken is a waiting pop's answer, which must come before its wait runs
// out.
func woken(t *testing.T, got <-chan queengate.PopAnswer) queengate.PopAnswer {
	t.Helper()
	select {
	case a := <-got:
		return a
	case <-time.After(queengate.MaxWaitMs * time.Millisecond):
		t.Fatal("the pop was not woken before its wait ran out")
		return queengate.PopAnswer{}
	}
}

func TestConsumeBadInputIsAClearErrorAndChangesNothing(t *testing.T) {
	t.Parallel()
	e, c := consuming(t, 2, "p")
	ctx := t.Context()
	pop := func(queue, body string) *queengate.Error {
		t.Helper()
		msg := e.Request(t, e.Prefix+".consume.pop."+queue, body)
		var eb queengate.ErrorBody
		if json.Unmarshal(msg.Data, &eb) != nil || eb.Error.Code == 0 {
			return nil
		}
		return &eb.Error
	}
	for _, c := range []struct {
		queue, body string
		code        int
		says        string
	}{
		{"nobody-" + e.Queue, `{"group":"g"}`, 404, "unknown queue"},
		{e.Queue, `{"group":"g","max":-1}`, 400, `"max" is -1: from 1 to 10000`},
		{e.Queue, `{"group":"g","max":0}`, 400, `"max" is 0`},
		{e.Queue, `{"group":"g","leaseMs":0}`, 400, `"leaseMs" is 0`},
		{e.Queue, `{"group":"g","waitMs":99999}`, 400, `"waitMs" is 99999`},
		{e.Queue, `{"group":"g","maxBytes":0}`, 400, `"maxBytes" is 0: from 1 to 1073741824`},
		{e.Queue, `{"group":"g","maxBytes":1073741825}`, 400, `"maxBytes" is 1073741825`},
		{e.Queue, `{"group":"g","maxBytes":"1"}`, 400, `"maxBytes" must be a whole number`},
		{e.Queue, `{"max":5}`, 400, `"group" is missing`},
		{e.Queue, `{"group":"a.b"}`, 400, `"group" must be a name`},
		{e.Queue, `{"group":"g","maxx":5}`, 400, `unknown field "maxx"`},
		{e.Queue + ".nope", `{"group":"g"}`, 404, "partition nope"},
	} {
		werr := pop(c.queue, c.body)
		if werr == nil || werr.Code != c.code || !strings.Contains(werr.Text, c.says) {
			t.Errorf("pop %s %s: %v; want %d saying %q", c.queue, c.body, werr, c.code, c.says)
		}
	}
	a, err := c.Pop(ctx, e.Queue, "p", queengate.PopRequest{Group: "g", Max: 1})
	if err != nil || len(a.Messages) != 1 {
		t.Fatalf("pop: %+v, %v", a, err)
	}
	for _, bad := range []struct {
		req  queengate.AckRequest
		code int
		says string
	}{
		{queengate.AckRequest{Group: "nogroup", LeaseID: a.LeaseID, Items: completeAll(a)}, 404, "consumer group not found"},
		{queengate.AckRequest{Group: "g", LeaseID: a.LeaseID}, 400, `"items" must be an array`},
		{queengate.AckRequest{Group: "g", LeaseID: a.LeaseID, Items: []queengate.AckItem{{Status: "completed"}}}, 400, "give transactionId or offset"},
		{queengate.AckRequest{Group: "g", LeaseID: a.LeaseID, Items: []queengate.AckItem{{TransactionID: "p-0", Status: "done"}}}, 400, `status "done"`},
		{queengate.AckRequest{Group: "g", Items: completeAll(a)}, 400, `"leaseId" is empty`},
	} {
		_, err := c.Ack(ctx, e.Queue, "p", bad.req)
		if werr, ok := err.(*queengate.Error); !ok || werr.Code != bad.code || !strings.Contains(werr.Text, bad.says) {
			t.Errorf("ack %+v: %v; want %d saying %q", bad.req, err, bad.code, bad.says)
		}
	}
	if msg := e.Request(t, e.Prefix+".consume.ack."+e.Queue+".p", `{"group":"g","leaseId":"x","items":[{"transactionId":"p-0","status":"completed"}],"extra":1}`); !strings.Contains(string(msg.Data), `unknown field`) {
		t.Errorf("an ack with an unknown field: %s", msg.Data)
	}
	if _, err := c.Renew(ctx, e.Queue, "p", queengate.LeaseRequest{Group: "g", LeaseID: a.LeaseID, LeaseMs: 0}); !isCode(err, 400) {
		t.Errorf("a renewal for 0 ms: %v", err)
	}
	// Nothing above changed the lease or the cursor: the message is still
	// the lease's, and acking it now works.
	ack, err := c.Ack(ctx, e.Queue, "p", queengate.AckRequest{Group: "g", LeaseID: a.LeaseID, Items: completeAll(a)})
	if err != nil || ack.Items[0].Result != "acked" || ack.NextOffset != 1 {
		t.Fatalf("the ack after the bad ones: %+v, %v", ack, err)
	}
	if _, err := c.Renew(ctx, e.Queue, "p", queengate.LeaseRequest{Group: "g", LeaseID: a.LeaseID, LeaseMs: 1000}); !isCode(err, 409) {
		t.Errorf("renewing an ended lease: %v, want a 409", err)
	}
}

func isCode(err error, code int) bool {
	werr, ok := err.(*queengate.Error)
	return ok && werr.Code == code
}

// A pop carrying the usual ack, completing its whole lease in order, is
// served in one statement (consumer_cycle), the general ack routine
// untouched: here consumer_ack fails whenever it is called, and such a
// pop still settles its ack and delivers the next batch; a carried ack
// that fails a message takes the general routines, so it fails.
func TestAPopCarryingTheUsualAckIsOneCycle(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.PGURL = pgtest.NewDB(t) // its own database: consumer_ack is replaced
	e.Store = pgtest.Store(t, e.PGURL)
	e.StartGateway(gatewayOpts{Consume: true})
	e.fill(t, 6, "p")
	c := e.queenClient(t)
	ctx := t.Context()
	if _, err := e.Store.Pool().Exec(ctx, `
		CREATE OR REPLACE FUNCTION queen.consumer_ack(p_group_id bigint, p_partition_id bigint, p_lease_id uuid,
			p_offsets bigint[], p_hashes uuid[], p_completed boolean[], p_errors text[], p_delays bigint[])
		RETURNS TABLE (offs bigint[], results text[], dead boolean[], txn_ids text[], data json[], created_at timestamptz[],
		               attempts integer[], last_errors text[], next_offset bigint, lease_ended boolean, lease_counted boolean,
		               meta text[])
		LANGUAGE plpgsql AS $$BEGIN RAISE EXCEPTION 'consumer_ack called'; END$$`); err != nil {
		t.Fatal(err)
	}
	first, err := c.Pop(ctx, e.Queue, "", queengate.PopRequest{Group: "g", Max: 2})
	if err != nil || len(first.Messages) != 2 {
		t.Fatalf("first pop: %+v, %v", first, err)
	}
	ack := &queengate.PopAck{Partition: "p", LeaseID: first.LeaseID, Items: completeAll(first)}
	second, err := c.Pop(ctx, e.Queue, "", queengate.PopRequest{Group: "g", Max: 2, Ack: ack})
	if err != nil || second.Ack == nil || !second.Ack.LeaseEnded || second.Ack.NextOffset != 2 ||
		second.Ack.Items[1].Result != "acked" || !slices.Equal(txnIDs(second), []string{"p-2", "p-3"}) {
		t.Fatalf("pop with the usual ack: %+v (ack %+v), %v", second, second.Ack, err)
	}
	failed := &queengate.PopAck{Partition: "p", LeaseID: second.LeaseID, Items: []queengate.AckItem{
		{TransactionID: "p-2", Status: queengate.AckFailed, Error: "no"}, {TransactionID: "p-3", Status: queengate.AckCompleted}}}
	if _, err := c.Pop(ctx, e.Queue, "", queengate.PopRequest{Group: "g", Max: 2, Ack: failed}); err == nil {
		t.Fatal("a pop carrying a failure was served without consumer_ack")
	}
}

// Renew keeps a lease; release hands its messages to the next pop.
func TestRenewAndRelease(t *testing.T) {
	t.Parallel()
	e, c := consuming(t, 2, "p")
	ctx := t.Context()
	a, err := c.Pop(ctx, e.Queue, "p", queengate.PopRequest{Group: "g", Max: 10, LeaseMs: 1000})
	if err != nil {
		t.Fatal(err)
	}
	r, err := c.Renew(ctx, e.Queue, "p", queengate.LeaseRequest{Group: "g", LeaseID: a.LeaseID, LeaseMs: 60000})
	if err != nil || r.LeaseUntil == nil || !r.LeaseUntil.After(*a.LeaseUntil) {
		t.Fatalf("renew: %+v, %v (popped until %v)", r, err, a.LeaseUntil)
	}
	if _, err := c.Release(ctx, e.Queue, "p", queengate.LeaseRequest{Group: "g", LeaseID: a.LeaseID}); err != nil {
		t.Fatal(err)
	}
	b, err := c.Pop(ctx, e.Queue, "p", queengate.PopRequest{Group: "g", Max: 10})
	if err != nil || !slices.Equal(txnIDs(b), []string{"p-0", "p-1"}) || b.Messages[0].Attempts != 2 {
		t.Fatalf("after release: %+v, %v", b, err)
	}
}

// Two gateways serve pops and acks for four consumers at once: every
// message is delivered and acknowledged exactly once when no consumer
// fails.
func TestTwoGatewaysServeConsumersExactlyOnce(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.StartGateway(gatewayOpts{Consume: true})
	e.StartGateway(gatewayOpts{Consume: true})
	partitions := []string{"a", "b", "c", "d"}
	e.fill(t, 150, partitions...)
	c := e.queenClient(t)
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	var (
		mu        sync.Mutex
		delivered = map[string]int{}
		wg        sync.WaitGroup
	)
	for k := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				a, err := c.Pop(ctx, e.Queue, "", queengate.PopRequest{Group: "g", Consumer: fmt.Sprint(k), Max: 40, WaitMs: 200})
				if err != nil {
					t.Error(err)
					return
				}
				if len(a.Messages) == 0 {
					mu.Lock()
					all := len(delivered) == 4*150
					mu.Unlock()
					if all {
						return
					}
					continue
				}
				mu.Lock()
				for _, id := range txnIDs(a) {
					delivered[id]++
				}
				mu.Unlock()
				ack, err := c.Ack(ctx, e.Queue, a.Partition, queengate.AckRequest{Group: "g", LeaseID: a.LeaseID, Items: completeAll(a)})
				if err != nil || !ack.LeaseEnded {
					t.Errorf("ack: %+v, %v", ack, err)
					return
				}
			}
		}()
	}
	wg.Wait()
	for _, p := range partitions {
		for i := range 150 {
			if n := delivered[fmt.Sprintf("%s-%d", p, i)]; n != 1 {
				t.Errorf("%s-%d delivered %d times", p, i, n)
			}
		}
	}
	groups, err := c.Groups(t.Context(), e.Queue)
	if err != nil || groups.Groups[0].Lag != 0 {
		t.Errorf("lag after consuming everything: %+v, %v", groups, err)
	}
}

// A pop may carry the previous batch's ack: it is settled first, and
// answered with the pop.
func TestPopCarriesTheAckOfThePreviousBatch(t *testing.T) {
	t.Parallel()
	e, c := consuming(t, 4, "p")
	ctx := t.Context()
	first, err := c.Pop(ctx, e.Queue, "p", queengate.PopRequest{Group: "g", Max: 2})
	if err != nil || len(first.Messages) != 2 {
		t.Fatalf("first pop: %+v, %v", first, err)
	}
	ack := &queengate.PopAck{Partition: "p", LeaseID: first.LeaseID, Items: completeAll(first)}
	second, err := c.Pop(ctx, e.Queue, "p", queengate.PopRequest{Group: "g", Max: 2, Ack: ack})
	if err != nil || second.Ack == nil || !second.Ack.LeaseEnded || second.Ack.NextOffset != 2 ||
		!slices.Equal(txnIDs(second), []string{"p-2", "p-3"}) {
		t.Fatalf("pop with the ack: %+v (ack %+v), %v", second, second.Ack, err)
	}
	// Sent again (its answer lost), the ack is answered alreadyAcked and
	// the pop finds the partition leased.
	again, err := c.Pop(ctx, e.Queue, "p", queengate.PopRequest{Group: "g", Max: 2, Ack: ack})
	if err != nil || again.Ack.Items[0].Result != "alreadyAcked" || len(again.Messages) != 0 {
		t.Fatalf("the ack again: %+v, %v", again, err)
	}
	bad := &queengate.PopAck{Partition: "p", LeaseID: second.LeaseID, Items: []queengate.AckItem{{TransactionID: "p-2", Status: "fine"}}}
	if _, err := c.Pop(ctx, e.Queue, "p", queengate.PopRequest{Group: "g", Ack: bad}); !isCode(err, 400) {
		t.Fatalf("a pop carrying a bad ack: %v, want a 400", err)
	}
}
