package consume_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	queengate "github.com/queengate/queengate"
	"github.com/queengate/queengate/consume"
	"github.com/queengate/queengate/gateway"
	"github.com/queengate/queengate/internal/checkfor"
	"github.com/queengate/queengate/internal/pgtest"
)

// popRaw pops through a plain request, for the answer's size.
func (e *testEnv) popRaw(t *testing.T, partition string, req queengate.PopRequest) (queengate.PopAnswer, int) {
	t.Helper()
	subject := e.Prefix + ".consume.pop." + e.Queue
	if partition != "" {
		subject += "." + partition
	}
	msg := e.Request(t, subject, req)
	var a queengate.PopAnswer
	if err := json.Unmarshal(msg.Data, &a); err != nil || a.Queue == "" {
		t.Fatalf("pop answer %.300s: %v", msg.Data, err)
	}
	return a, len(msg.Data)
}

// Pops are bounded by bytes, by default what fits in the server's max
// payload: 150 messages of 11 KB popped with max 150 all arrive, over
// answers that each fit (each carrying the previous batch's ack), and none
// is dead-lettered. A message of the largest data a push accepts is
// delivered too.
func TestPopAnswersFitTheMaxPayload(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.StartGateway(gatewayOpts{Consume: true})
	maxPayload := e.Client.MaxPayload()
	data := json.RawMessage(`"` + strings.Repeat("x", 11<<10) + `"`)
	for batch := range 3 {
		var ms []msg
		for i := range 50 {
			ms = append(ms, msg{TransactionID: fmt.Sprint("m", batch*50+i), Data: data})
		}
		wantStatus(t, e.Push(t, e.Subject("p"), ms), slices.Repeat([]string{"queued"}, 50)...)
	}
	// maxBytes 1 still delivers one message.
	one, _ := e.popRaw(t, "p", queengate.PopRequest{Group: "g", Max: 150, MaxBytes: 1})
	if len(one.Messages) != 1 {
		t.Fatalf("maxBytes 1 delivered %d messages, want 1", len(one.Messages))
	}
	got := map[string]bool{one.Messages[0].TransactionID: true}
	ack := &queengate.PopAck{Partition: "p", LeaseID: one.LeaseID, Items: completeAll(one)}
	answers := 0
	for len(got) < 150 && answers < 10 {
		a, size := e.popRaw(t, "p", queengate.PopRequest{Group: "g", Max: 150, Ack: ack})
		answers++
		if int64(size) > maxPayload || a.DeadLettered != 0 {
			t.Fatalf("answer %d: %d bytes (max payload %d), %d dead-lettered", answers, size, maxPayload, a.DeadLettered)
		}
		for _, m := range a.Messages {
			got[m.TransactionID] = true
		}
		ack = &queengate.PopAck{Partition: "p", LeaseID: a.LeaseID, Items: completeAll(a)}
	}
	if len(got) != 150 || answers < 2 {
		t.Fatalf("%d messages delivered over %d answers, want 150 over more than one", len(got), answers)
	}
	// The last batch's ack alone, then the largest message a push takes.
	if a, _ := e.popRaw(t, "p", queengate.PopRequest{Group: "g", Ack: ack}); a.Ack == nil || !a.Ack.LeaseEnded {
		t.Fatalf("the last ack: %+v", a.Ack)
	}
	big := json.RawMessage(`"` + strings.Repeat("y", int(queengate.MaxDataBytes(maxPayload))-2) + `"`)
	wantStatus(t, e.Push(t, e.Subject("big"), []msg{{TransactionID: "big", Data: big}}), "queued")
	a, size := e.popRaw(t, "big", queengate.PopRequest{Group: "g"})
	if len(a.Messages) != 1 || string(a.Messages[0].Data) != string(big) || int64(size) > maxPayload {
		t.Fatalf("the largest message: %d delivered in %d bytes", len(a.Messages), size)
	}
}

// A pop whose answer could not be sent (its gateway's connection closed
// while it waited) is taken back: no lease stays, no attempt is counted,
// and another gateway's pop gets the message at once, at attempt 1.
func TestAPopNeverAnsweredCountsNoAttemptAndKeepsNoLease(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	reg := prometheus.NewRegistry()
	waiter := consume.New(pgtest.Store(t, e.PGURL))
	// Cut off from NATS, it hears no commit: it pops again once its list
	// has been known empty that long.
	waiter.SetCheckEvery(20 * time.Millisecond)
	waiter.SetRevalidate(20 * time.Millisecond)
	first, _ := e.StartGateway(gatewayOpts{Reg: reg, Gateway: gateway.Config{Endpoints: []gateway.EndpointSet{waiter}}})
	e.fill(t, 1, "p")
	c := e.queenClient(t)
	a, err := c.Pop(t.Context(), e.Queue, "p", queengate.PopRequest{Group: "g"})
	if err != nil || len(a.Messages) != 1 {
		t.Fatalf("pop: %+v, %v", a, err)
	}
	if _, err := c.Ack(t.Context(), e.Queue, "p", queengate.AckRequest{Group: "g", LeaseID: a.LeaseID, Items: completeAll(a)}); err != nil {
		t.Fatal(err)
	}
	// A commit to the queue ends every wait, so that the next one seen is
	// the long poll's.
	wantStatus(t, e.Push(t, e.Subject("q"), msgs("q-0")), "queued")
	checkfor.Check(t, 30*time.Second, checkfor.Cond("no pop to wait", func() bool { return !waiter.Waiting(e.Queue) }))
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	go c.Pop(ctx, e.Queue, "p", queengate.PopRequest{Group: "g", WaitMs: queengate.MaxWaitMs, LeaseMs: queengate.MaxLeaseMs}) //nolint:errcheck // never answered
	checkfor.Check(t, 30*time.Second, checkfor.Cond("the pop to wait", func() bool { return waiter.Waiting(e.Queue) }))
	e.Conns[first].Close()
	e.StartGateway(gatewayOpts{Consume: true})
	wantStatus(t, e.Push(t, e.Subject("p"), msgs("late")), "queued")
	checkfor.Check(t, 30*time.Second, checkfor.Cond("the waiting pop's answer to be lost", func() bool {
		return counterValue(t, reg, "queengate_answers_unsent_total") >= 1
	}))
	var b queengate.PopAnswer
	checkfor.Check(t, 30*time.Second, checkfor.Cond("another gateway's pop to get the message", func() bool {
		b, err = c.Pop(t.Context(), e.Queue, "p", queengate.PopRequest{Group: "g"})
		return err == nil && len(b.Messages) > 0
	}))
	if !slices.Equal(txnIDs(b), []string{"late"}) || b.Messages[0].Attempts != 1 {
		t.Fatalf("after the lost answer: %+v; want late at attempt 1", b.Messages)
	}
}

func counterValue(t *testing.T, reg *prometheus.Registry, name string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == name {
			return mf.GetMetric()[0].GetCounter().GetValue()
		}
	}
	return 0
}

// A pop naming a partition that does not exist is a 404 that changes
// nothing: not the ack it carries, nor a group it would create.
func TestAPopOfAnUnknownPartitionSettlesNothing(t *testing.T) {
	t.Parallel()
	e, c := consuming(t, 2, "p")
	a, err := c.Pop(t.Context(), e.Queue, "p", queengate.PopRequest{Group: "g"})
	if err != nil || len(a.Messages) != 2 {
		t.Fatalf("pop: %+v, %v", a, err)
	}
	ack := &queengate.PopAck{Partition: "p", LeaseID: a.LeaseID, Items: completeAll(a)}
	for _, group := range []string{"g", "fresh"} {
		if _, err := c.Pop(t.Context(), e.Queue, "nosuch", queengate.PopRequest{Group: group, Ack: ack}); !isCode(err, 404) {
			t.Fatalf("a pop of an unknown partition, group %s: %v, want a 404", group, err)
		}
	}
	got, err := c.Ack(t.Context(), e.Queue, "p", queengate.AckRequest{Group: "g", LeaseID: a.LeaseID, Items: completeAll(a)})
	if err != nil || got.Items[0].Result != "acked" || got.NextOffset != 2 {
		t.Fatalf("the ack after the 404s: %+v, %v; want it settled now, not before", got, err)
	}
	groups, err := c.Groups(t.Context(), e.Queue)
	if err != nil || len(groups.Groups) != 1 {
		t.Fatalf("groups after the 404s: %+v, %v; want g alone", groups, err)
	}
}

// With PostgreSQL down, pops, acks and group lists answer 503 with a
// message that names no address, port or driver detail.
func TestConsumingWithPostgreSQLDownAnswers503Cleanly(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	cluster := pgtest.NewCluster(t)
	store := pgtest.Store(t, cluster.URL)
	e.Store = store
	e.StartGateway(gatewayOpts{Store: store, Gateway: gateway.Config{Endpoints: []gateway.EndpointSet{consume.New(store)}}})
	e.fill(t, 1, "p")
	c := e.queenClient(t)
	a, err := c.Pop(t.Context(), e.Queue, "p", queengate.PopRequest{Group: "g"})
	if err != nil || len(a.Messages) != 1 {
		t.Fatalf("pop: %+v, %v", a, err)
	}
	u, err := url.Parse(cluster.URL)
	if err != nil {
		t.Fatal(err)
	}
	cluster.Stop()
	for what, call := range map[string]func() error{
		"pop": func() error {
			_, err := c.Pop(t.Context(), e.Queue, "p", queengate.PopRequest{Group: "g"})
			return err
		},
		"ack": func() error {
			_, err := c.Ack(t.Context(), e.Queue, "p", queengate.AckRequest{Group: "g", LeaseID: a.LeaseID, Items: completeAll(a)})
			return err
		},
		"groups": func() error {
			_, err := c.Groups(t.Context(), e.Queue)
			return err
		},
	} {
		err := call()
		werr, ok := err.(*queengate.Error)
		if !ok || werr.Code != 503 || strings.Contains(werr.Text, u.Port()) || strings.Contains(werr.Text, u.Hostname()) ||
			strings.Contains(werr.Text, "dial") || strings.Contains(werr.Text, "connect") {
			t.Errorf("%s with PostgreSQL down: %v; want a 503 without the driver's text", what, err)
		}
	}
}

// The groups answer fits in the max payload however many partitions the
// queue has: every group's totals, partitions while they fit, and the
// rest page by page from the first one left out. Under the small max
// payload, 5,000 partitions take 7 pages (100,000 took 8 under the
// default megabyte, for twenty times the rows read and sent per page).
func TestTheGroupsAnswerFitsAndPagesThroughManyPartitions(t *testing.T) {
	t.Parallel()
	e := newSmallPayloadEnv(t)
	_, e.ing = e.StartGateway(gatewayOpts{Consume: true})
	e.fill(t, 1, "p")
	c := e.queenClient(t)
	const n = 5000
	// Created in one statement as queen.ensure_partition creates each.
	if _, err := e.Store.Pool().Exec(t.Context(), `INSERT INTO queen.log_partitions (queue_id, name)
		SELECT q.id, 'q' || i FROM queen.queues q, generate_series(1, $2) AS i WHERE q.name = $1`, e.Queue, n-1); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Pop(t.Context(), e.Queue, "p", queengate.PopRequest{Group: "g"}); err != nil {
		t.Fatal(err)
	}
	subject := e.Prefix + ".consume.groups." + e.Queue
	page := func(body any) queengate.GroupView {
		t.Helper()
		msg := e.Request(t, subject, body)
		var a queengate.GroupsAnswer
		if err := json.Unmarshal(msg.Data, &a); err != nil || len(a.Groups) != 1 {
			t.Fatalf("groups answer %.300s: %v", msg.Data, err)
		}
		if int64(len(msg.Data)) > e.Client.MaxPayload() {
			t.Fatalf("groups answer of %d bytes", len(msg.Data))
		}
		return a.Groups[0]
	}
	v := page("")
	if v.PartitionCount != n || v.Lag != 1 || v.NextPartition == "" || len(v.Partitions) == 0 || len(v.Partitions) >= n {
		t.Fatalf("first page: %d partitions of %d, lag %d, next %q", len(v.Partitions), v.PartitionCount, v.Lag, v.NextPartition)
	}
	seen := map[string]bool{}
	for pages := 1; ; pages++ {
		for _, p := range v.Partitions {
			seen[p.Partition] = true
		}
		if v.NextPartition == "" || pages > n {
			t.Logf("%d partitions in %d pages", n, pages)
			break
		}
		v = page(queengate.GroupsRequest{Group: "g", From: v.NextPartition})
	}
	if len(seen) != n {
		t.Fatalf("paging listed %d partitions, want %d", len(seen), n)
	}
	for body, code := range map[string]int{
		`{"from":"p"}`:                400,
		`{"group":"g","From":"p"}`:    400,
		`{"group":"g","group":"g"}`:   400,
		`{"group":1}`:                 400,
		`{"group":"nobody"}`:          404,
		`{"group":"g","from":"none"}`: 404,
	} {
		var eb queengate.ErrorBody
		if msg := e.Request(t, subject, body); json.Unmarshal(msg.Data, &eb) != nil || eb.Error.Code != code {
			t.Errorf("groups %s: %s, want a %d", body, msg.Data, code)
		}
	}
}

// A message that does not fit beside the answer of the ack a pop carries
// is not delivered by that pop (nothing is leased), but by the next,
// carrying no ack.
func TestAMessageThatDoesNotFitBesideACarriedAckWaitsForTheNextPop(t *testing.T) {
	t.Parallel()
	e, c := consuming(t, 1, "small")
	big := json.RawMessage(`"` + strings.Repeat("y", 500<<10) + `"`)
	wantStatus(t, e.Push(t, e.Subject("big"), []msg{{TransactionID: "big", Data: big}}), "queued")
	small, err := c.Pop(t.Context(), e.Queue, "small", queengate.PopRequest{Group: "g"})
	if err != nil || len(small.Messages) != 1 {
		t.Fatalf("pop: %+v, %v", small, err)
	}
	// 500 items naming transactionIds that escape to six bytes a byte:
	// an ack answer of over 600 KB.
	ack := &queengate.PopAck{Partition: "small", LeaseID: small.LeaseID}
	for i := range 500 {
		ack.Items = append(ack.Items, queengate.AckItem{TransactionID: fmt.Sprint(i, strings.Repeat("\x01", 200)), Status: "completed"})
	}
	a, size := e.popRaw(t, "big", queengate.PopRequest{Group: "g", Ack: ack})
	if a.Ack == nil || len(a.Ack.Items) != 500 || len(a.Messages) != 0 || a.LeaseID != "" || int64(size) > e.Client.MaxPayload() {
		t.Fatalf("the pop carrying the ack: %d messages, lease %q, %d bytes", len(a.Messages), a.LeaseID, size)
	}
	b, _ := e.popRaw(t, "big", queengate.PopRequest{Group: "g"})
	if !slices.Equal(txnIDs(b), []string{"big"}) || b.Messages[0].Attempts != 1 {
		t.Fatalf("the next pop: %v", txnIDs(b))
	}
}

// An ack whose answer could not fit in the max payload (each result
// repeats its transactionId, whose < the answer's bound counts as six
// bytes, \u003c, as encoding/json would write it) is a 413 that settles
// nothing; the same
// batch acknowledged in a size that fits is settled.
func TestAnAckWhoseAnswerCouldNotFitIs413AndSettlesNothing(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.StartGateway(gatewayOpts{Consume: true})
	e.fill(t, 1, "p")
	c := e.queenClient(t)
	a, err := c.Pop(t.Context(), e.Queue, "p", queengate.PopRequest{Group: "g"})
	if err != nil || len(a.Messages) != 1 {
		t.Fatalf("pop: %+v, %v", a, err)
	}
	// Written by hand: encoding/json would escape the < in the request too.
	body := []byte(`{"group":"g","leaseId":"` + a.LeaseID + `","items":[{"offset":0,"status":"completed"}`)
	for i := range 5000 { // a 700 KB request, answered in over 3 MB
		body = fmt.Appendf(body, `,{"transactionId":"%04d%s","status":"completed"}`, i, strings.Repeat("<", 100))
	}
	body = append(body, "]}"...)
	reply := e.Request(t, e.Prefix+".consume.ack."+e.Queue+".p", body)
	if reply.Header.Get("Nats-Service-Error-Code") != "413" || !strings.Contains(string(reply.Data), "smaller acks") {
		t.Fatalf("a large ack: %s %.300s, want a 413 asking for smaller acks", reply.Header.Get("Nats-Service-Error-Code"), reply.Data)
	}
	ans, err := c.Ack(t.Context(), e.Queue, "p", queengate.AckRequest{Group: "g", LeaseID: a.LeaseID, Items: completeAll(a)})
	if err != nil || ans.Items[0].Result != "acked" || !ans.LeaseEnded {
		t.Fatalf("the batch's own ack after the 413: %+v, %v; want acked, as nothing was settled", ans, err)
	}
}
