package gateway_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	queengate "github.com/queengate/queengate"
	"github.com/queengate/queengate/gateway"
	"github.com/queengate/queengate/model"
)

func TestSpecExampleRetryIsDuplicateOfFirst(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.StartGateway(gatewayOpts{})
	body := []msg{{TransactionID: "order-9137-paid", Data: map[string]any{"orderId": 9137, "amount": 99.5}}}
	first := e.Push(t, e.Subject("customer-42"), body)
	wantStatus(t, first, "queued")
	retry := e.Push(t, e.Subject("customer-42"), body)
	wantStatus(t, retry, "duplicate")
	if retry[0].MessageID != first[0].MessageID || off(retry[0]) != off(first[0]) || retry[0].PartitionID != first[0].PartitionID {
		t.Errorf("retry answered %+v, want the first message's id %s at offset %d", retry[0], first[0].MessageID, off(first[0]))
	}
	if first[0].MessageID != model.MessageID(first[0].PartitionID, off(first[0])) {
		t.Errorf("messageId %s is not derived from (partition %d, offset %d)", first[0].MessageID, first[0].PartitionID, off(first[0]))
	}
	if n := e.StoredCount(t); n != 1 {
		t.Errorf("%d messages stored, want 1", n)
	}
}

func TestSameTransactionIDThreeTimesInOneRequest(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.StartGateway(gatewayOpts{})
	got := e.Push(t, e.Subject(""), msgs("x", "y", "x", "x"))
	wantStatus(t, got, "queued", "queued", "duplicate", "duplicate")
	for _, i := range []int{2, 3} {
		if got[i].MessageID != got[0].MessageID || off(got[i]) != off(got[0]) {
			t.Errorf("repeat %d answered %v, want the first occurrence %v", i, got[i], got[0])
		}
		if got[i].Index != i {
			t.Errorf("answer %d has index %d", i, got[i].Index)
		}
	}
	if n := e.StoredCount(t); n != 2 {
		t.Errorf("%d messages stored, want 2", n)
	}
}

func TestFollowersOfStoredDuplicateNameTheOriginal(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.StartGateway(gatewayOpts{})
	orig := e.Push(t, e.Subject("p"), msgs("stored"))
	wantStatus(t, orig, "queued")
	got := e.Push(t, e.Subject("p"), msgs("stored", "new", "stored", "stored"))
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
	e.StartGateway(gatewayOpts{})
	got := e.Push(t, e.Subject(""), `[{"data":1},{"data":1},{"transactionId":null}]`)
	wantStatus(t, got, "queued", "queued", "queued")
	if got[0].TransactionID == "" || got[0].TransactionID == got[1].TransactionID {
		t.Errorf("minted ids %q and %q must be present and unique", got[0].TransactionID, got[1].TransactionID)
	}
	viaDefault := e.Push(t, e.Subject("Default"), []msg{{TransactionID: got[0].TransactionID}})
	wantStatus(t, viaDefault, "duplicate")
	if viaDefault[0].PartitionID != got[0].PartitionID {
		t.Errorf("%s.push.<queue> and .Default are different partitions", e.Prefix)
	}
	single := e.Push(t, e.Subject(""), `{"transactionId":"solo","data":{"a":[1,2]}}`)
	wantStatus(t, single, "queued")
	var data string
	if err := e.Store.Pool().QueryRow(context.Background(),
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
	e.StartGateway(gatewayOpts{})
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
				got := e.Push(t, e.Subject("hot"), msgs(batch...))
				mu.Lock()
				all = append(all, got...)
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	checkExactlyOnce(t, all, ids)
	if n := e.StoredCount(t); n != ids {
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
	e.StartGateway(gatewayOpts{})
	acks := make(chan *nats.Msg, 16)
	sub, err := e.Client.ChanSubscribe(e.Prefix+".ack."+e.Queue+".>", acks)
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Unsubscribe()
	if err := e.Client.Flush(); err != nil {
		t.Fatal(err)
	}
	if err := e.Client.Publish(e.Subject("ff"), []byte(`[{"transactionId":"f1"},{"transactionId":"f1"}]`)); err != nil {
		t.Fatal(err)
	}
	if err := e.Client.Publish(e.Subject(""), []byte(`{"transactionId":"f2"}`)); err != nil {
		t.Fatal(err)
	}
	if err := e.Client.Publish(e.Subject("ff"), []byte(`[]`)); err != nil {
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
	ff := got[e.Prefix+".ack."+e.Queue+".ff"]
	def := got[e.Prefix+".ack."+e.Queue+".Default"]
	bad := got[e.Prefix+".ack."+e.Queue+".ff/error"]
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
	e.StartGateway(gatewayOpts{Gateway: gateway.Config{MaxBatch: 5}})
	long := strings.Repeat("x", queengate.MaxTxnIDBytes+1)
	cases := []struct {
		name, subject, body string
		code                int
		msgHas              string
	}{
		{"malformed JSON", e.Subject("p"), `[{"transactionId":"a"`, 400, "malformed JSON"},
		{"not JSON at all", e.Subject("p"), `hello`, 400, "malformed JSON"},
		{"scalar body", e.Subject("p"), `42`, 400, "object or an array"},
		{"empty body", e.Subject("p"), ``, 400, "empty body"},
		{"empty array", e.Subject("p"), `[]`, 400, "empty array"},
		{"non-object element", e.Subject("p"), `[{"transactionId":"ok"},7]`, 400, "message 1 is not a JSON object"},
		{"over-long transactionId", e.Subject("p"), `[{"transactionId":"` + long + `"}]`, 400, "1-256 bytes"},
		{"empty transactionId", e.Subject("p"), `[{"transactionId":""}]`, 400, "1-256 bytes"},
		{"non-string transactionId", e.Subject("p"), `[{"transactionId":12}]`, 400, "must be a string"},
		{"misspelt transactionId", e.Subject("p"), `{"transactionID":"t-1","data":1}`, 400, `message 0: unknown field "transactionID": a message has only "transactionId", "data", "headers" and "dataEncoding"; did you mean "transactionId"?`},
		{"snake-case fields", e.Subject("p"), `[{"transaction_id":"t-1","payload":1}]`, 400, `unknown field "transaction_id"`},
		{"transactionId twice", e.Subject("p"), `{"transactionId":"a","transactionId":"b"}`, 400, `field "transactionId" is given twice`},
		{"lone surrogate in data", e.Subject("p"), `{"transactionId":"x","data":"\ud800"}`, 400, `message 0: data: unpaired UTF-16 surrogate \ud800`},
		{"NUL escape in data", e.Subject("p"), `{"transactionId":"x","data":{"k":"\u0000"}}`, 400, `data: \u0000 (NUL) cannot be stored`},
		{"NUL escape in transactionId", e.Subject("p"), `{"transactionId":"a\u0000b"}`, 400, `message 0: transactionId: \u0000 (NUL) cannot be stored`},
		{"over max batch", e.Subject("p"), `[{},{},{},{},{},{}]`, 413, "at most 5"},
		{"bad partition name", e.Prefix + ".push." + e.Queue + ".b@d", `{}`, 400, "bad partition name"},
		{"bad queue name", e.Prefix + ".push.q%ue", `{}`, 400, "bad queue name"},
		{"too many tokens", e.Subject("p") + ".extra", `{}`, 400, "must be"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			m := e.Request(t, c.subject, c.body)
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
	if n := e.StoredCount(t); n != 0 {
		t.Errorf("%d messages stored after rejected requests, want 0", n)
	}
	var queues int
	if err := e.Store.Pool().QueryRow(context.Background(),
		"SELECT count(*) FROM queen.queues WHERE name = $1", e.Queue).Scan(&queues); err != nil {
		t.Fatal(err)
	}
	if queues != 0 {
		t.Errorf("a rejected request created the queue")
	}
}

func TestTwoGatewaysKeepExactlyOnce(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	_, ing1 := e.StartGateway(gatewayOpts{})
	_, ing2 := e.StartGateway(gatewayOpts{})
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
				got := e.Push(t, e.Subject(fmt.Sprintf("p%d", start%2)), msgs(batch...))
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
	if n := e.StoredCount(t); n != total {
		t.Errorf("%d messages stored, want %d", n, total)
	}
	if ing1.Buffered() != 0 || ing2.Buffered() != 0 {
		t.Errorf("buffers not empty after every answer: %d and %d", ing1.Buffered(), ing2.Buffered())
	}
}
