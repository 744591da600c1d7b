package main

import (
	"context"
	"encoding/json"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	queengate "github.com/queengate/queengate"
	"github.com/queengate/queengate/internal/checkfor"
)

// testConsumeFlowAndDrain: consume --count delivers none beyond its
// count; its --max-ack-pending (with the
// consumer's own name), --max-bytes and --concurrency reach the gateway's
// pops; with --concurrency 2 a second partition is popped while the
// first's line is still being printed; an interrupt drains: the batch in
// hand is printed to its end and acknowledged, and queenctl exits 0.
func testConsumeFlowAndDrain(t *testing.T, tr transport, natsURL string) {
	ctl(t, "", flags(tr.push, "consume", "flow", "--group", "g", "--max-ack-pending", "5")...).expect(t, exitUsage, "give --consumer NAME")
	ctl(t, "", flags(tr.push, "consume", "flow", "--group", "g", "--concurrency", "0")...).expect(t, exitUsage, "--concurrency 1 to")
	ctl(t, "", flags(tr.push, "consume", "flow", "--group", "g", "--partitions", "101")...).expect(t, exitUsage, "--partitions 1 to 100")
	ctl(t, "", flags(tr.push, "consume", "flow", "--group", "g", "--max-bytes", "-1")...).expect(t, exitUsage, "--max-bytes -1: must not be negative")
	ctl(t, "", flags(tr.push, "consume", "flow", "--group", "g", "--lease", "10ms")...).expect(t, exitUsage, "--lease 1s to")
	// --count pops no more than it prints: what it leaves comes next at
	// its first attempt.
	ctl(t, "", flags(tr.push, "push", "counted", "p", `{"c":1}`, `{"c":2}`, `{"c":3}`)...).expect(t, exitOK, "3 queued")
	ctl(t, "", flags(tr.push, "consume", "counted", "--group", "g", "--count", "1")...).expect(t, exitOK, `"c":1`)
	if r := ctl(t, "", flags(tr.push, "consume", "counted", "--group", "g", "--count", "2")...); strings.Count(r.stdout, `"attempts":1`) != 2 {
		t.Errorf("after consume --count 1, the rest is not at its first attempt:\n%s", r.stdout)
	}

	ctl(t, "", flags(tr.push, "push", "flow", "a", `{"a":1}`, `{"a":2}`, `{"a":3}`)...).expect(t, exitOK, "3 queued")
	ctl(t, "", flags(tr.push, "push", "flow", "b", `{"b":1}`, `{"b":2}`, `{"b":3}`)...).expect(t, exitOK, "3 queued")

	watcher, err := nats.Connect(natsURL)
	if err != nil {
		t.Fatal(err)
	}
	defer watcher.Close()
	pops := make(chan queengate.PopRequest, 100)
	if _, err := watcher.Subscribe("queen.consume.pop.>", func(m *nats.Msg) {
		var req queengate.PopRequest
		if json.Unmarshal(m.Data, &req) == nil && req.Group == "g" {
			pops <- req
		}
	}); err != nil {
		t.Fatal(err)
	}
	if err := watcher.Flush(); err != nil {
		t.Fatal(err)
	}

	out := &blockingWriter{printed: make(chan struct{}), release: make(chan struct{})}
	var errOut syncBuffer
	ctx, interrupt := context.WithCancel(context.Background())
	defer interrupt()
	done := make(chan int, 1)
	go func() {
		done <- runEnv(ctx, flags(tr.push, "consume", "flow", "--group", "g", "--consumer", "slow", "--max-ack-pending", "6",
			"--max-bytes", "65536", "--concurrency", "2", "--wait", "1s"),
			func(string) (string, bool) { return "", false }, strings.NewReader(""), out, &errOut)
	}()
	select {
	case <-out.printed: // one partition's first line, held
	case code := <-done:
		t.Fatalf("consume ended before printing: exit %d, %s", code, errOut.String())
	}
	held := "a"
	if strings.Contains(out.String(), `"partition":"b"`) {
		held = "b"
	}
	var seen atomic.Int32
	checkfor.Check(t, 10*time.Second, checkfor.Cond("a second worker's pop while the first prints", func() bool {
		for {
			select {
			case req := <-pops:
				if req.Consumer != "slow" || req.MaxAckPending != 6 || req.MaxBytes != 65536 {
					t.Fatalf("a pop of consume --consumer slow --max-ack-pending 6 --max-bytes 65536: %+v", req)
				}
				seen.Add(1)
			default:
				return seen.Load() >= 2
			}
		}
	}))
	interrupt()
	checkfor.Check(t, 10*time.Second, checkfor.Cond("the drain to begin", func() bool { return strings.Contains(errOut.String(), "draining") }))
	close(out.release)
	if code := <-done; code != exitOK {
		t.Fatalf("interrupted consume: exit %d, %s", code, errOut.String())
	}
	// The batch whose line was held is printed whole; the other partition's
	// whole or not at all (its pop may have come as the drain began).
	for _, p := range []string{"a", "b"} {
		n := strings.Count(out.String(), `"partition":"`+p+`"`)
		if p == held && n != 3 || n != 0 && n != 3 {
			t.Errorf("after an interrupt partition %s printed %d of 3 lines (held: %s):\n%s", p, n, held, out.String())
		}
	}
	r := ctl(t, "", flags(tr.admin, "get", "groups", "flow", "-o", "json")...)
	var ans queengate.GroupsAnswer
	if err := json.Unmarshal([]byte(r.stdout), &ans); err != nil || len(ans.Groups) != 1 {
		t.Fatalf("groups: %s", r.stdout)
	}
	for _, p := range ans.Groups[0].Partitions {
		if printed := strings.Count(out.String(), `"partition":"`+p.Partition+`"`); int64(printed) != p.NextOffset {
			t.Errorf("partition %s: %d lines printed, the group's next offset %d: printed and acknowledged differ", p.Partition, printed, p.NextOffset)
		}
	}
}

// testConsumeSaysWhenIdle: consume of a group with nothing to consume
// says so once on stderr, however many pops wait in vain, then prints
// what arrives.
func testConsumeSaysWhenIdle(t *testing.T, tr transport, natsURL string) {
	ctl(t, "", flags(tr.admin, "configure", "quiet")...).expect(t, exitOK)
	watcher, err := nats.Connect(natsURL)
	if err != nil {
		t.Fatal(err)
	}
	defer watcher.Close()
	var pops atomic.Int32
	if _, err := watcher.Subscribe("queen.consume.pop.quiet", func(*nats.Msg) { pops.Add(1) }); err != nil {
		t.Fatal(err)
	}
	if err := watcher.Flush(); err != nil {
		t.Fatal(err)
	}
	var out, errOut syncBuffer
	done := make(chan int, 1)
	go func() {
		done <- runEnv(context.Background(), flags(tr.push, "consume", "quiet", "--group", "idle", "--count", "1", "--wait", "100ms"),
			func(string) (string, bool) { return "", false }, strings.NewReader(""), &out, &errOut)
	}()
	const waiting = "queenctl: nothing to consume in quiet for group idle yet; waiting (Ctrl-C to stop)\n"
	checkfor.Check(t, 20*time.Second, checkfor.Cond("the waiting line, then more empty pops", func() bool {
		return strings.Contains(errOut.String(), waiting) && pops.Load() >= 4
	}))
	ctl(t, "", flags(tr.push, "push", "quiet", "p", `{"q":1}`)...).expect(t, exitOK, "1 queued")
	if code := <-done; code != exitOK || !strings.Contains(out.String(), `"q":1`) {
		t.Fatalf("consume after the push: exit %d, stdout %s, stderr %s", code, out.String(), errOut.String())
	}
	if n := strings.Count(errOut.String(), "nothing to consume"); n != 1 {
		t.Errorf("the waiting line was printed %d times over %d pops; want once:\n%s", n, pops.Load(), errOut.String())
	}
}
