package consume_test

import (
	"fmt"
	"math/rand/v2"
	"testing"

	queengate "github.com/queengate/queengate"
	"github.com/queengate/queengate/ingest"
	"github.com/queengate/queengate/model"
)

// submit pushes ids to partition p through ing, one frame, and waits for
// every message to be stored.
func (e *testEnv) submit(t *testing.T, ing *ingest.Ingester, p string, ids []string) {
	t.Helper()
	done := make(chan []model.PushOutcome, 1)
	req := &ingest.Request{Queue: e.Queue, Partition: p, Done: func(r []model.PushOutcome) { done <- r }}
	for _, id := range ids {
		req.Messages = append(req.Messages, model.Incoming{TxnID: id, Data: []byte(fmt.Sprintf(`{"id":%q}`, id))})
	}
	if err := ing.Submit(req); err != nil {
		t.Fatal(err)
	}
	for i, r := range <-done {
		if r.Status.String() != "queued" {
			t.Fatalf("%s: %+v", ids[i], r)
		}
	}
}

// TestCyclesFromTheTailDeliverWhatSQLHolds: one partition filled in
// frames of 1 to 5, by this gateway's ingester and, now and then, by a
// second gateway's (whose frames this one's tail never holds), a frame
// before each pop while consuming, by pops each carrying the whole ack of the batch before (by
// transactionId or by offset). Every message is delivered once, in
// order, with its data; some cycles are served from the tail, some not
// (the other gateway's frames), and the gateway's check mode reads every
// served one back from SQL (a difference fails the pop and the test).
func TestCyclesFromTheTailDeliverWhatSQLHolds(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	_, e.ing = e.StartGateway(gatewayOpts{Consume: true})
	_, other := e.StartGateway(gatewayOpts{})
	c := e.queenClient(t)
	r := rand.New(rand.NewPCG(34, 2))
	var pushed []string
	pushFrame := func() {
		var ids []string
		for range 1 + r.IntN(5) {
			ids = append(ids, fmt.Sprintf("m%d", len(pushed)+len(ids)))
		}
		ing := e.ing
		if r.IntN(6) == 0 {
			ing = other
		}
		e.submit(t, ing, "p", ids)
		pushed = append(pushed, ids...)
	}
	pushFrame()
	var got []string
	var prev queengate.PopAnswer
	for range 400 {
		if len(pushed) < 120 {
			pushFrame() // pushed while the group consumes: the tail holds what comes next
		}
		req := queengate.PopRequest{Group: "g", Max: 1 + r.IntN(6), LeaseMs: 600000}
		if prev.LeaseID != "" {
			ack := &queengate.PopAck{Partition: "p", LeaseID: prev.LeaseID}
			byOffset := r.IntN(2) == 0
			for _, m := range prev.Messages {
				it := queengate.AckItem{TransactionID: m.TransactionID, Status: queengate.AckCompleted}
				if byOffset {
					off := m.Offset
					it = queengate.AckItem{Offset: &off, Status: queengate.AckCompleted}
				}
				ack.Items = append(ack.Items, it)
			}
			req.Ack = ack
		}
		a, err := c.Pop(t.Context(), e.Queue, "p", req)
		if err != nil {
			t.Fatal(err)
		}
		if req.Ack != nil && (a.Ack == nil || !a.Ack.LeaseEnded) {
			t.Fatalf("the whole ack of %v did not end its lease: %+v", txnIDs(prev), a.Ack)
		}
		for _, m := range a.Messages {
			if want := fmt.Sprintf(`{"id":%q}`, m.TransactionID); string(m.Data) != want || m.Attempts != 1 {
				t.Fatalf("%s delivered with %s, attempt %d", m.TransactionID, m.Data, m.Attempts)
			}
		}
		got = append(got, txnIDs(a)...)
		prev = a
		if len(pushed) >= 120 && len(got) == len(pushed) && a.LeaseID == "" {
			break
		}
	}
	if fmt.Sprint(got) != fmt.Sprint(pushed) {
		t.Fatalf("delivered %v, pushed %v", got, pushed)
	}
	n := e.ing.Tail().Counts()
	t.Logf("cycles from the tail: %+v", n)
	if n.Served == 0 || n.Missed+n.Refused == 0 {
		t.Fatalf("cycles from the tail: %d served, %d not: want both", n.Served, n.Missed+n.Refused)
	}
}
