package main

// Integration tests: queenctl's run against a live queengate daemon (the
// real binary, an embedded NATS, a fresh PostgreSQL database per daemon),
// over --http and over --nats.

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	queengate "github.com/queengate/queengate"
	"github.com/queengate/queengate/internal/ctl/manifest"
	"github.com/queengate/queengate/internal/ctl/queueopt"
	"github.com/queengate/queengate/internal/gatewaybin"
	"github.com/queengate/queengate/internal/pgtest"
)

var (
	binDir      string
	buildOnce   sync.Once
	daemonPath  string
	daemonBuild error
)

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "queenctl-test-")
	if err != nil {
		panic(err)
	}
	binDir = dir
	pgtest.Run(m, func() { _ = os.RemoveAll(dir) })
}

// queengateBinary builds the daemon once per test process, on first use,
// so that running only the unit tests does not build it.
func queengateBinary(t *testing.T) string {
	t.Helper()
	buildOnce.Do(func() {
		daemonPath, daemonBuild = gatewaybin.Build(binDir)
	})
	if daemonBuild != nil {
		t.Fatal(daemonBuild)
	}
	return daemonPath
}

// gateway is a running queengate daemon.
type gateway struct {
	httpURL, natsURL string
}

// startGateway runs the daemon on a fresh database with its embedded NATS
// and extra environment env; it is killed when the test ends.
func startGateway(t *testing.T, env ...string) *gateway {
	t.Helper()
	if testing.Short() {
		t.Skip("starts a queengate daemon and PostgreSQL")
	}
	cmd := exec.Command(queengateBinary(t))
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "QUEEN_") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	cmd.Env = append(cmd.Env, env...)
	cmd.Env = append(cmd.Env,
		"QUEEN_PG_URL="+pgtest.NewDB(t),
		// Port 0 and -1: the daemon picks free ports and logs them, so no
		// other process can take them between our choice and its listen.
		"QUEEN_HTTP_ADDR=127.0.0.1:0",
		"QUEEN_NATS_PORT=-1",
	)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	var (
		mu   sync.Mutex
		logs []string // for the failure message
	)
	ready := make(chan *gateway, 1)
	go func() {
		g := &gateway{}
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			mu.Lock()
			logs = append(logs, sc.Text())
			mu.Unlock()
			var line struct {
				Message string `json:"message"`
				HTTP    string `json:"http"`
				URL     string `json:"url"`
			}
			if json.Unmarshal(sc.Bytes(), &line) != nil {
				continue
			}
			switch line.Message {
			case "embedded NATS server started":
				// nats:// even when the server requires TLS: the tests
				// choose the scheme.
				g.natsURL = "nats://" + line.URL[strings.Index(line.URL, "://")+3:]
			case "queengate serving":
				g.httpURL = "http://" + line.HTTP
				ready <- g
			}
		}
		close(ready)
	}()
	fail := func(why string) {
		mu.Lock()
		defer mu.Unlock()
		t.Fatalf("%s; its log:\n%s", why, strings.Join(logs, "\n"))
	}
	select {
	case g, ok := <-ready:
		if !ok {
			fail("queengate exited before serving")
		}
		return g
	case <-time.After(90 * time.Second):
		fail("queengate did not serve within 90 s")
	}
	return nil
}

// transport is how queenctl reaches the gateway in one variant of a test.
type transport struct {
	name  string
	admin []string // global flags for admin commands
	push  []string // global flags for push
}

func transports(g *gateway) []transport {
	return []transport{
		// With both, admin operations go over HTTP and pushes over NATS.
		{name: "http", admin: []string{"--http", g.httpURL}, push: []string{"--http", g.httpURL, "--nats", g.natsURL}},
		{name: "nats", admin: []string{"--nats", g.natsURL}, push: []string{"--nats", g.natsURL}},
	}
}

func flags(base []string, args ...string) []string {
	return append(append([]string(nil), base...), args...)
}

// jsonOf decodes a -o json output.
func jsonOf[T any](t *testing.T, r result) T {
	t.Helper()
	var v T
	if err := json.Unmarshal([]byte(r.stdout), &v); err != nil {
		t.Fatalf("output is not the expected JSON (%v):\n%s", err, r.stdout)
	}
	return v
}

// options reads one queue's options over the given transport.
func options(t *testing.T, tr transport, queue string) map[string]queueopt.Value {
	t.Helper()
	r := ctl(t, "", flags(tr.admin, "get", "queue", queue, "-o", "json")...)
	r.expect(t, exitOK)
	return jsonOf[queueopt.Config](t, r).Options
}

func wantOptions(t *testing.T, got map[string]queueopt.Value, window, retention int64) {
	t.Helper()
	if !got["dedupWindowSeconds"].Equal(queueopt.Seconds(window)) || !got["retentionSeconds"].Equal(queueopt.Seconds(retention)) {
		t.Errorf("options %v, want dedupWindowSeconds %d, retentionSeconds %d", got, window, retention)
	}
}

const (
	manifestFile   = "../../testdata/manifests/queues.yaml"
	manifestEdited = "../../testdata/manifests/queues-edited.yaml"
	manifestBad    = "../../testdata/manifests/invalid.yaml"
)

// TestLive runs every command against a live gateway, once over HTTP and
// once over NATS, each with its own daemon and database.
func TestLive(t *testing.T) {
	t.Parallel()
	for _, variant := range []string{"http", "nats"} {
		t.Run(variant, func(t *testing.T) {
			t.Parallel()
			g := startGateway(t)
			var tr transport
			for _, c := range transports(g) {
				if c.name == variant {
					tr = c
				}
			}
			testApply(t, tr)
			testConfigure(t, tr)
			testPushAndGet(t, tr)
			testHeadersAndFiles(t, tr)
			testReadBack(t, tr)
			testConsume(t, tr)
			testDeleteGroup(t, tr)
			testCreateAndSeekGroup(t, tr)
			testPurgeAndDeleteQueue(t, tr)
			testGroupsShowDelays(t, tr)
			testExactDataAndEscapes(t, tr, g.natsURL)
			testPrintedBeforeAcknowledged(t, tr, g.natsURL)
			testConsumeFlowAndDrain(t, tr, g.natsURL)
			testConsumeSaysWhenIdle(t, tr, g.natsURL)
			testStatus(t, tr)
			testErrors(t, tr, g)
		})
	}
}

func testApply(t *testing.T, tr transport) {
	// A dry run against an empty gateway: both queues would be created,
	// and nothing is.
	r := ctl(t, "", flags(tr.admin, "apply", "-f", manifestFile, "--dry-run")...)
	r.expect(t, exitOK,
		"payments: create\n  dedupWindowSeconds: 600 (10m)\n  retentionSeconds: 86400 (1d)\n",
		"audit: create\n  dedupWindowSeconds: 0 (off)\n  retentionSeconds: 0 (keep forever), the default\n",
		"dry run: 2 to create, 0 to update, 0 unchanged; nothing was changed")
	ctl(t, "", flags(tr.admin, "get", "queue", "payments")...).expect(t, exitGateway, "gateway answered 404")

	// An invalid manifest: exit 2 and nothing sent (refunds, a valid
	// queue of it, is not created).
	ctl(t, "", flags(tr.admin, "apply", "-f", manifestBad)...).expect(t, exitUsage, "nothing was sent")
	ctl(t, "", flags(tr.admin, "get", "queue", "refunds")...).expect(t, exitGateway, "gateway answered 404")

	// Apply creates both.
	r = ctl(t, "", flags(tr.admin, "apply", "-f", manifestFile)...)
	r.expect(t, exitOK, "QUEUE", "RESULT", "DEDUP WINDOW", "RETENTION")
	for _, line := range []string{"payments  created", "audit     created"} {
		if !strings.Contains(r.stdout, line) {
			t.Errorf("apply output lacks %q:\n%s", line, r.stdout)
		}
	}
	wantOptions(t, options(t, tr, "payments"), 600, 86400)
	wantOptions(t, options(t, tr, "audit"), 0, 0)
	list := jsonOf[struct{ Queues []queueopt.Config }](t, ctl(t, "", flags(tr.admin, "get", "queues", "-o", "json")...))
	if len(list.Queues) != 2 || list.Queues[0].Queue != "audit" || list.Queues[1].Queue != "payments" {
		t.Errorf("get queues: %+v, want audit and payments, sorted", list.Queues)
	}
	r = ctl(t, "", flags(tr.admin, "get", "queues")...)
	r.expect(t, exitOK, "QUEUE", "audit", "0 (off)", "payments", "600 (10m)", "86400 (1d)")

	// Applying the same manifest again: configured, not created; a dry
	// run says unchanged.
	r = ctl(t, "", flags(tr.admin, "apply", "-f", manifestFile, "-o", "json")...)
	r.expect(t, exitOK)
	for _, c := range jsonOf[[]queueopt.Config](t, r) {
		if c.Created == nil || *c.Created {
			t.Errorf("second apply of %s: created %v, want false", c.Queue, c.Created)
		}
	}
	ctl(t, "", flags(tr.admin, "apply", "-f", manifestFile, "--dry-run")...).expect(t, exitOK,
		"payments: unchanged\naudit: unchanged\n", "0 to create, 0 to update, 2 unchanged")

	// The edited manifest omits payments' retention: the dry run shows it
	// returning to its default, and changes nothing.
	r = ctl(t, "", flags(tr.admin, "apply", "-f", manifestEdited, "--dry-run")...)
	r.expect(t, exitOK,
		"payments: update\n  dedupWindowSeconds: 600 (10m) → 900 (15m)\n  retentionSeconds: 86400 (1d) → 0 (keep forever), the default: the manifest omits it\n",
		"audit: unchanged\n",
		"0 to create, 1 to update, 1 unchanged")
	wantOptions(t, options(t, tr, "payments"), 600, 86400)
	diffs := jsonOf[[]manifest.QueueDiff](t, ctl(t, "", flags(tr.admin, "apply", "-f", manifestEdited, "--dry-run", "-o", "json")...))
	if len(diffs) != 2 || diffs[0].Action != "update" || len(diffs[0].Changes) != 2 || diffs[1].Action != "unchanged" {
		t.Errorf("dry run JSON: %+v", diffs)
	}

	// Apply it: replace resets the omitted option.
	ctl(t, "", flags(tr.admin, "apply", "-f", manifestEdited)...).expect(t, exitOK, "configured")
	wantOptions(t, options(t, tr, "payments"), 900, 0)
	wantOptions(t, options(t, tr, "audit"), 0, 0)

	// From stdin, several documents.
	data, err := os.ReadFile("../../testdata/manifests/multi-document.yaml")
	if err != nil {
		t.Fatal(err)
	}
	ctl(t, string(data), flags(tr.admin, "apply", "-f", "-")...).expect(t, exitOK, "orders", "invoices")
	wantOptions(t, options(t, tr, "invoices"), 3600, 604800)
}

func testConfigure(t *testing.T, tr transport) {
	// Merge: only the flag given changes.
	r := ctl(t, "", flags(tr.admin, "configure", "payments", "--retention", "7d")...)
	r.expect(t, exitOK, "queue:", "payments", "dedupWindowSeconds:", "900 (15m)", "retentionSeconds:", "604800 (7d)", "createdAt:", "updatedAt:")
	wantOptions(t, options(t, tr, "payments"), 900, 604800)
	// Replace: the option not given returns to its default.
	c := jsonOf[queueopt.Config](t, ctl(t, "", flags(tr.admin, "configure", "payments", "--dedup-window", "1m", "--replace", "-o", "json")...))
	wantOptions(t, c.Options, 60, 0)
	// A new queue is created from the defaults.
	c = jsonOf[queueopt.Config](t, ctl(t, "", flags(tr.admin, "configure", "fresh", "-o", "json")...))
	if c.Created == nil || !*c.Created {
		t.Errorf("configure of a new queue: created %v, want true", c.Created)
	}
	wantOptions(t, c.Options, 3600, 0)
	ctl(t, "", flags(tr.admin, "configure", "fresh", "--dedup-window", "0")...).expect(t, exitOK, "0 (off)")
	wantOptions(t, options(t, tr, "fresh"), 0, 0)
	// A word option: sent as a string, kept by merge, shown as is.
	ctl(t, "", flags(tr.admin, "configure", "fresh", "--on-conflict", "reject")...).expect(t, exitOK, "onConflict:", "reject")
	if got := options(t, tr, "fresh"); !got["onConflict"].Equal(queueopt.Word("reject")) || !got["dedupWindowSeconds"].Equal(queueopt.Seconds(0)) {
		t.Errorf("after --on-conflict reject: %v", got)
	}
	ctl(t, "", flags(tr.admin, "get", "queues")...).expect(t, exitOK, "ON CONFLICT", "reject")
	// Retry delays: milliseconds on the wire, durations on the command
	// line; a list, shown with its meaning, emptied by none.
	ctl(t, "", flags(tr.admin, "configure", "fresh", "--retry-delay", "5s", "--retry-backoff", "1s,1m,1500ms")...).expect(t, exitOK,
		"retryDelayMs:", "5000 (5s)", "retryBackoffMs:", "[1000, 60000, 1500] (1s, 1m, 1.5s)")
	got := options(t, tr, "fresh")
	if !got["retryDelayMs"].Equal(queueopt.Count(5000)) || !got["retryBackoffMs"].Equal(queueopt.List(1000, 60000, 1500)) || !got["onConflict"].Equal(queueopt.Word("reject")) {
		t.Errorf("after --retry-delay and --retry-backoff: %v", got)
	}
	ctl(t, "", flags(tr.admin, "configure", "fresh", "--retry-backoff", "none")...).expect(t, exitOK, "retryBackoffMs:", "[] (none)")
	ctl(t, "", flags(tr.admin, "configure", "fresh", "--retry-delay", "2d")...).expect(t, exitUsage, "--retry-delay", "at most 1d")
	ctl(t, "", flags(tr.admin, "configure", "fresh", "--retry-backoff", "1s,x")...).expect(t, exitUsage, "--retry-backoff", `"x"`)
	if got := options(t, tr, "fresh"); !got["retryDelayMs"].Equal(queueopt.Count(5000)) || !got["retryBackoffMs"].Equal(queueopt.List()) {
		t.Errorf("after refused flags: %v, want retryDelayMs 5000 and no list", got)
	}
	// maxUnheardDeliveries: a count, its range the gateway's to say.
	ctl(t, "", flags(tr.admin, "configure", "fresh", "--max-unheard-deliveries", "0")...).expect(t, exitOK,
		"maxUnheardDeliveries:", "0 (never count)")
	ctl(t, "", flags(tr.admin, "configure", "fresh", "--max-unheard-deliveries", "1001")...).expect(t, exitGateway,
		`"maxUnheardDeliveries" is 1001: from 0 to 1000`)
	if got := options(t, tr, "fresh"); !got["maxUnheardDeliveries"].Equal(queueopt.Count(0)) {
		t.Errorf("after --max-unheard-deliveries 0 and a refused 1001: %v", got)
	}
}

func testPushAndGet(t *testing.T, tr transport) {
	// From arguments, with a transactionId: the retry is a duplicate of
	// the first, with its messageId.
	first := jsonOf[[]queengate.Result](t, ctl(t, "", flags(tr.push, "push", "orders", "p1", `{"orderId":1}`, "--txn-id", "order-1", "-o", "json")...))
	retry := jsonOf[[]queengate.Result](t, ctl(t, "", flags(tr.push, "push", "orders", "p1", `{"orderId":1}`, "--txn-id", "order-1", "-o", "json")...))
	if len(first) != 1 || first[0].Status != "queued" || len(retry) != 1 || retry[0].Status != "duplicate" ||
		retry[0].MessageID != first[0].MessageID || first[0].MessageID == "" {
		t.Errorf("first %+v, retry %+v: want queued then duplicate with the same messageId", first, retry)
	}
	r := ctl(t, "", flags(tr.push, "push", "orders", "p1", "hello", "--txn-id", "order-1")...)
	r.expect(t, exitOK, "INDEX", "TRANSACTION ID", "STATUS", "MESSAGE ID", "order-1", "duplicate", first[0].MessageID, "0 queued, 1 duplicate, 0 failed")

	// Several arguments, no transactionId: minted, all queued. The
	// partition defaults to Default only without message arguments, so
	// name it.
	r = ctl(t, "", flags(tr.push, "push", "orders", "Default", "1", "two", `{"three":3}`)...)
	r.expect(t, exitOK, "3 queued, 0 duplicate, 0 failed")

	// From stdin: data lines, in batches of 2.
	r = ctl(t, "1\n\n{\"a\":2}\n\"three\"\n[4]\nnull\n", flags(tr.push, "push", "orders", "p2", "--batch", "2")...)
	r.expect(t, exitOK, "5 queued, 0 duplicate, 0 failed")
	for i := range 5 {
		if !strings.Contains(r.stdout, fmt.Sprintf("\n%d ", i)) {
			t.Errorf("stdin push: no answer for index %d:\n%s", i, r.stdout)
		}
	}
	// With --envelope: whole messages; a repeat inside the input and one
	// of the earlier push are duplicates.
	lines := `{"transactionId":"e-1","data":1}
{"transactionId":"e-2","data":2}
{"transactionId":"e-1","data":"again"}
{"transactionId":"order-1","data":null}
{"data":"minted"}
`
	r = ctl(t, lines, flags(tr.push, "push", "orders", "p1", "--envelope", "-o", "json")...)
	r.expect(t, exitOK)
	got := jsonOf[[]queengate.Result](t, r)
	want := []queengate.PushStatus{"queued", "queued", "duplicate", "duplicate", "queued"}
	if len(got) != len(want) {
		t.Fatalf("envelope push: %+v", got)
	}
	for i, a := range got {
		if a.Status != want[i] {
			t.Errorf("envelope line %d: %s, want %s", i+1, a.Status, want[i])
		}
	}
	if got[3].MessageID != first[0].MessageID {
		t.Errorf("order-1 again: messageId %s, want the original %s", got[3].MessageID, first[0].MessageID)
	}

	// The partitions' figures.
	q := jsonOf[queueopt.Config](t, ctl(t, "", flags(tr.admin, "get", "queue", "orders", "-o", "json")...))
	parts := map[string]queengate.PartitionView{}
	for _, p := range q.Partitions {
		parts[p.Partition] = p
	}
	// p1: order-1, e-1, e-2, minted = 4 stored; 4 duplicates answered
	// (the retry, "hello", e-1 again, order-1 again).
	if p := parts["p1"]; p.LastOffset != 3 || p.Messages != 8 || p.Queued != 4 || p.Duplicates != 4 || p.Failed != 0 {
		t.Errorf("p1: %+v, want lastOffset 3, 8 messages answered: 4 queued, 4 duplicates", p)
	}
	// What PostgreSQL holds, whatever this gateway answered since it
	// started: 4 messages from offset 0.
	if p := parts["p1"]; p.FirstOffset != 0 || p.StoredMessages != 4 || p.StoredBytes <= 0 || p.OldestAt == nil || p.NewestAt == nil {
		t.Errorf("p1 stored figures: %+v, want 4 messages from offset 0, their bytes and times", p)
	}
	if p := parts["p2"]; p.LastOffset != 4 || p.Messages != 5 || p.Queued != 5 {
		t.Errorf("p2: %+v, want lastOffset 4, 5 messages queued", p)
	}
	if p := parts["Default"]; p.LastOffset != 2 {
		t.Errorf("Default: %+v, want lastOffset 2", p)
	}
	r = ctl(t, "", flags(tr.admin, "get", "queue", "orders")...)
	r.expect(t, exitOK, "PARTITION", "FIRST OFFSET", "LAST OFFSET", "STORED", "BYTES", "OLDEST", "NEWEST",
		"This gateway (the one that answered), since it started:", "QUEUED", "DUPLICATES", "CACHE", "RESIDENT HASHES", "p1", "p2", "Default")
	ctl(t, "", flags(tr.admin, "get", "queue", "audit")...).expect(t, exitOK, "no partitions yet")
}

// testHeadersAndFiles: --file pushes a file's bytes as binary data and
// --header gives messages headers; get message shows both.
func testHeadersAndFiles(t *testing.T, tr transport) {
	path := filepath.Join(t.TempDir(), "blob.bin")
	if err := os.WriteFile(path, []byte{0, 1, 2, 0xff}, 0o600); err != nil {
		t.Fatal(err)
	}
	got := jsonOf[[]queengate.Result](t, ctl(t, "", flags(tr.push, "push", "files", "p", "--file", path, "--txn-id", "blob-1",
		"--header", "content-type: application/octet-stream", "--header", "x-tag: a", "--header", "x-tag: b", "-o", "json")...))
	if len(got) != 1 || got[0].Status != "queued" {
		t.Fatalf("push --file: %+v", got)
	}
	ctl(t, "", flags(tr.admin, "get", "message", got[0].MessageID)...).expect(t, exitOK,
		`"AAEC/w=="`, "dataEncoding:", "base64", "content-type: application/octet-stream", "x-tag: a, b")
	ctl(t, "", flags(tr.push, "push", "files", "p", "--file", path, "x")...).expect(t, exitUsage, "--file is the one message")
}

func testStatus(t *testing.T, tr transport) {
	r := ctl(t, "", flags(tr.admin, "status")...)
	r.expect(t, exitOK, "ready:", "true", "postgres:", "cache.budgetBytes:", "ingest.bufferedMessages:")
	st := jsonOf[map[string]any](t, ctl(t, "", flags(tr.admin, "status", "-o", "json")...))
	if st["ready"] != true {
		t.Errorf("status: %v", st)
	}
}

func testErrors(t *testing.T, tr transport, g *gateway) {
	ctl(t, "", flags(tr.admin, "get", "queue", "ghost")...).expect(t, exitGateway, "gateway answered 404")
	ctl(t, "", flags(tr.admin, "configure", "ghost", "--dedup-window", "1.5s")...).expect(t, exitUsage, "must be whole seconds")
	ctl(t, "", flags(tr.admin, "configure", "ghost", "--on-conflict", "warn")...).expect(t, exitUsage, `--on-conflict "warn": one of ignore, flag, reject`)
	ctl(t, "", "--http", g.httpURL, "push", "orders", "p1", "x").expect(t, exitUsage, "push needs NATS")
	// A prefix no gateway serves: no responders over NATS.
	if tr.name == "nats" {
		ctl(t, "", flags(tr.admin, "--prefix", "elsewhere", "status")...).expect(t, exitUnreachable, "no gateway answers on elsewhere.status")
	}
	ctl(t, "", flags(tr.push, "--prefix", "elsewhere", "push", "orders", "p1", "x")...).expect(t, exitUnreachable, "no gateway answers on elsewhere.push.orders.p1")

	// A request over the gateway's batch limit is rejected as a whole.
	lines := strings.Repeat("1\n", 1001)
	ctl(t, lines, flags(tr.push, "push", "orders", "big", "--batch", "1001")...).expect(t, exitGateway,
		"lower --batch to at most the gateway's QUEEN_MAX_BATCH", "gateway answered 413")
	for _, p := range jsonOf[queueopt.Config](t, ctl(t, "", flags(tr.admin, "get", "queue", "orders", "-o", "json")...)).Partitions {
		if p.Partition == "big" && p.LastOffset >= 0 {
			t.Errorf("a rejected request stored something: %+v", p)
		}
	}

	// A failed answer, and a rejection in the second batch, from a
	// stand-in gateway on the same NATS under another prefix.
	nc, err := nats.Connect(g.natsURL)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	var n atomic.Int32
	sub, err := nc.Subscribe("standin.push.q.>", func(m *nats.Msg) {
		if strings.HasSuffix(m.Subject, ".failing") {
			_ = m.Respond([]byte(`[{"index":0,"transactionId":"t-1","status":"failed","error":"outcome unknown: connection lost"},` +
				`{"index":1,"transactionId":"t-2","status":"queued","messageId":"m","offset":7}]`))
			return
		}
		if n.Add(1) == 1 {
			_ = m.Respond([]byte(`[{"index":0,"transactionId":"t-1","status":"queued","messageId":"m","offset":1}]`))
			return
		}
		reply := nats.NewMsg(m.Reply)
		reply.Header.Set("Nats-Service-Error-Code", "503")
		reply.Header.Set("Nats-Service-Error", "overloaded")
		reply.Data = []byte(`{"error":{"code":503,"message":"overloaded: retry later"}}`)
		_ = m.RespondMsg(reply)
	})
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Unsubscribe()
	// The subscription must reach the server before queenctl publishes on
	// its own connection.
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	r := ctl(t, "", flags(tr.push, "--prefix", "standin", "push", "q", "failing", "a", "--txn-id", "t-1")...)
	r.expect(t, exitGateway, "1 of 2 messages failed")
	if !strings.Contains(r.stdout, "outcome unknown: connection lost") || !strings.Contains(r.stdout, "1 queued, 0 duplicate, 1 failed") {
		t.Errorf("failed push table:\n%s", r.stdout)
	}
	// The error stands in a column of its own, under its header.
	if lines := strings.Split(r.stdout, "\n"); len(lines) < 2 || strings.Index(lines[0], "ERROR") < 0 ||
		strings.Index(lines[0], "ERROR") != strings.Index(lines[1], "outcome unknown") {
		t.Errorf("the failed push's error is not under an ERROR header:\n%s", r.stdout)
	}
	r = ctl(t, "1\n2\n3\n", flags(tr.push, "--prefix", "standin", "push", "q", "p", "--batch", "1")...)
	r.expect(t, exitGateway, "push: message 1: gateway answered 503: overloaded: retry later (the 1 before were answered above)")
	if !strings.Contains(r.stdout, "t-1") {
		t.Errorf("the first batch's answer is not printed:\n%s", r.stdout)
	}
}

// TestLiveAuth runs a gateway with QUEEN_ADMIN_TOKEN: admin commands need
// the token, over HTTP and NATS alike; a missing or wrong one changes
// nothing and says which setting to fix.
func TestLiveAuth(t *testing.T) {
	t.Parallel()
	g := startGateway(t, "QUEEN_ADMIN_TOKEN=s3cret")
	for _, tr := range transports(g) {
		t.Run(tr.name, func(t *testing.T) {
			ctl(t, "", flags(tr.admin, "status")...).expect(t, exitGateway, "unauthorized: set --token or QUEEN_ADMIN_TOKEN", "401")
			ctl(t, "", flags(tr.admin, "status", "--token", "wrong")...).expect(t, exitGateway, "unauthorized: the gateway refused the admin token: check --token or QUEEN_ADMIN_TOKEN")
			ctl(t, "", flags(tr.admin, "apply", "-f", manifestFile)...).expect(t, exitGateway, "unauthorized", `apply queue "payments"`, "no queue was changed")
			ctl(t, "", flags(tr.admin, "apply", "-f", manifestFile, "--dry-run")...).expect(t, exitGateway, "unauthorized")
			ctl(t, "", flags(tr.admin, "get", "queues", "--token", "wrong")...).expect(t, exitGateway, "unauthorized")
			ok := flags(tr.admin, "--token", "s3cret")
			ctl(t, "", flags(ok, "get", "queue", "payments")...).expect(t, exitGateway, "404")
			ctl(t, "", flags(ok, "status")...).expect(t, exitOK, "ready:")
			ctl(t, "", flags(tr.admin, "timer", "list")...).expect(t, exitGateway, "unauthorized: set --token or QUEEN_ADMIN_TOKEN")
			ctl(t, "", flags(ok, "timer", "list")...).expect(t, exitOK, "no pending timers")
			// The token from the environment.
			ctlEnv(t, map[string]string{"QUEEN_ADMIN_TOKEN": "s3cret"}, "", flags(tr.admin, "get", "queues")...).expect(t, exitOK)
		})
	}
	// Pushing and scheduling need no admin token.
	ctl(t, "", "--nats", g.natsURL, "push", "q", "p", "x").expect(t, exitOK, "1 queued")
	ctl(t, "", "--nats", g.natsURL, "timer", "schedule", "q", "p", "x", "--in", "1h").expect(t, exitOK, "scheduled")
}
