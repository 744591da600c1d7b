package consume_test

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	queengate "github.com/queengate/queengate"
	"github.com/queengate/queengate/consume"
	"github.com/queengate/queengate/gateway"
	"github.com/queengate/queengate/ingest"
	"github.com/queengate/queengate/internal/checkfor"
	"github.com/queengate/queengate/internal/pgtest"
	"github.com/queengate/queengate/model"
)

// derivedOf is one derived message per message of a: transactionId
// "d-<input's>", to out's partition (by the input's partition).
func derivedOf(a queengate.PopAnswer, out string) []queengate.DerivedMessage {
	var push []queengate.DerivedMessage
	for _, m := range a.Messages {
		push = append(push, queengate.DerivedMessage{Queue: out, Partition: "o-" + a.Partition, TransactionID: "d-" + m.TransactionID,
			Data: json.RawMessage(fmt.Sprintf(`{"from": %q}`, m.TransactionID))})
	}
	return push
}

// queueCount is how many messages queue holds.
func (e *testEnv) queueCount(t *testing.T, queue string) int {
	t.Helper()
	var n int
	if err := e.Store.Pool().QueryRow(context.Background(), `
		SELECT coalesce(sum(s.end_offset - s.base_offset + 1), 0)::int
		  FROM queen.log_segments s JOIN queen.log_partitions p ON p.id = s.partition_id JOIN queen.queues q ON q.id = p.queue_id
		 WHERE q.name = $1`, queue).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// A retried ack-and-push answers alreadyAcked for its items and
// duplicate, with the original's id, for its derived messages; the
// output holds each derived message once, and a pop waiting on the output
// queue is woken by the commit.
func TestAckAndPushRetryAnswersAlreadyAckedAndDuplicate(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	consumers := consume.New(pgtest.Store(t, e.PGURL))
	consumers.SetCheckEvery(time.Hour) // only a commit can wake the pop
	e.StartGateway(gatewayOpts{Gateway: gateway.Config{Endpoints: []gateway.EndpointSet{consumers}}})
	e.fill(t, 3, "p")
	c := e.queenClient(t)
	ctx := t.Context()
	out := e.Queue + "-out"
	e.Push(t, e.Prefix+".push."+out+".o-p", msgs("seed")) // the output queue exists: a pop can wait on it
	woken := make(chan queengate.PopAnswer, 1)
	go func() {
		a, err := c.Pop(ctx, out, "o-p", queengate.PopRequest{Group: "next", Max: 10, WaitMs: queengate.MaxWaitMs})
		if err == nil && len(a.Messages) == 1 { // the seed: ack it and wait for the derived messages
			_, err = c.Ack(ctx, out, "o-p", queengate.AckRequest{Group: "next", LeaseID: a.LeaseID, Items: completeAll(a)})
			if err == nil {
				a, err = c.Pop(ctx, out, "o-p", queengate.PopRequest{Group: "next", Max: 10, WaitMs: queengate.MaxWaitMs})
			}
		}
		if err != nil {
			t.Error(err)
		}
		woken <- a
	}()
	checkfor.Check(t, 10*time.Second, checkfor.Cond("the output's pop to wait", func() bool { return consumers.Waiting(out) }))

	a, err := c.Pop(ctx, e.Queue, "p", queengate.PopRequest{Group: "g", Max: 10})
	if err != nil || len(a.Messages) != 3 {
		t.Fatalf("pop: %+v, %v", a, err)
	}
	req := queengate.AckPushRequest{Group: "g", LeaseID: a.LeaseID, Items: completeAll(a), Push: derivedOf(a, out)}
	first, err := c.AckAndPush(ctx, e.Queue, "p", req)
	if err != nil || !first.LeaseEnded || first.NextOffset != 3 || len(first.Pushed) != 3 {
		t.Fatalf("ack-and-push: %+v, %v", first, err)
	}
	for i, p := range first.Pushed {
		if first.Items[i].Result != "acked" || p.Status != queengate.StatusQueued || p.Offset != int64(i+1) || p.Partition != "o-p" ||
			p.TransactionID != "d-p-"+fmt.Sprint(i) || p.MessageID != model.MessageID(p.PartitionID, p.Offset) {
			t.Errorf("item %d: %+v, pushed %+v", i, first.Items[i], p)
		}
	}
	select {
	case w := <-woken:
		if !slices.Equal(txnIDs(w), []string{"d-p-0", "d-p-1", "d-p-2"}) || string(w.Messages[0].Data) != `{"from": "p-0"}` {
			t.Errorf("the woken pop of the output got %+v", w)
		}
	case <-time.After(queengate.MaxWaitMs * time.Millisecond):
		t.Fatal("the output's pop was not woken by the ack-and-push")
	}

	again, err := c.AckAndPush(ctx, e.Queue, "p", req)
	if err != nil || len(again.Pushed) != 3 {
		t.Fatalf("the retry: %+v, %v", again, err)
	}
	for i, p := range again.Pushed {
		if again.Items[i].Result != "alreadyAcked" || p.Status != queengate.StatusDuplicate || p.MessageID != first.Pushed[i].MessageID {
			t.Errorf("retried item %d: %+v, pushed %+v; want alreadyAcked and a duplicate of %s", i, again.Items[i], p, first.Pushed[i].MessageID)
		}
	}
	if n := e.queueCount(t, out); n != 4 {
		t.Errorf("the output holds %d messages, want the seed and 3 derived", n)
	}
}

// ackPushError sends an ack-and-push and returns its *queengate.Error.
func ackPushError(t *testing.T, c *queengate.Client, queue, partition string, req queengate.AckPushRequest) *queengate.Error {
	t.Helper()
	_, err := c.AckAndPush(t.Context(), queue, partition, req)
	werr, ok := err.(*queengate.Error)
	if !ok {
		t.Fatalf("ack-and-push of %d messages: %v, want an error answer", len(req.Push), err)
	}
	return werr
}

// An ack-and-push is all or nothing: a derived message the target
// refuses (bad data, a payload conflict in a queue that rejects them, a
// queue without deduplication) or an item not acked leaves every item
// unsettled and stores no derived message, the valid ones included.
func TestAckAndPushIsAllOrNothing(t *testing.T) {
	t.Parallel()
	e, c := consuming(t, 2, "p")
	ctx := t.Context()
	out, strict, nodedup := e.Queue+"-out", e.Queue+"-strict", e.Queue+"-nodedup"
	e.Push(t, e.Prefix+".push."+strict+".s", []msg{{TransactionID: "taken", Data: 1}})
	reject, zero := model.ConflictReject, 0
	for q, patch := range map[string]model.OptionsPatch{strict: {OnConflict: &reject}, nodedup: {DedupWindowSeconds: &zero}} {
		if _, _, err := e.Store.Configure(ctx, q, patch, false); err != nil {
			t.Fatal(err)
		}
	}
	a, err := c.Pop(ctx, e.Queue, "p", queengate.PopRequest{Group: "g", Max: 10})
	if err != nil || len(a.Messages) != 2 {
		t.Fatalf("pop: %+v, %v", a, err)
	}
	good := queengate.DerivedMessage{Queue: out, TransactionID: "fine", Data: json.RawMessage(`{"ok":true}`)}
	for _, c2 := range []struct {
		bad  queengate.DerivedMessage
		code int
		says string
	}{
		{queengate.DerivedMessage{Queue: out, TransactionID: "big", Data: json.RawMessage(`"` + strings.Repeat("x", 1<<20-20000) + `"`)}, 413, "over the"},
		{queengate.DerivedMessage{Queue: out, TransactionID: strings.Repeat("t", 257)}, 400, `"transactionId" must be a string of 1-256 bytes`},
		{queengate.DerivedMessage{Queue: strict, Partition: "s", TransactionID: "taken", Data: json.RawMessage(`2`)}, 409, "payload conflict"},
		{queengate.DerivedMessage{Queue: nodedup, TransactionID: "n"}, 409, "does not deduplicate"},
	} {
		req := queengate.AckPushRequest{Group: "g", LeaseID: a.LeaseID, Items: completeAll(a), Push: []queengate.DerivedMessage{good, c2.bad}}
		if werr := ackPushError(t, c, e.Queue, "p", req); werr.Code != c2.code || !strings.Contains(werr.Text, c2.says) {
			t.Errorf("derived %s: %v; want %d saying %q", c2.bad.TransactionID, werr, c2.code, c2.says)
		}
	}
	if werr := ackPushError(t, c, e.Queue, "p", queengate.AckPushRequest{Group: "g", LeaseID: a.LeaseID,
		Items: []queengate.AckItem{{TransactionID: "p-0", Status: "completed"}, {TransactionID: "nope", Status: "completed"}},
		Push:  []queengate.DerivedMessage{good}}); werr.Code != 409 || !strings.Contains(werr.Text, "item 1 answered unknownTransactionId") {
		t.Errorf("an unknown item: %v", werr)
	}
	for q, want := range map[string]int{out: 0, strict: 1, nodedup: 0} {
		if n := e.queueCount(t, q); n != want {
			t.Errorf("%s holds %d messages after the refusals, want %d", q, n, want)
		}
	}
	// Nothing was settled: the lease still holds both messages.
	ack, err := c.Ack(ctx, e.Queue, "p", queengate.AckRequest{Group: "g", LeaseID: a.LeaseID, Items: completeAll(a)})
	if err != nil || ack.Items[0].Result != "acked" || ack.Items[1].Result != "acked" || ack.NextOffset != 2 {
		t.Fatalf("the ack after the refusals: %+v, %v", ack, err)
	}
}

// Without the lease (released, here) an ack-and-push pushes nothing and
// settles nothing: the next pop gets the messages again.
func TestAckAndPushWithoutTheLeasePushesNothing(t *testing.T) {
	t.Parallel()
	e, c := consuming(t, 2, "p")
	ctx := t.Context()
	out := e.Queue + "-out"
	a, err := c.Pop(ctx, e.Queue, "p", queengate.PopRequest{Group: "g", Max: 10})
	if err != nil || len(a.Messages) != 2 {
		t.Fatalf("pop: %+v, %v", a, err)
	}
	if _, err := c.Release(ctx, e.Queue, "p", queengate.LeaseRequest{Group: "g", LeaseID: a.LeaseID}); err != nil {
		t.Fatal(err)
	}
	werr := ackPushError(t, c, e.Queue, "p", queengate.AckPushRequest{Group: "g", LeaseID: a.LeaseID, Items: completeAll(a), Push: derivedOf(a, out)})
	if werr.Code != 409 || !strings.Contains(werr.Text, "item 0 answered leaseNotHeld") || !strings.Contains(werr.Text, "nothing was settled or pushed") {
		t.Errorf("an ack-and-push of a released lease: %v", werr)
	}
	if n := e.queueCount(t, out); n != 0 {
		t.Errorf("the output holds %d messages", n)
	}
	again, err := c.Pop(ctx, e.Queue, "p", queengate.PopRequest{Group: "g", Max: 10})
	if err != nil || !slices.Equal(txnIDs(again), []string{"p-0", "p-1"}) {
		t.Errorf("the next pop: %+v, %v; want both messages again", again, err)
	}
	if werr := ackPushError(t, c, e.Queue, "p", queengate.AckPushRequest{Group: "nogroup", LeaseID: a.LeaseID, Items: completeAll(a)}); werr.Code != 404 {
		t.Errorf("an unknown group: %v", werr)
	}
}

// submit pushes ids to queue's partition through ing, bypassing NATS:
// the test chooses which gateway's cache sees the push.
func submit(t *testing.T, ing *ingest.Ingester, queue, partition string, ids ...string) []model.PushOutcome {
	t.Helper()
	done := make(chan []model.PushOutcome, 1)
	req := &ingest.Request{Queue: queue, Partition: partition, Done: func(r []model.PushOutcome) { done <- r }}
	for _, id := range ids {
		req.Messages = append(req.Messages, model.Incoming{TxnID: id, Data: []byte(`{"derived":true}`)})
	}
	if err := ing.Submit(req); err != nil {
		t.Fatal(err)
	}
	return <-done
}

// Derived messages written to a partition whose entry two gateways'
// dedup caches hold: the ack-and-push's verdict is exact (an id a push
// stored before is a duplicate), and afterwards a push of a derived id
// through either gateway answers duplicate of it, while a new id lands
// right after the derived ones.
func TestAckAndPushKeepsEveryGatewaysDedupCacheExact(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	_, ing1 := e.StartGateway(gatewayOpts{Consume: true})
	_, ing2 := e.StartGateway(gatewayOpts{Consume: true})
	e.fill(t, 2, "p")
	c := e.queenClient(t)
	ctx := t.Context()
	out := e.Queue + "-out"
	warm1 := submit(t, ing1, out, "o", "w1", "d-p-0") // d-p-0 is stored before its ack-and-push
	warm2 := submit(t, ing2, out, "o", "w2")
	pid := warm1[0].PartitionID
	if warm2[0].Offset != 2 {
		t.Fatalf("warm-up: %+v, %+v", warm1, warm2)
	}
	submit(t, ing1, out, "o", "w3") // ing1 meets ing2's row: a gap in its entry
	submit(t, ing1, out, "o", "w4") // which this push's fill heals: it vouches again
	for i, ing := range []*ingest.Ingester{ing1, ing2} {
		if st := ing.CacheState(pid); st.State != "vouching" {
			t.Fatalf("gateway %d's cache entry is %+v: the test needs one that vouches", i+1, st)
		}
	}
	a, err := c.Pop(ctx, e.Queue, "p", queengate.PopRequest{Group: "g", Max: 10})
	if err != nil || len(a.Messages) != 2 {
		t.Fatalf("pop: %+v, %v", a, err)
	}
	push := derivedOf(a, out)
	for i := range push {
		push[i].Partition = "o"
	}
	ans, err := c.AckAndPush(ctx, e.Queue, "p", queengate.AckPushRequest{Group: "g", LeaseID: a.LeaseID, Items: completeAll(a), Push: push})
	if err != nil || ans.Pushed[0].Status != queengate.StatusDuplicate || ans.Pushed[0].Offset != 1 ||
		ans.Pushed[1].Status != queengate.StatusQueued || ans.Pushed[1].Offset != 5 {
		t.Fatalf("ack-and-push: %+v, %v; want d-p-0 a duplicate of offset 1, d-p-1 queued at 5", ans, err)
	}
	for i, ing := range []*ingest.Ingester{ing1, ing2} {
		got := submit(t, ing, out, "o", "d-p-1", "d-p-0", fmt.Sprintf("new-%d", i))
		if got[0].Status != model.StatusDuplicate || got[0].Offset != 5 || got[1].Status != model.StatusDuplicate || got[1].Offset != 1 ||
			got[2].Status != model.StatusQueued || got[2].Offset != int64(6+i) {
			t.Errorf("a push through gateway %d after the ack-and-push: %+v", i+1, got)
		}
	}
	// Each entry met rows it did not write above its watermark (a gap):
	// the next push through it fills the gap, and it vouches again, now
	// knowing the derived messages.
	for i, ing := range []*ingest.Ingester{ing1, ing2} {
		before, _ := ing.CacheSummary()
		if got := submit(t, ing, out, "o", "d-p-1"); got[0].Status != model.StatusDuplicate || got[0].Offset != 5 {
			t.Errorf("gateway %d: %+v", i+1, got)
		}
		after, _ := ing.CacheSummary()
		if st := ing.CacheState(pid); st.State != "vouching" || st.VerifiedUpto != 7 || after.Fills <= before.Fills {
			t.Errorf("gateway %d's entry after its next push: %+v, fills %d then %d; want it filled and vouching up to 7",
				i+1, st, before.Fills, after.Fills)
		}
	}
	if n := e.queueCount(t, out); n != 8 {
		t.Errorf("the output holds %d messages, want 8", n)
	}
}
