package main

import (
	"context"
	"encoding/json"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	queengate "github.com/queengate/queengate"
	"github.com/queengate/queengate/internal/checkfor"
)

// testReadBack pushes, then reads the partition back, fetches a message
// both ways, explains a verdict, and follows new messages.
func testReadBack(t *testing.T, tr transport) {
	ctl(t, "", flags(tr.push, "push", "books", "p", `{"title":"a"}`, `{"title":"b"}`, `{"title":"c"}`)...).expect(t, exitOK, "3 queued")
	r := ctl(t, "", flags(tr.admin, "read", "books", "p")...)
	r.expect(t, exitOK)
	lines := strings.Split(strings.TrimSpace(r.stdout), "\n")
	if len(lines) != 3 {
		t.Fatalf("read printed %d lines, want 3:\n%s", len(lines), r.stdout)
	}
	var m queengate.StoredMessage
	if err := json.Unmarshal([]byte(lines[1]), &m); err != nil || m.Offset != 1 || string(m.Data) != `{"title":"b"}` {
		t.Fatalf("second line %s: %+v, %v", lines[1], m, err)
	}
	ctl(t, "", flags(tr.admin, "read", "books", "p", "--from", "2", "--max", "1")...).expect(t, exitOK, `"title":"c"`)
	ctl(t, "", flags(tr.admin, "get", "message", m.MessageID)...).expect(t, exitOK, "offset:", "1", `{"title":"b"}`, m.TransactionID)
	ctl(t, "", flags(tr.admin, "get", "message", "books", "p", m.TransactionID, "-o", "json")...).expect(t, exitOK, `"messageId": "`+m.MessageID)
	ctl(t, "", flags(tr.admin, "explain", "books", "p", m.TransactionID)...).expect(t, exitOK, "verdict:", "duplicate", m.MessageID, "a push now answers duplicate")
	ctl(t, "", flags(tr.admin, "explain", "books", "p", "never-pushed")...).expect(t, exitOK, "verdict:", "new", "a push now is stored")
	ctl(t, "", flags(tr.admin, "read", "books", "nowhere")...).expect(t, exitGateway, "gateway answered 404", "does not exist")
	ctl(t, "", flags(tr.admin, "read", "books")...).expect(t, exitUsage, "want QUEUE PARTITION")
	testFollow(t, tr)
}

// syncBuffer is an io.Writer read while it is written.
type syncBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// testFollow: read --follow prints messages pushed after it caught up,
// and ends with exit 0 when interrupted.
func testFollow(t *testing.T, tr transport) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var out, errOut syncBuffer
	done := make(chan int, 1)
	go func() {
		done <- runEnv(ctx, flags(tr.admin, "read", "books", "p", "--follow", "--poll", "20ms"),
			func(string) (string, bool) { return "", false }, strings.NewReader(""), &out, &errOut)
	}()
	checkfor.Check(t, 30*time.Second, checkfor.Cond("follow to print what was there", func() bool { return strings.Count(out.String(), "\n") == 3 }))
	ctl(t, "", flags(tr.push, "push", "books", "p", `{"title":"late"}`)...).expect(t, exitOK, "1 queued")
	checkfor.Check(t, 30*time.Second, checkfor.Cond("follow to print the new message", func() bool { return strings.Contains(out.String(), `"title":"late"`) }))
	cancel()
	if code := <-done; code != exitOK {
		t.Errorf("read --follow interrupted: exit %d (%s), want 0", code, errOut.String())
	}
}

// testConsume consumes as a group with queenctl against the daemon: every
// message once as a JSON line, acknowledged (the group's lag drops to 0),
// and failures dead-lettered at maxAttempts.
func testConsume(t *testing.T, tr transport) {
	ctl(t, "", flags(tr.push, "push", "jobs", "p", `{"job":1}`, `{"job":2}`, `{"job":3}`)...).expect(t, exitOK, "3 queued")
	r := ctl(t, "", flags(tr.push, "consume", "jobs", "--group", "workers", "--count", "3", "--max", "2")...)
	r.expect(t, exitOK)
	lines := strings.Split(strings.TrimSpace(r.stdout), "\n")
	if len(lines) != 3 {
		t.Fatalf("consume printed %d lines, want 3:\n%s", len(lines), r.stdout)
	}
	var d struct {
		Partition string `json:"partition"`
		queengate.Delivery
	}
	if err := json.Unmarshal([]byte(lines[2]), &d); err != nil || d.Offset != 2 || string(d.Data) != `{"job":3}` || d.Attempts != 1 || d.Partition != "p" {
		t.Fatalf("third line %s: %+v, %v", lines[2], d, err)
	}
	ctl(t, "", flags(tr.admin, "get", "groups", "jobs")...).expect(t, exitOK, "GROUP", "workers", "p", "3", "0")
	// Failed twice with maxAttempts 2: dead-lettered.
	ctl(t, "", flags(tr.admin, "configure", "chores", "--max-attempts", "2")...).expect(t, exitOK, "maxAttempts:", "2")
	ctl(t, "", flags(tr.push, "push", "chores", "p", `{"chore":1}`)...).expect(t, exitOK, "1 queued")
	for range 2 {
		ctl(t, "", flags(tr.push, "consume", "chores", "--group", "g", "--count", "1", "--fail", "no time")...).expect(t, exitOK, `"chore":1`)
	}
	ctl(t, "", flags(tr.admin, "read", "chores-dlq", "p")...).expect(t, exitOK, `"error":"no time"`, `"attempts":2`, `"data":{"chore":1}`)
	ctl(t, "", flags(tr.push, "consume", "nosuchqueue", "--group", "g", "--count", "1")...).expect(t, exitGateway, "gateway answered 404", "unknown queue")
	ctl(t, "", flags(tr.push, "consume", "jobs", "--count", "1")...).expect(t, exitUsage, "--group is required")
}

// testExactDataAndEscapes: push sends data byte for byte, so a retry of
// data pushed by other means is a duplicate on a queue that rejects
// conflicts, and says a retry is safe only where it is; strings from
// users and the gateway reach the terminal escaped (a consumer label
// with a terminal escape, in get groups and in get queue, which shows
// the groups).
func testExactDataAndEscapes(t *testing.T, tr transport, natsURL string) {
	ctl(t, "", flags(tr.admin, "configure", "strict", "--on-conflict", "reject")...).expect(t, exitOK, "reject")
	nc, err := nats.Connect(natsURL)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	if _, err := nc.Request("queen.push.strict.p", []byte(`{"transactionId":"sp-1","data":{ "a": 1 }}`), 10*time.Second); err != nil {
		t.Fatal(err)
	}
	ctl(t, "", flags(tr.push, "push", "strict", "p", `{ "a": 1 }`, "--txn-id", "sp-1")...).expect(t, exitOK, "0 queued, 1 duplicate, 0 failed")
	ctl(t, `{"transactionId":"sp-1", "data": { "a": 1 }}`+"\n", flags(tr.push, "push", "strict", "p", "--envelope")...).expect(t, exitOK, "0 queued, 1 duplicate, 0 failed")
	r := ctl(t, "", flags(tr.push, "push", "strict", "p", `{"a":2}`, "--txn-id", "sp-1")...)
	r.expect(t, exitGateway, "1 of 1 messages failed", "1 by a payload conflict", "which a retry fails again")
	if strings.Contains(r.stderr, "is safe") {
		t.Errorf("a payload conflict said to be safe to retry:\n%s", r.stderr)
	}

	// consume prints data byte for byte too.
	ctl(t, "", flags(tr.push, "consume", "strict", "--group", "h", "--count", "1")...).expect(t, exitOK, `"data":{ "a": 1 }`)

	c, err := queengate.NewClient(nc)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Pop(t.Context(), "strict", "p", queengate.PopRequest{Group: "g", Consumer: "\x1b[31mred\n", Max: 1}); err != nil {
		t.Fatal(err)
	}
	r = ctl(t, "", flags(tr.push, "push", "strict", "p", "x", "--txn-id", "\x1b[2Jclear")...)
	r.expect(t, exitOK, `\x1b[2Jclear`)
	for _, args := range [][]string{{"get", "groups", "strict"}, {"get", "queue", "strict"}} {
		r := ctl(t, "", flags(tr.admin, args...)...)
		r.expect(t, exitOK, "GROUP", `\x1b[31mred\n`)
		if strings.Contains(r.stdout, "\x1b") {
			t.Errorf("%v printed a raw escape:\n%q", args, r.stdout)
		}
	}
	ctl(t, "", flags(tr.admin, "get", "queue", "strict")...).expect(t, exitOK, "Consumer groups:", "LEASED BY")
}

// blockingWriter stands for a terminal that takes the first line and then
// hangs (a queenctl killed right after printing): printed is closed at the
// first write, which returns once release is closed.
type blockingWriter struct {
	syncBuffer
	once             sync.Once
	printed, release chan struct{}
}

func (w *blockingWriter) Write(p []byte) (int, error) {
	n, err := w.syncBuffer.Write(p)
	w.once.Do(func() { close(w.printed) })
	<-w.release
	return n, err
}

// testPrintedBeforeAcknowledged: consume acknowledges a batch after
// printing it, as its help says, so a message printed by a consumer that
// never gets to the ack is delivered again once its lease is taken back
// (here by a seek: a lease is renewed while its batch is printed), and
// that consumer's late ack, which settles nothing, ends it with exit 1
// naming the message. The
// batch's lease is renewed at once, confirming its delivery.
func testPrintedBeforeAcknowledged(t *testing.T, tr transport, natsURL string) {
	help := ctl(t, "", "consume", "--help").stdout
	if !strings.Contains(help, "A message is printed before it is acknowledged") || strings.Contains(help, "A message printed is acknowledged") {
		t.Errorf("consume --help does not say when a printed message is acknowledged:\n%s", help)
	}
	ctl(t, "", flags(tr.push, "push", "tasks", "p", `{"task":1}`, "--txn-id", "task-1")...).expect(t, exitOK, "1 queued")
	watcher, err := nats.Connect(natsURL)
	if err != nil {
		t.Fatal(err)
	}
	defer watcher.Close()
	var renewals atomic.Int32
	if _, err := watcher.Subscribe("queen.consume.renew.tasks.p", func(*nats.Msg) { renewals.Add(1) }); err != nil {
		t.Fatal(err)
	}
	if err := watcher.Flush(); err != nil {
		t.Fatal(err)
	}
	out := &blockingWriter{printed: make(chan struct{}), release: make(chan struct{})}
	var errOut syncBuffer
	done := make(chan int, 1)
	go func() {
		done <- runEnv(context.Background(), flags(tr.push, "consume", "tasks", "--group", "g", "--count", "1", "--lease", "1s"),
			func(string) (string, bool) { return "", false }, strings.NewReader(""), out, &errOut)
	}()
	<-out.printed
	checkfor.Check(t, 10*time.Second, checkfor.Cond("the batch's lease renewed at once", func() bool { return renewals.Load() > 0 }))
	ctl(t, "", flags(tr.admin, "seek", "group", "tasks", "g", "--offset", "0", "--yes")...).expect(t, exitOK, "1 leases ended")
	close(out.release)
	if code := <-done; code != exitGateway || !strings.Contains(errOut.String(), "message task-1 was printed but not acknowledged") {
		t.Errorf("the consumer whose ack came late: exit %d, %s", code, errOut.String())
	}
	r := ctl(t, "", flags(tr.push, "consume", "tasks", "--group", "g", "--count", "1", "--wait", "1s")...)
	r.expect(t, exitOK, `"transactionId":"task-1"`)
}
