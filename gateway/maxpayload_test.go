package gateway_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	queengate "github.com/queengate/queengate"
	"github.com/queengate/queengate/gateway"
	"github.com/queengate/queengate/ingest"
	"github.com/queengate/queengate/internal/gatewaytest"
	"github.com/queengate/queengate/internal/natsembed"
)

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
	limit := int(queengate.MaxDataBytes(gatewaytest.SmallPayload))
	fits := `"` + strings.Repeat("a", limit-2) + `"`
	over := `"` + strings.Repeat("a", limit-1) + `"`

	m := e.Request(t, e.Subject("p"), `[{"transactionId":"small","data":1},{"transactionId":"over","data":`+over+`}]`)
	wantRefused(t, "a push with data over the limit", 413, m.Data, "message 1", strconv.Itoa(limit)+"-byte limit")
	if n := e.StoredCount(t); n != 0 {
		t.Errorf("%d messages stored of a refused push, want 0", n)
	}

	wantStatus(t, e.Push(t, e.Subject("p"), `{"transactionId":"fits","data":`+fits+`}`), "queued")
	status, body := g.ViaNATS(t, "read."+e.Queue+".p", "", `{}`)
	var read struct {
		Messages []struct {
			Data json.RawMessage `json:"data"`
		} `json:"messages"`
	}
	if status != 200 || json.Unmarshal(body, &read) != nil || len(read.Messages) != 1 || string(read.Messages[0].Data) != fits {
		t.Errorf("read of a message of %d bytes of data: %d, %.200s", limit, status, body)
	}

	status, body = g.ViaNATS(t, "timer."+e.Queue+".p", "", `{"transactionId":"t","delayMs":60000,"data":`+over+`}`)
	wantRefused(t, "a timer with data over the limit", 413, body, strconv.Itoa(limit)+"-byte limit")
	if n := e.PendingTimers(t); n != 0 {
		t.Errorf("%d timers pending after a refused schedule, want 0", n)
	}
}

// TestPushWhoseAnswerCouldNotFitIsRefused: a push of more messages than
// one answer can name on the connection is a 413 naming the max payload,
// and stores nothing; fewer are answered.
func TestPushWhoseAnswerCouldNotFitIsRefused(t *testing.T) {
	t.Parallel()
	e := newSmallPayloadEnv(t)
	e.StartGateway(gatewayOpts{})
	many := "[" + strings.Repeat("{},", 999) + "{}]"
	m := e.Request(t, e.Subject("p"), many)
	wantRefused(t, "1000 messages whose answer could not fit", 413, m.Data, strconv.Itoa(gatewaytest.SmallPayload)+" bytes", "send fewer")
	if n := e.StoredCount(t); n != 0 {
		t.Errorf("%d messages stored of a refused push, want 0", n)
	}
	got := e.Push(t, e.Subject("p"), "["+strings.Repeat("{},", 99)+"{}]")
	if len(got) != 100 || got[99].Status != "queued" {
		t.Errorf("100 messages answered %d entries, last %v", len(got), got[len(got)-1])
	}
}

// pushToEach pushes one message to each of n partitions p0…p<n-1> at
// once, and waits for every answer.
func (e *testEnv) pushToEach(t *testing.T, n int) {
	t.Helper()
	inbox := e.Client.NewRespInbox()
	answers, err := e.Client.SubscribeSync(inbox)
	if err != nil {
		t.Fatal(err)
	}
	defer answers.Unsubscribe()
	for i := range n {
		if err := e.Client.PublishRequest(e.Subject("p"+strconv.Itoa(i)), inbox, []byte(`{"data":1}`)); err != nil {
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

// viaFace asks the operator API over NATS (subject and body) or HTTP
// (path, a GET).
func (g *opsGateway) viaFace(t *testing.T, face, subject, body, path string) (int, []byte) {
	t.Helper()
	if face == "nats" {
		return g.ViaNATS(t, subject, "", body)
	}
	return g.ViaHTTP(t, "GET", path, "", "")
}

// fromBody is a paged list's NATS body, from the name from ("": none).
func fromBody(from string) string {
	if from == "" {
		return ""
	}
	return fmt.Sprintf(`{"from":%q}`, from)
}

// fromParameter is a paged list's HTTP parameter.
func fromParameter(from string) string {
	if from == "" {
		return ""
	}
	return "?from=" + url.QueryEscape(from)
}

// pageNames asks for pages from the first until one names no next page
// (page answers a page's names and the next's start), and returns every
// name listed and how many pages followed the first.
func pageNames(t *testing.T, page func(from string) (names []string, next string)) (listed []string, pages int) {
	t.Helper()
	for from := ""; ; pages++ {
		names, next := page(from)
		listed = append(listed, names...)
		if next == "" {
			return listed, pages
		}
		from = next
	}
}

// TestQueueAnswerWithManyPartitionsFits: a queue with more partitions
// than one answer can list answers the first of them that fit, in name
// order, with partitionCount, truncated and nextPartition, over NATS and
// HTTP alike; asking from each nextPartition in turn lists every
// partition exactly once, in order, and the last page names none.
func TestQueueAnswerWithManyPartitionsFits(t *testing.T) {
	t.Parallel()
	e := newSmallPayloadEnv(t)
	g := e.startOpsGateway("", ingest.Config{})
	const partitions = 300
	e.pushToEach(t, partitions)
	names := make([]string, partitions)
	for i := range names {
		names[i] = "p" + strconv.Itoa(i)
	}
	slices.Sort(names)
	for _, face := range []string{"nats", "http"} {
		listed, pages := pageNames(t, func(from string) ([]string, string) {
			status, body := g.viaFace(t, face, "queues.get."+e.Queue, fromBody(from), "/queues/"+e.Queue+fromParameter(from))
			var a queengate.QueueAnswer
			if status != 200 || json.Unmarshal(body, &a) != nil {
				t.Fatalf("%s: get queue from %q: %d %.300s", face, from, status, body)
			}
			if len(body) > gatewaytest.SmallPayload || a.PartitionCount != partitions || len(a.Partitions) == 0 || a.Truncated != (a.NextPartition != "") {
				t.Fatalf("%s: page from %q: %d bytes, partitionCount %d, %d partitions, truncated %v, nextPartition %q",
					face, from, len(body), a.PartitionCount, len(a.Partitions), a.Truncated, a.NextPartition)
			}
			var names []string
			for _, p := range a.Partitions {
				names = append(names, p.Partition)
			}
			return names, a.NextPartition
		})
		if pages == 0 || !slices.Equal(listed, names) {
			t.Errorf("%s: %d pages listed %d partitions %v…; want more than one page, each of the %d once, in name order",
				face, pages+1, len(listed), listed[:min(5, len(listed))], partitions)
		}
	}
	status, body := g.ViaNATS(t, "queues.get."+e.Queue, "", `{"from":"nosuch"}`)
	wantRefused(t, "a page from an unknown partition", 404, body, `"nosuch"`)
	if status != 404 {
		t.Errorf("a page from an unknown partition: %d", status)
	}
	_, body = g.ViaNATS(t, "queues.get."+e.Queue, "", `{"From":"p1"}`)
	wantRefused(t, "a misnamed from", 400, body, `"From"`, `"from"`)
	_, body = g.ViaHTTP(t, "GET", "/queues/"+e.Queue+"?after=p1", "", "")
	wantRefused(t, "an unknown parameter", 400, body, `"after"`, "from")
}

// TestQueueListAndTimerListFit: more queues, or more timers, than one
// answer can list are answered with the first that fit, truncated (the
// queue list with the count of all) and where the next page starts;
// paging on lists every queue and every timer exactly once, in order,
// over NATS and HTTP.
func TestQueueListAndTimerListFit(t *testing.T) {
	t.Parallel()
	e := newSmallPayloadEnv(t)
	g := e.startOpsGateway("", ingest.Config{})
	const queues = 250 // each listed in over 250 bytes: over 64 KiB
	var mine []string
	for i := range queues {
		name := fmt.Sprintf("%s-%03d-%s", e.Queue, i, strings.Repeat("q", 60))
		mine = append(mine, name)
		body := fmt.Sprintf(`{"queue":%q,"options":{"dedupWindowSeconds":60}}`, name)
		if status, answer := g.ViaNATS(t, "configure", "", body); status != 200 {
			t.Fatalf("configure: %d %s", status, answer)
		}
	}
	// The queue list and the overview page alike.
	for _, c := range []struct{ face, subject, path string }{
		{"nats", "queues.list", "/queues"}, {"http", "queues.list", "/queues"},
		{"nats", "overview", "/overview"}, {"http", "overview", "/overview"},
	} {
		face := c.face + " " + c.path
		listed, pages := pageNames(t, func(from string) ([]string, string) {
			status, body := g.viaFace(t, c.face, c.subject, fromBody(from), c.path+fromParameter(from))
			var list struct {
				Queues    []struct{ Queue string }
				Count     int
				Truncated bool
				NextQueue string
			}
			if status != 200 || json.Unmarshal(body, &list) != nil {
				t.Fatalf("%s: list from %q: %d %.300s", face, from, status, body)
			}
			if len(body) > gatewaytest.SmallPayload || list.Count < queues || len(list.Queues) == 0 || list.Truncated != (list.NextQueue != "") {
				t.Fatalf("%s: page from %q: %d bytes, count %d, %d listed, truncated %v, nextQueue %q",
					face, from, len(body), list.Count, len(list.Queues), list.Truncated, list.NextQueue)
			}
			var names []string
			for _, q := range list.Queues {
				names = append(names, q.Queue)
			}
			return names, list.NextQueue
		})
		// Other tests' queues are listed too: in order, each once.
		ours := slices.DeleteFunc(slices.Clone(listed), func(q string) bool { return !strings.HasPrefix(q, e.Queue+"-") })
		if pages == 0 || !slices.IsSorted(listed) || len(slices.Compact(slices.Clone(listed))) != len(listed) || !slices.Equal(ours, mine) {
			t.Errorf("%s: %d pages listed %d queues, %d of this test's; want more than one page, in byte order, each of the %d once",
				face, pages+1, len(listed), len(ours), queues)
		}
	}
	_, body := g.ViaHTTP(t, "GET", "/queues?from="+e.Queue+"-none", "", "")
	wantRefused(t, "a page from an unknown queue", 404, body, e.Queue+"-none")
	_, body = g.ViaNATS(t, "queues.list", "", `{"from":1}`)
	wantRefused(t, "a from not a name", 400, body, `"from" must be a name`, "the JSON number 1")

	const timers = 150                                             // each listed in over 600 bytes: over 64 KiB
	fireAt := time.Now().Add(time.Hour).UTC().Format(time.RFC3339) // one for all: the id orders them
	for i := range timers {
		body := fmt.Sprintf(`{"transactionId":"%03d-%s","fireAt":%q}`, i, strings.Repeat("t", 252), fireAt)
		if i%2 == 1 { // and every other one due a little later
			body = fmt.Sprintf(`{"transactionId":"%03d-%s","delayMs":%d}`, i, strings.Repeat("t", 252), 3600000+i*1000)
		}
		if status, answer := g.ViaNATS(t, "timer."+e.Queue+".p", "", body); status != 200 {
			t.Fatalf("schedule: %d %s", status, answer)
		}
	}
	for _, c := range []struct {
		face  string
		limit int
	}{{"nats", timers}, {"http", timers}, {"nats", 40}, {"http", 40}} {
		pageTimers(t, g, c.face, e.Queue, c.limit, timers)
	}
	status, body := g.ViaNATS(t, "timer.list", "", fmt.Sprintf(`{"queue":%q,"limit":10}`, e.Queue))
	var pending queengate.TimersAnswer
	if status != 200 || json.Unmarshal(body, &pending) != nil || pending.Truncated || len(pending.Timers) != 10 || pending.Next == nil {
		t.Errorf("timer list of 10: %d, truncated %v, %d listed, next %v", status, pending.Truncated, len(pending.Timers), pending.Next)
	}
	_, body = g.ViaHTTP(t, "GET", "/timers?queue="+e.Queue+"&fromFireAt="+fireAt, "", "")
	wantRefused(t, "a position without its timerId", 400, body, "fromFireAt and fromTimerId")
	_, body = g.ViaHTTP(t, "GET", "/timers?after=x", "", "")
	wantRefused(t, "an unknown parameter", 400, body, `"after"`)
}

// pageTimers lists a queue's timers limit at a time from each answer's
// next, and checks that all want arrive, each once, in the list's order
// (fireAt, then timerId), with next on every page but the last.
func pageTimers(t *testing.T, g *opsGateway, face, queue string, limit, want int) {
	t.Helper()
	var listed []queengate.TimerView
	var from *queengate.TimerPosition
	pages := 0
	for ; ; pages++ {
		body := fmt.Sprintf(`{"queue":%q,"limit":%d}`, queue, limit)
		path := fmt.Sprintf("/timers?queue=%s&limit=%d", queue, limit)
		if from != nil {
			at := from.FireAt.Format(time.RFC3339Nano)
			body = fmt.Sprintf(`{"queue":%q,"limit":%d,"from":{"fireAt":%q,"timerId":%q}}`, queue, limit, at, from.TimerID)
			path += "&fromFireAt=" + url.QueryEscape(at) + "&fromTimerId=" + from.TimerID
		}
		status, answer := g.viaFace(t, face, "timer.list", body, path)
		var a queengate.TimersAnswer
		if status != 200 || json.Unmarshal(answer, &a) != nil {
			t.Fatalf("%s: timer list: %d %.300s", face, status, answer)
		}
		if len(answer) > gatewaytest.SmallPayload || len(a.Timers) == 0 || len(a.Timers) > limit {
			t.Fatalf("%s, limit %d: a page of %d bytes, %d timers", face, limit, len(answer), len(a.Timers))
		}
		listed = append(listed, a.Timers...)
		if a.Next == nil {
			break
		}
		from = a.Next
	}
	inOrder := slices.IsSortedFunc(listed, func(a, b queengate.TimerView) int {
		if c := a.FireAt.Compare(b.FireAt); c != 0 {
			return c
		}
		return strings.Compare(a.TimerID, b.TimerID)
	})
	ids := map[string]bool{}
	for _, v := range listed {
		ids[v.TimerID] = true
	}
	if pages == 0 || len(listed) != want || len(ids) != want || !inOrder {
		t.Errorf("%s, limit %d: %d pages listed %d timers, %d distinct, in order %v; want more than one page, each of the %d once, in order",
			face, limit, pages+1, len(listed), len(ids), inOrder, want)
	}
}

// TestGatewayRefusesATooSmallMaxPayload: under MinMaxPayload a message
// could not be delivered with its fields: the gateway does not start.
func TestGatewayRefusesATooSmallMaxPayload(t *testing.T) {
	t.Parallel()
	e := newEnvWith(t, natsembed.Config{Port: -1, MaxPayload: gateway.MinMaxPayload - 1})
	g, err := gateway.New(gateway.Config{}, e.Client, nil, zerolog.Nop(), nil)
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
	large.StartGateway(gatewayOpts{})
	data := `"` + strings.Repeat("a", 100<<10) + `"`
	stored := large.Push(t, large.Subject("p"), `{"transactionId":"big","data":`+data+`}`)
	wantStatus(t, stored, "queued")

	small := newSmallPayloadEnv(t) // the same database
	g := small.startOpsGateway("", ingest.Config{})
	_, body := g.ViaNATS(t, "read."+large.Queue+".p", "", `{}`)
	wantRefused(t, "a read of the large message", 413, body, "offset 0", strconv.Itoa(gatewaytest.SmallPayload-4<<10)+" bytes")
	_, body = g.ViaNATS(t, "message.get", "", `{"messageId":"`+stored[0].MessageID+`"}`)
	wantRefused(t, "a get of the large message", 413, body, stored[0].MessageID)
}
