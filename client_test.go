package queengate_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	queengate "github.com/queengate/queengate"
	"github.com/queengate/queengate/internal/checkfor"
	"github.com/queengate/queengate/internal/gatewaytest"
	"github.com/queengate/queengate/internal/pgtest"
)

func TestMain(m *testing.M) { pgtest.Run(m) }

// running is a real gateway and a client connected to it
// (internal/gatewaytest).
type running struct {
	client *queengate.Client
	queue  string
	g      *gatewaytest.Running
}

// clientConn is another connection to the gateway's NATS server.
func (r *running) clientConn(t *testing.T) *nats.Conn { return r.g.ClientConn(t) }

func startGateway(t *testing.T, token string, opts ...queengate.Option) *running {
	t.Helper()
	g := gatewaytest.Start(t, token, opts...)
	return &running{client: g.Client, queue: g.Queue, g: g}
}

// A client's Timeout is WithTimeout's, 10 s without it.
func TestClientTimeout(t *testing.T) {
	t.Parallel()
	for seconds, opts := range map[int][]queengate.Option{10: nil, 3: {queengate.WithTimeout(3 * time.Second)}} {
		c, err := queengate.NewClient(nil, opts...) // a client does not use its connection before its first call
		if err != nil {
			t.Fatal(err)
		}
		if got, want := c.Timeout(), time.Duration(seconds)*time.Second; got != want {
			t.Errorf("Timeout() = %v, want %v", got, want)
		}
	}
}

func msg(id, data string) queengate.Message {
	return queengate.Message{TransactionID: id, Data: json.RawMessage(data)}
}

func TestPushAnswersQueuedThenDuplicateOfTheOriginal(t *testing.T) {
	t.Parallel()
	r := startGateway(t, "")
	ctx := t.Context()
	first, err := r.client.Push(ctx, r.queue, "p", msg("a", `{"n":1}`), msg("b", `2`))
	if err != nil {
		t.Fatal(err)
	}
	again, err := r.client.Push(ctx, r.queue, "p", msg("b", `2`), msg("c", `null`))
	if err != nil {
		t.Fatal(err)
	}
	if first[0].Status != queengate.StatusQueued || first[1].Status != queengate.StatusQueued || first[1].Offset != 1 {
		t.Errorf("first push: %+v", first)
	}
	if again[0].Status != queengate.StatusDuplicate || again[0].MessageID != first[1].MessageID || again[0].Offset != 1 {
		t.Errorf("retry of b: %+v, want duplicate of %+v", again[0], first[1])
	}
	if again[1].Status != queengate.StatusQueued || again[1].Offset != 2 {
		t.Errorf("c: %+v, want queued at 2", again[1])
	}
	minted, err := r.client.Push(ctx, r.queue, "", queengate.Message{Data: json.RawMessage(`"x"`)})
	if err != nil || minted[0].Status != queengate.StatusQueued || minted[0].TransactionID == "" {
		t.Errorf("a push to the Default partition without a transactionId: %+v, %v", minted, err)
	}
}

// Client.Push and ScheduleTimer send data byte for byte as given: a retry
// of data first pushed by other means is a duplicate even on a queue that
// rejects conflicts, and the data reads back as it was written.
func TestPushAndTimersSendDataByteForByte(t *testing.T) {
	t.Parallel()
	r := startGateway(t, "")
	ctx := t.Context()
	if _, err := r.client.Configure(ctx, queengate.ConfigureRequest{Queue: r.queue, OnConflict: "reject"}); err != nil {
		t.Fatal(err)
	}
	raw := `{"transactionId":"sp-1","data":{ "a": 1 }}`
	if _, err := r.clientConn(t).Request(r.client.Subjects().Push(r.queue, "p"), []byte(raw), 10*time.Second); err != nil {
		t.Fatal(err)
	}
	ans, err := r.client.Push(ctx, r.queue, "p", msg("sp-1", `{ "a": 1 }`), msg("sp-2", `{"b": "<i>&</i>", "n": [1, 2]}`))
	if err != nil || ans[0].Status != queengate.StatusDuplicate || ans[0].Conflict || ans[1].Status != queengate.StatusQueued {
		t.Fatalf("a retry of the same data: %+v, %v; want a duplicate without conflict", ans, err)
	}
	conflict, err := r.client.Push(ctx, r.queue, "p", msg("sp-1", `{"a":1}`))
	if err != nil || conflict[0].Status != queengate.StatusFailed || !conflict[0].Conflict || conflict[0].Retryable() {
		t.Errorf("other data for sp-1: %+v, %v; want a failed conflict, not retryable", conflict, err)
	}
	data := `{ "t": "<b>" , "n": 1.0 }`
	if _, err := r.client.ScheduleTimer(ctx, r.queue, "p", queengate.Timer{TransactionID: "tm-1", Data: json.RawMessage(data)}); err != nil {
		t.Fatal(err)
	}
	var stored []string
	checkfor.Check(t, 10*time.Second, func() error {
		read, err := r.client.Read(ctx, r.queue, "p", queengate.ReadRequest{})
		if err != nil {
			return err
		}
		stored = stored[:0]
		for _, m := range read.Messages {
			stored = append(stored, string(m.Data))
		}
		return checkfor.Cond("the timer has not fired", func() bool { return len(stored) == 3 })()
	})
	if want := []string{`{ "a": 1 }`, `{"b": "<i>&</i>", "n": [1, 2]}`, data}; !slices.Equal(stored, want) {
		t.Errorf("stored %q, want %q", stored, want)
	}
	if _, err := r.client.Push(ctx, r.queue, "p", msg("x", `{"a":`)); err == nil || !strings.Contains(err.Error(), "not valid JSON") {
		t.Errorf("a push of invalid data: %v, want it refused before sending", err)
	}
}

func TestPushRejectedAsAWholeIsAnError(t *testing.T) {
	t.Parallel()
	r := startGateway(t, "")
	// \u0000 is valid JSON that PostgreSQL's jsonb cannot hold: the
	// gateway, not the client, refuses it.
	_, err := r.client.Push(t.Context(), r.queue, "p", msg("x", `"\u0000"`))
	var werr *queengate.Error
	if !errors.As(err, &werr) || werr.Code != queengate.CodeBadRequest || werr.Retryable() {
		t.Fatalf("push of data jsonb refuses: %v, want a 400 *queengate.Error", err)
	}
	if _, err := r.client.Push(t.Context(), "bad.queue", "p", msg("x", "1")); err == nil {
		t.Error("a queue name with a dot was sent")
	}
	if _, err := r.client.Push(t.Context(), r.queue, "p"); err == nil {
		t.Error("an empty push was sent")
	}
}

// TestPublishMatchesAcksToTheirRequests publishes concurrently, several
// requests per partition, some with the same transactionIds: each
// Pending gets the answers of its own request.
func TestPublishMatchesAcksToTheirRequests(t *testing.T) {
	t.Parallel()
	r := startGateway(t, "")
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	var wg sync.WaitGroup
	errs := make(chan error, 40)
	for i := range 40 {
		wg.Go(func() {
			part := fmt.Sprintf("p%d", i%4)
			ids := []string{fmt.Sprintf("id-%d", i), fmt.Sprintf("shared-%d", i%4)}
			p, err := r.client.Publish(ctx, r.queue, part, msg(ids[0], "1"), msg(ids[1], "2"))
			if err != nil {
				errs <- err
				return
			}
			answers, err := p.Wait(ctx)
			if err != nil {
				errs <- err
				return
			}
			if len(answers) != 2 || answers[0].TransactionID != ids[0] || answers[0].Status != queengate.StatusQueued ||
				answers[1].TransactionID != ids[1] || answers[1].Status == queengate.StatusFailed {
				errs <- fmt.Errorf("request %d on %s: answers %+v", i, part, answers)
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if _, err := r.client.Publish(ctx, r.queue, "p0", queengate.Message{Data: json.RawMessage("1")}); err == nil {
		t.Error("a fire-and-forget push without a transactionId was sent: its answer could not be matched")
	}
}

func TestTimersThroughTheClient(t *testing.T) {
	t.Parallel()
	r := startGateway(t, "")
	ctx := t.Context()
	s, err := r.client.ScheduleTimer(ctx, r.queue, "p", queengate.Timer{TransactionID: "remind", Data: json.RawMessage(`{"n":1}`), Delay: time.Hour})
	if err != nil || s.Status != "scheduled" || s.TimerID == "" || s.Existing {
		t.Fatalf("schedule: %+v, %v", s, err)
	}
	again, err := r.client.ScheduleTimer(ctx, r.queue, "p", queengate.Timer{TransactionID: "remind", FireAt: time.Now().Add(time.Minute)})
	if err != nil || !again.Existing || again.TimerID != s.TimerID {
		t.Errorf("a retried schedule: %+v, %v; want the pending timer", again, err)
	}
	list, err := r.client.ListTimers(ctx, r.queue, 0)
	if err != nil || len(list.Timers) != 1 || list.Timers[0].TimerID != s.TimerID {
		t.Errorf("list: %+v, %v", list, err)
	}
	for _, want := range []string{"cancelled", "absent"} {
		if c, err := r.client.CancelTimer(ctx, s.TimerID); err != nil || c.Status != want {
			t.Errorf("cancel: %+v, %v; want %s", c, err, want)
		}
	}
}

func TestOperatorAPIThroughTheClient(t *testing.T) {
	t.Parallel()
	r := startGateway(t, "s3cret", queengate.WithAdminToken("s3cret"))
	ctx := t.Context()
	c, err := r.client.Configure(ctx, queengate.ConfigureRequest{Queue: r.queue, Options: map[string]int64{"dedupWindowSeconds": 600}})
	if err != nil || !c.Created || c.Options.DedupWindowSeconds != 600 {
		t.Fatalf("configure: %+v, %v", c, err)
	}
	if _, err := r.client.Push(ctx, r.queue, "p", msg("a", "1")); err != nil {
		t.Fatal(err)
	}
	q, err := r.client.Queue(ctx, r.queue)
	if err != nil || len(q.Partitions) != 1 || q.Partitions[0].StoredMessages != 1 || q.Partitions[0].Queued != 1 {
		t.Errorf("queue: %+v, %v", q, err)
	}
	qs, err := r.client.Queues(ctx)
	if err != nil || len(qs.Queues) == 0 {
		t.Errorf("queues: %+v, %v", qs, err)
	}
	st, err := r.client.Status(ctx)
	if err != nil || !st.Ready || st.Version != "1.2.3" {
		t.Errorf("status: %+v, %v", st, err)
	}
	ov, err := r.client.Overview(ctx, r.queue)
	if err != nil || len(ov.Queues) == 0 || ov.Queues[0].Queue != r.queue || ov.Queues[0].StoredMessages != 1 {
		t.Errorf("overview from %s: %+v, %v; want the queue first, its one message counted", r.queue, ov, err)
	}
	// The word option travels with the numbers: a conflicting retry is
	// then answered as the queue says.
	c, err = r.client.Configure(ctx, queengate.ConfigureRequest{Queue: r.queue, OnConflict: "flag"})
	if err != nil || c.Options.OnConflict != "flag" || c.Options.DedupWindowSeconds != 600 {
		t.Fatalf("configure onConflict: %+v, %v", c, err)
	}
	ans, err := r.client.Push(ctx, r.queue, "p", msg("a", "2"))
	if err != nil || len(ans) != 1 || ans[0].Status != queengate.StatusDuplicate || !ans[0].Conflict {
		t.Errorf("a retry with other data: %+v, %v; want a duplicate marked conflict", ans, err)
	}
	if _, err := r.client.Configure(ctx, queengate.ConfigureRequest{Queue: r.queue, Options: map[string]int64{"dedupWindowSeconds": -1}}); !isCode(err, queengate.CodeBadRequest) {
		t.Errorf("an option out of range: %v, want a 400", err)
	}
	if _, err := r.client.Queue(ctx, "nobody-"+r.queue); !isCode(err, queengate.CodeNotFound) {
		t.Errorf("an unknown queue: %v, want a 404", err)
	}

	anonymous, err := queengate.NewClient(r.clientConn(t))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := anonymous.Status(ctx); !isCode(err, queengate.CodeUnauthorized) {
		t.Errorf("status without the token: %v, want a 401", err)
	}
}

func isCode(err error, code int) bool {
	var werr *queengate.Error
	return errors.As(err, &werr) && werr.Code == code
}

// TestPagingThroughTheClient: the page requests carry their position: a
// queue list from a queue starts at it, a get queue from a partition
// lists it and those after, and timer pages of 2 from each Next list every
// timer once, in order.
func TestPagingThroughTheClient(t *testing.T) {
	t.Parallel()
	r := startGateway(t, "")
	ctx := t.Context()
	for _, p := range []string{"p0", "p1", "p2"} {
		if _, err := r.client.Push(ctx, r.queue, p, msg("a", "1")); err != nil {
			t.Fatal(err)
		}
	}
	qs, err := r.client.QueuesPage(ctx, queengate.QueuesRequest{From: r.queue})
	if err != nil || len(qs.Queues) == 0 || qs.Queues[0].Queue != r.queue || qs.Truncated || qs.NextQueue != "" {
		t.Errorf("queues from %s: %+v, %v", r.queue, qs, err)
	}
	q, err := r.client.QueuePage(ctx, r.queue, queengate.QueueRequest{From: "p1"})
	if err != nil || len(q.Partitions) != 2 || q.Partitions[0].Partition != "p1" || q.Partitions[1].Partition != "p2" || q.PartitionCount != 3 {
		t.Errorf("queue from p1: %+v, %v", q, err)
	}
	if _, err := r.client.QueuePage(ctx, r.queue, queengate.QueueRequest{From: "nosuch"}); !isCode(err, queengate.CodeNotFound) {
		t.Errorf("queue from an unknown partition: %v, want a 404", err)
	}

	var scheduled []string
	for i := range 5 {
		s, err := r.client.ScheduleTimer(ctx, r.queue, "p0", queengate.Timer{TransactionID: fmt.Sprint("t", i), Delay: time.Hour + time.Duration(i)*time.Minute})
		if err != nil {
			t.Fatal(err)
		}
		scheduled = append(scheduled, s.TimerID)
	}
	var listed []string
	req := queengate.TimerListRequest{Queue: r.queue, Limit: 2}
	for pages := 1; ; pages++ {
		page, err := r.client.ListTimersPage(ctx, req)
		if err != nil || pages > 3 {
			t.Fatalf("page %d: %+v, %v", pages, page, err)
		}
		for _, x := range page.Timers {
			listed = append(listed, x.TimerID)
		}
		if page.Next == nil {
			break
		}
		req.From = page.Next
	}
	if !slices.Equal(listed, scheduled) {
		t.Errorf("timer pages listed %v, want %v", listed, scheduled)
	}
}

// TestAppendJSONWritesHeadersAndBinaryData: a message's headers and its
// binary data (base64, with dataEncoding) are written as a push body
// takes them; data and binary together are refused.
func TestAppendJSONWritesHeadersAndBinaryData(t *testing.T) {
	for _, c := range []struct {
		m    queengate.Message
		want string
	}{
		{queengate.Message{TransactionID: "t", Binary: []byte{0, 1}, Headers: queengate.Headers{"b": {"2"}, "a": {"1", "x"}}},
			`{"transactionId":"t","headers":{"a":["1","x"],"b":"2"},"dataEncoding":"base64","data":"AAE="}`},
		{queengate.Message{Binary: []byte{}}, `{"dataEncoding":"base64","data":""}`},
		{queengate.Message{TransactionID: "j", Data: json.RawMessage(`{"k":1}`)}, `{"transactionId":"j","data":{"k":1}}`},
	} {
		got, err := c.m.AppendJSON(nil)
		if err != nil || string(got) != c.want {
			t.Errorf("%+v: %s, %v; want %s", c.m, got, err, c.want)
		}
	}
	if _, err := (queengate.Message{Data: json.RawMessage(`1`), Binary: []byte{1}}).AppendJSON(nil); err == nil {
		t.Error("data and binary together were written")
	}
}
