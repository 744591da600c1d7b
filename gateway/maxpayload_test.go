package gateway_test

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	queengate "github.com/queengate/queengate"
	"github.com/queengate/queengate/gateway"
	"github.com/queengate/queengate/ingest"
)

// smallPayload is the max payload of the embedded servers these tests
// start: small, so that answers reach it cheaply.
const smallPayload = 64 << 10

func newSmallPayloadEnv(t *testing.T) *testEnv {
	t.Helper()
	return newEnvWith(t, gateway.EmbeddedNATS{Port: -1, MaxPayload: smallPayload})
}

// wantRefused checks that body is a whole-request error of code whose
// message says each of says.
func wantRefused(t *testing.T, what string, code int, body []byte, says ...string) {
	t.Helper()
	var we wireErr
	if err := json.Unmarshal(body, &we); err != nil || we.Error.Code != code {
		t.Fatalf("%s answered %s, want a %d", what, body, code)
	}
	for _, s := range says {
		if !strings.Contains(we.Error.Message, s) {
			t.Errorf("%s: %q does not say %q", what, we.Error.Message, s)
		}
	}
}

// TestPushRefusesDataNoAnswerCouldCarry: a message whose data is over
// queengate.MaxDataBytes of the connection's max payload is a 413 naming
// the message and the limit, and nothing of its request is stored; data
// of exactly the limit is stored and read back in one answer. A timer's
// message is held to the same limit.
func TestPushRefusesDataNoAnswerCouldCarry(t *testing.T) {
	t.Parallel()
	e := newSmallPayloadEnv(t)
	g := e.startOpsGateway("", ingest.Config{})
	limit := int(queengate.MaxDataBytes(smallPayload))
	fits := `"` + strings.Repeat("a", limit-2) + `"`
	over := `"` + strings.Repeat("a", limit-1) + `"`

	m := e.request(t, e.subject("p"), `[{"transactionId":"small","data":1},{"transactionId":"over","data":`+over+`}]`)
	wantRefused(t, "a push with data over the limit", 413, m.Data, "message 1", strconv.Itoa(limit)+"-byte limit")
	if n := e.storedCount(t); n != 0 {
		t.Errorf("%d messages stored of a refused push, want 0", n)
	}

	wantStatus(t, e.push(t, e.subject("p"), `{"transactionId":"fits","data":`+fits+`}`), "queued")
	status, body := g.viaNATS(t, "read."+e.queue+".p", "", `{}`)
	var read struct {
		Messages []struct {
			Data json.RawMessage `json:"data"`
		} `json:"messages"`
	}
	if status != 200 || json.Unmarshal(body, &read) != nil || len(read.Messages) != 1 || string(read.Messages[0].Data) != fits {
		t.Errorf("read of a message of %d bytes of data: %d, %.200s", limit, status, body)
	}

	status, body = g.viaNATS(t, "timer."+e.queue+".p", "", `{"transactionId":"t","delayMs":60000,"data":`+over+`}`)
	wantRefused(t, "a timer with data over the limit", 413, body, strconv.Itoa(limit)+"-byte limit")
	if n := e.pendingTimers(t); n != 0 {
		t.Errorf("%d timers pending after a refused schedule, want 0", n)
	}
}

// TestPushWhoseAnswerCouldNotFitIsRefused: a push of more messages than
// one answer can name on the connection is a 413 naming the max payload,
// and stores nothing; fewer are answered.
func TestPushWhoseAnswerCouldNotFitIsRefused(t *testing.T) {
	t.Parallel()
	e := newSmallPayloadEnv(t)
	e.startGateway(gatewayOpts{})
	many := "[" + strings.Repeat("{},", 999) + "{}]"
	m := e.request(t, e.subject("p"), many)
	wantRefused(t, "1000 messages whose answer could not fit", 413, m.Data, strconv.Itoa(smallPayload)+" bytes", "send fewer")
	if n := e.storedCount(t); n != 0 {
		t.Errorf("%d messages stored of a refused push, want 0", n)
	}
	got := e.push(t, e.subject("p"), "["+strings.Repeat("{},", 99)+"{}]")
	if len(got) != 100 || got[99].Status != "queued" {
		t.Errorf("100 messages answered %d entries, last %v", len(got), got[len(got)-1])
	}
}

// pushToEach pushes one message to each of n partitions p0…p<n-1> at
// once, and waits for every answer.
func (e *testEnv) pushToEach(t *testing.T, n int) {
	t.Helper()
	inbox := e.client.NewRespInbox()
	answers, err := e.client.SubscribeSync(inbox)
	if err != nil {
		t.Fatal(err)
	}
	defer answers.Unsubscribe()
	for i := range n {
		if err := e.client.PublishRequest(e.subject("p"+strconv.Itoa(i)), inbox, []byte(`{"data":1}`)); err != nil {
			t.Fatal(err)
		}
	}
	for range n {
		m, err := answers.NextMsg(30 * time.Second)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(m.Data), `"queued"`) {
			t.Fatalf("push answered %s", m.Data)
		}
	}
}

// TestQueueAnswerWithManyPartitionsFits: a queue with more partitions
// than one answer can list answers the first of them that fit, in name
// order, with partitionCount and truncated, over NATS and HTTP alike.
func TestQueueAnswerWithManyPartitionsFits(t *testing.T) {
	t.Parallel()
	e := newSmallPayloadEnv(t)
	g := e.startOpsGateway("", ingest.Config{})
	const partitions = 300
	e.pushToEach(t, partitions)
	for _, face := range []string{"nats", "http"} {
		var status int
		var body []byte
		if face == "nats" {
			status, body = g.viaNATS(t, "queues.get."+e.queue, "", "")
		} else {
			status, body = g.viaHTTP(t, "GET", "/queues/"+e.queue, "", "")
		}
		var a queengate.QueueAnswer
		if status != 200 || json.Unmarshal(body, &a) != nil {
			t.Fatalf("%s: get queue: %d %.300s", face, status, body)
		}
		if len(body) > smallPayload || !a.Truncated || a.PartitionCount != partitions || len(a.Partitions) == 0 || len(a.Partitions) >= partitions {
			t.Errorf("%s: %d bytes, truncated %v, partitionCount %d, %d partitions listed; want under %d bytes, truncated, %d, some",
				face, len(body), a.Truncated, a.PartitionCount, len(a.Partitions), smallPayload, partitions)
		}
		names := make([]string, partitions)
		for i := range names {
			names[i] = "p" + strconv.Itoa(i)
		}
		slices.Sort(names)
		for i, p := range a.Partitions {
			if p.Partition != names[i] {
				t.Fatalf("%s: partition %d is %s, want %s: the first in name order", face, i, p.Partition, names[i])
			}
		}
	}
}

// TestQueueListAndTimerListFit: more queues, or more timers, than one
// answer can list are answered with the first that fit and truncated
// (the queue list with the count of all).
func TestQueueListAndTimerListFit(t *testing.T) {
	t.Parallel()
	e := newSmallPayloadEnv(t)
	g := e.startOpsGateway("", ingest.Config{})
	const queues = 250 // each listed in over 250 bytes: over 64 KiB
	for i := range queues {
		body := fmt.Sprintf(`{"queue":"%s-%03d-%s","options":{"dedupWindowSeconds":60}}`, e.queue, i, strings.Repeat("q", 60))
		if status, answer := g.viaNATS(t, "configure", "", body); status != 200 {
			t.Fatalf("configure: %d %s", status, answer)
		}
	}
	status, body := g.viaNATS(t, "queues.list", "", "")
	var list queengate.QueuesAnswer
	if status != 200 || json.Unmarshal(body, &list) != nil {
		t.Fatalf("queues list: %d %.300s", status, body)
	}
	if len(body) > smallPayload || !list.Truncated || list.Count < queues || len(list.Queues) == 0 || len(list.Queues) >= list.Count {
		t.Errorf("queues list: %d bytes, truncated %v, count %d, %d listed; want under %d bytes, truncated, at least %d, some",
			len(body), list.Truncated, list.Count, len(list.Queues), smallPayload, queues)
	}
	if !slices.IsSortedFunc(list.Queues, func(a, b queengate.QueueView) int { return strings.Compare(a.Queue, b.Queue) }) {
		t.Error("queues list is not in name order")
	}

	const timers = 150 // each listed in over 600 bytes: over 64 KiB
	for i := range timers {
		body := fmt.Sprintf(`{"transactionId":"%03d-%s","delayMs":3600000}`, i, strings.Repeat("t", 252))
		if status, answer := g.viaNATS(t, "timer."+e.queue+".p", "", body); status != 200 {
			t.Fatalf("schedule: %d %s", status, answer)
		}
	}
	status, body = g.viaNATS(t, "timer.list", "", fmt.Sprintf(`{"queue":%q,"limit":%d}`, e.queue, timers))
	var pending queengate.TimersAnswer
	if status != 200 || json.Unmarshal(body, &pending) != nil {
		t.Fatalf("timer list: %d %.300s", status, body)
	}
	if len(body) > smallPayload || !pending.Truncated || len(pending.Timers) == 0 || len(pending.Timers) >= timers {
		t.Errorf("timer list: %d bytes, truncated %v, %d listed; want under %d bytes, truncated, some", len(body), pending.Truncated, len(pending.Timers), smallPayload)
	}
	status, body = g.viaNATS(t, "timer.list", "", fmt.Sprintf(`{"queue":%q,"limit":10}`, e.queue))
	pending = queengate.TimersAnswer{}
	if status != 200 || json.Unmarshal(body, &pending) != nil || pending.Truncated || len(pending.Timers) != 10 {
		t.Errorf("timer list of 10: %d, truncated %v, %d listed", status, pending.Truncated, len(pending.Timers))
	}
}

// TestGatewayRefusesATooSmallMaxPayload: under MinMaxPayload a message
// could not be delivered with its fields: the gateway does not start.
func TestGatewayRefusesATooSmallMaxPayload(t *testing.T) {
	t.Parallel()
	e := newEnvWith(t, gateway.EmbeddedNATS{Port: -1, MaxPayload: gateway.MinMaxPayload - 1})
	g, err := gateway.New(gateway.Config{}, e.client, nil, zerolog.Nop(), nil)
	if err != nil {
		t.Fatal(err)
	}
	err = g.Start(context.Background())
	if err == nil || !strings.Contains(err.Error(), strconv.Itoa(gateway.MinMaxPayload)) {
		t.Errorf("Start on a %d-byte max payload: %v, want an error naming %d", gateway.MinMaxPayload-1, err, gateway.MinMaxPayload)
	}
}

// TestStoredMessageOverTheLimitIsRefusedNotDropped: a message stored
// while the max payload was larger (another server, since) is answered a
// 413 naming it by a read or a message get that cannot carry it, rather
// than an answer NATS would refuse.
func TestStoredMessageOverTheLimitIsRefusedNotDropped(t *testing.T) {
	t.Parallel()
	large := newEnv(t) // 1 MiB
	large.startGateway(gatewayOpts{})
	data := `"` + strings.Repeat("a", 100<<10) + `"`
	stored := large.push(t, large.subject("p"), `{"transactionId":"big","data":`+data+`}`)
	wantStatus(t, stored, "queued")

	small := newSmallPayloadEnv(t) // the same database
	g := small.startOpsGateway("", ingest.Config{})
	_, body := g.viaNATS(t, "read."+large.queue+".p", "", `{}`)
	wantRefused(t, "a read of the large message", 413, body, "offset 0", strconv.Itoa(smallPayload-4<<10)+" bytes")
	_, body = g.viaNATS(t, "message.get", "", `{"messageId":"`+stored[0].MessageID+`"}`)
	wantRefused(t, "a get of the large message", 413, body, stored[0].MessageID)
}
