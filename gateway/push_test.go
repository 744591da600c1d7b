package gateway_test

import (
	"context"
	"fmt"
	queengate "github.com/queengate/queengate"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/queengate/queengate/gateway"
	"github.com/queengate/queengate/model"
)

func TestSpecExampleRetryIsDuplicateOfFirst(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.startGateway(gatewayOpts{})
	body := []msg{{TransactionID: "order-9137-paid", Data: map[string]any{"orderId": 9137, "amount": 99.5}}}
	first := e.push(t, e.subject("customer-42"), body)
	wantStatus(t, first, "queued")
	retry := e.push(t, e.subject("customer-42"), body)
	wantStatus(t, retry, "duplicate")
	if retry[0].MessageID != first[0].MessageID || off(retry[0]) != off(first[0]) || retry[0].PartitionID != first[0].PartitionID {
		t.Errorf("retry answered %+v, want the first message's id %s at offset %d", retry[0], first[0].MessageID, off(first[0]))
	}
	if first[0].MessageID != model.MessageID(first[0].PartitionID, off(first[0])) {
		t.Errorf("messageId %s is not derived from (partition %d, offset %d)", first[0].MessageID, first[0].PartitionID, off(first[0]))
	}
	if n := e.storedCount(t); n != 1 {
		t.Errorf("%d messages stored, want 1", n)
	}
}

func TestSameTransactionIDThreeTimesInOneRequest(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.startGateway(gatewayOpts{})
	got := e.push(t, e.subject(""), msgs("x", "y", "x", "x"))
	wantStatus(t, got, "queued", "queued", "duplicate", "duplicate")
	for _, i := range []int{2, 3} {
		if got[i].MessageID != got[0].MessageID || off(got[i]) != off(got[0]) {
			t.Errorf("repeat %d answered %v, want the first occurrence %v", i, got[i], got[0])
		}
		if got[i].Index != i {
			t.Errorf("answer %d has index %d", i, got[i].Index)
		}
	}
	if n := e.storedCount(t); n != 2 {
		t.Errorf("%d messages stored, want 2", n)
	}
}

func TestFollowersOfStoredDuplicateNameTheOriginal(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.startGateway(gatewayOpts{})
	orig := e.push(t, e.subject("p"), msgs("stored"))
	wantStatus(t, orig, "queued")
	got := e.push(t, e.subject("p"), msgs("stored", "new", "stored", "stored"))
	wantStatus(t, got, "duplicate", "queued", "duplicate", "duplicate")
	for _, i := range []int{0, 2, 3} {
		if got[i].MessageID != orig[0].MessageID {
			t.Errorf("answer %d names %s, want the stored original %s", i, got[i].MessageID, orig[0].MessageID)
		}
	}
}

func TestDefaultPartitionAndMintedTransactionIDs(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.startGateway(gatewayOpts{})
	got := e.push(t, e.subject(""), `[{"data":1},{"data":1},{"transactionId":null}]`)
	wantStatus(t, got, "queued", "queued", "queued")
	if got[0].TransactionID == "" || got[0].TransactionID == got[1].TransactionID {
		t.Errorf("minted ids %q and %q must be present and unique", got[0].TransactionID, got[1].TransactionID)
	}
	viaDefault := e.push(t, e.subject("Default"), []msg{{TransactionID: got[0].TransactionID}})
	wantStatus(t, viaDefault, "duplicate")
	if viaDefault[0].PartitionID != got[0].PartitionID {
		t.Errorf("%s.push.<queue> and .Default are different partitions", e.prefix)
	}
	single := e.push(t, e.subject(""), `{"transactionId":"solo","data":{"a":[1,2]}}`)
	wantStatus(t, single, "queued")
	var data string
	if err := e.store.Pool().QueryRow(context.Background(),
		"SELECT data[1]::text FROM queen.log_segments WHERE partition_id = $1 AND base_offset = $2",
		single[0].PartitionID, off(single[0])).Scan(&data); err != nil {
		t.Fatal(err)
	}
	if data != `{"a":[1,2]}` {
		t.Errorf("stored data %s, want the data as sent", data)
	}
}

func TestRacingProducersQueueEachIDOnce(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.startGateway(gatewayOpts{})
	const producers, ids = 32, 200
	var (
		mu  sync.Mutex
		all []answer
		wg  sync.WaitGroup
	)
	for p := range producers {
		wg.Go(func() {
			for start := 0; start < ids; start += 20 {
				var batch []string
				for i := start; i < start+20; i++ {
					batch = append(batch, fmt.Sprintf("race-%d", (i+p*13)%ids))
				}
				got := e.push(t, e.subject("hot"), msgs(batch...))
				mu.Lock()
				all = append(all, got...)
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	checkExactlyOnce(t, all, ids)
	if n := e.storedCount(t); n != ids {
		t.Errorf("%d messages stored, want %d", n, ids)
	}
}

// checkExactlyOnce asserts one queued answer per id and that every
// duplicate names it.
func checkExactlyOnce(t *testing.T, all []answer, ids int) {
	t.Helper()
	queued := map[string]string{}
	for _, a := range all {
		if a.Status == "queued" {
			if prev, ok := queued[a.TransactionID]; ok {
				t.Errorf("%s queued twice: %s and %s", a.TransactionID, prev, a.MessageID)
			}
			queued[a.TransactionID] = a.MessageID
		}
	}
	if len(queued) != ids {
		t.Fatalf("%d ids queued, want %d", len(queued), ids)
	}
	for _, a := range all {
		switch a.Status {
		case "queued":
		case "duplicate":
			if a.MessageID != queued[a.TransactionID] {
				t.Errorf("duplicate of %s names %s, the original is %s", a.TransactionID, a.MessageID, queued[a.TransactionID])
			}
		default:
			t.Errorf("answer %v", a)
		}
	}
}

func TestFireAndForgetAcksOnAckSubject(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.startGateway(gatewayOpts{})
	acks := make(chan *nats.Msg, 16)
	sub, err := e.client.ChanSubscribe(e.prefix+".ack."+e.queue+".>", acks)
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Unsubscribe()
	if err := e.client.Flush(); err != nil {
		t.Fatal(err)
	}
	if err := e.client.Publish(e.subject("ff"), []byte(`[{"transactionId":"f1"},{"transactionId":"f1"}]`)); err != nil {
		t.Fatal(err)
	}
	if err := e.client.Publish(e.subject(""), []byte(`{"transactionId":"f2"}`)); err != nil {
		t.Fatal(err)
	}
	if err := e.client.Publish(e.subject("ff"), []byte(`[]`)); err != nil {
		t.Fatal(err)
	}
	got := map[string]*nats.Msg{}
	for len(got) < 3 {
		select {
		case m := <-acks:
			key := m.Subject
			if m.Header.Get("Nats-Service-Error-Code") != "" {
				key += "/error"
			}
			got[key] = m
		case <-time.After(30 * time.Second):
			t.Fatalf("got %d acks, want 3: %v", len(got), got)
		}
	}
	ff := got[e.prefix+".ack."+e.queue+".ff"]
	def := got[e.prefix+".ack."+e.queue+".Default"]
	bad := got[e.prefix+".ack."+e.queue+".ff/error"]
	if ff == nil || def == nil || bad == nil {
		t.Fatalf("acks on unexpected subjects: %v", got)
	}
	if !strings.Contains(string(ff.Data), `"status":"queued"`) || !strings.Contains(string(ff.Data), `"status":"duplicate"`) {
		t.Errorf("ack for ff = %s", ff.Data)
	}
	if !strings.Contains(string(def.Data), `"transactionId":"f2","status":"queued"`) {
		t.Errorf("ack for Default = %s", def.Data)
	}
	if bad.Header.Get("Nats-Service-Error-Code") != "400" {
		t.Errorf("error ack headers = %v", bad.Header)
	}
}

func TestBadInputIsRejectedAndStoresNothing(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.startGateway(gatewayOpts{gateway: gateway.Config{MaxBatch: 5}})
	long := strings.Repeat("x", queengate.MaxTxnIDBytes+1)
	cases := []struct {
		name, subject, body string
		code                int
		msgHas              string
	}{
		{"malformed JSON", e.subject("p"), `[{"transactionId":"a"`, 400, "malformed JSON"},
		{"not JSON at all", e.subject("p"), `hello`, 400, "malformed JSON"},
		{"scalar body", e.subject("p"), `42`, 400, "object or an array"},
		{"empty body", e.subject("p"), ``, 400, "empty body"},
		{"empty array", e.subject("p"), `[]`, 400, "empty array"},
		{"non-object element", e.subject("p"), `[{"transactionId":"ok"},7]`, 400, "message 1 is not a JSON object"},
		{"over-long transactionId", e.subject("p"), `[{"transactionId":"` + long + `"}]`, 400, "1-256 bytes"},
		{"empty transactionId", e.subject("p"), `[{"transactionId":""}]`, 400, "1-256 bytes"},
		{"non-string transactionId", e.subject("p"), `[{"transactionId":12}]`, 400, "must be a string"},
		{"misspelt transactionId", e.subject("p"), `{"transactionID":"t-1","data":1}`, 400, `message 0: unknown field "transactionID": a message has only "transactionId" and "data"; did you mean "transactionId"?`},
		{"snake-case fields", e.subject("p"), `[{"transaction_id":"t-1","payload":1}]`, 400, `unknown field "transaction_id"`},
		{"transactionId twice", e.subject("p"), `{"transactionId":"a","transactionId":"b"}`, 400, `field "transactionId" is given twice`},
		{"lone surrogate in data", e.subject("p"), `{"transactionId":"x","data":"\ud800"}`, 400, `message 0: data: unpaired UTF-16 surrogate \ud800`},
		{"NUL escape in data", e.subject("p"), `{"transactionId":"x","data":{"k":"\u0000"}}`, 400, `data: \u0000 (NUL) cannot be stored`},
		{"NUL escape in transactionId", e.subject("p"), `{"transactionId":"a\u0000b"}`, 400, `message 0: transactionId: \u0000 (NUL) cannot be stored`},
		{"over max batch", e.subject("p"), `[{},{},{},{},{},{}]`, 413, "at most 5"},
		{"bad partition name", e.prefix + ".push." + e.queue + ".b@d", `{}`, 400, "bad partition name"},
		{"bad queue name", e.prefix + ".push.q%ue", `{}`, 400, "bad queue name"},
		{"too many tokens", e.subject("p") + ".extra", `{}`, 400, "must be"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			m := e.request(t, c.subject, c.body)
			if got := m.Header.Get("Nats-Service-Error-Code"); got != fmt.Sprint(c.code) {
				t.Fatalf("code header %q, want %d (body %s)", got, c.code, m.Data)
			}
			var we wireErr
			if err := jsonUnmarshal(m.Data, &we); err != nil || we.Error.Code != c.code {
				t.Fatalf("error body %s: %v", m.Data, err)
			}
			if !strings.Contains(we.Error.Message, c.msgHas) || m.Header.Get("Nats-Service-Error") != we.Error.Message {
				t.Errorf("message %q (header %q), want it to mention %q", we.Error.Message, m.Header.Get("Nats-Service-Error"), c.msgHas)
			}
			if h := m.Header.Get("Nats-Service-Error"); strings.IndexFunc(h, func(r rune) bool { return r < 0x20 || r == 0x7f }) >= 0 {
				t.Errorf("header Nats-Service-Error %q carries a control byte", h)
			}
		})
	}
	if n := e.storedCount(t); n != 0 {
		t.Errorf("%d messages stored after rejected requests, want 0", n)
	}
	var queues int
	if err := e.store.Pool().QueryRow(context.Background(),
		"SELECT count(*) FROM queen.queues WHERE name = $1", e.queue).Scan(&queues); err != nil {
		t.Fatal(err)
	}
	if queues != 0 {
		t.Errorf("a rejected request created the queue")
	}
}

func TestTwoGatewaysKeepExactlyOnce(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	_, ing1 := e.startGateway(gatewayOpts{})
	_, ing2 := e.startGateway(gatewayOpts{})
	const producers, ids = 16, 300
	var (
		mu  sync.Mutex
		all []answer
		wg  sync.WaitGroup
	)
	for p := range producers {
		wg.Go(func() {
			for start := 0; start < ids; start += 25 {
				var batch []string
				for i := start; i < start+25; i++ {
					batch = append(batch, fmt.Sprintf("two-%d", (i*7+p*31)%ids))
				}
				got := e.push(t, e.subject(fmt.Sprintf("p%d", start%2)), msgs(batch...))
				mu.Lock()
				all = append(all, got...)
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	// Each id lands in one of two partitions depending on the batch; count
	// exactly-once per (partition, id).
	byPart := map[int64][]answer{}
	for _, a := range all {
		byPart[a.PartitionID] = append(byPart[a.PartitionID], a)
	}
	total := 0
	for _, answers := range byPart {
		seen := map[string]bool{}
		for _, a := range answers {
			seen[a.TransactionID] = true
		}
		checkExactlyOnce(t, answers, len(seen))
		total += len(seen)
	}
	if n := e.storedCount(t); n != total {
		t.Errorf("%d messages stored, want %d", n, total)
	}
	if ing1.Buffered() != 0 || ing2.Buffered() != 0 {
		t.Errorf("buffers not empty after every answer: %d and %d", ing1.Buffered(), ing2.Buffered())
	}
}
