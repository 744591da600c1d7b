package operator_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"reflect"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	queengate "github.com/queengate/queengate"
	"github.com/queengate/queengate/ingest"
	"github.com/queengate/queengate/internal/checkfor"
)

// docFields are the field lists docs/protocol.md and docs/admin-api.md
// give each answer: after a line `<!-- fields: <answer> -->`, a table
// whose rows name an object of the answer ("the answer" itself, `x` for
// the object in field x, `x[]` for each object of the array x, joined
// with dots below) and its fields, those not always sent marked `?`.
type docFields map[string]map[string]map[string]bool // answer → object → field → always sent

var (
	fieldsMarker = regexp.MustCompile(`^<!-- fields: ([a-z-]+) -->$`)
	fieldName    = regexp.MustCompile("`([A-Za-z]+)`(\\?)?")
)

// readDocFields parses the field lists of the documents named.
func readDocFields(t *testing.T, docs ...string) docFields {
	t.Helper()
	out := docFields{}
	for _, doc := range docs {
		raw, err := os.ReadFile(doc)
		if err != nil {
			t.Fatal(err)
		}
		lines := strings.Split(string(raw), "\n")
		for i := 0; i < len(lines); i++ {
			m := fieldsMarker.FindStringSubmatch(lines[i])
			if m == nil {
				continue
			}
			if out[m[1]] != nil {
				t.Fatalf("%s: the fields of %s are listed twice", doc, m[1])
			}
			objects := map[string]map[string]bool{}
			for i += 3; i < len(lines) && strings.HasPrefix(lines[i], "|"); i++ { // past the heading and rule
				cells := strings.Split(lines[i], "|")
				if len(cells) < 4 {
					t.Fatalf("%s: %q: want | object | fields |", doc, lines[i])
				}
				fields := map[string]bool{}
				for _, f := range fieldName.FindAllStringSubmatch(cells[2], -1) {
					fields[f[1]] = f[2] == ""
				}
				objects[objectPath(cells[1])] = fields
			}
			out[m[1]] = objects
		}
	}
	return out
}

// objectPath is a table's object as compareFields names it: "answer"
// for the body ("the answer", "the dead letter's data"), "answer[]" for
// each entry of a body that is an array, the path in backticks else.
func objectPath(cell string) string {
	cell = strings.TrimSpace(cell)
	switch {
	case cell == "each entry":
		return "answer[]"
	case strings.HasPrefix(cell, "the "):
		return "answer"
	}
	return strings.Trim(cell, "`")
}

// opaque fields hold what a producer sent, not the gateway's layout.
var opaque = map[string]bool{"data": true}

// compareFields checks the answers sent under one name against its
// documented objects: every field sent is documented, every field
// documented without `?` is in every object sent, and every field
// documented with `?` is in one at least, unless unseen names it.
func compareFields(t *testing.T, name string, doc map[string]map[string]bool, sent []any, unseen []string) {
	t.Helper()
	seen := map[string]map[string]int{} // object → field → times sent
	count := map[string]int{}
	var walk func(path string, v any)
	walk = func(path string, v any) {
		switch v := v.(type) {
		case map[string]any:
			fields, ok := doc[path]
			if !ok {
				t.Errorf("%s: the object %s is sent but its fields are not documented", name, path)
				return
			}
			count[path]++
			if seen[path] == nil {
				seen[path] = map[string]int{}
			}
			for k, val := range v {
				seen[path][k]++
				if _, ok := fields[k]; !ok {
					t.Errorf("%s: %s sends %q, which is not documented (%s)", name, path, k, abbrev(v))
				}
				if !opaque[k] {
					walk(join(path, k), val)
				}
			}
		case []any:
			for _, e := range v {
				walk(path+"[]", e)
			}
		}
	}
	for _, s := range sent {
		walk("answer", s)
	}
	for path, fields := range doc {
		for f, always := range fields {
			n := seen[path][f]
			switch {
			case slices.Contains(unseen, path+"."+f):
			case always && n != count[path]:
				t.Errorf("%s: %s documents %q as always sent, but %d of %d were sent without it", name, path, f, count[path]-n, count[path])
			case n == 0:
				t.Errorf("%s: %s documents %q, which no answer of this test sent", name, path, f)
			}
		}
	}
}

// join names the object in field k of the object at path.
func join(path, k string) string {
	if path == "answer" {
		return k
	}
	if strings.HasSuffix(path, "answer[]") {
		return path[:len(path)-len("answer[]")] + k
	}
	return path + "." + k
}

func abbrev(v any) string {
	b, _ := json.Marshal(v)
	if len(b) > 300 {
		b = append(b[:300], "…"...)
	}
	return string(b)
}

// answers gathers what the gateway answers, by documented answer name.
type answers struct {
	t    *testing.T
	g    *opsGateway
	sent map[string][]any
}

// nats sends body on subject (after the prefix) and records the answer,
// which must be a success, under name ("": not recorded).
func (a *answers) nats(name, subject, body string) map[string]any {
	a.t.Helper()
	code, raw := a.g.ViaNATS(a.t, subject, "", body)
	if code != 200 {
		a.t.Fatalf("%s %s: %d %s", subject, body, code, raw)
	}
	return a.record(name, raw)
}

// http is nats over the admin HTTP.
func (a *answers) http(name, method, path, body string) map[string]any {
	a.t.Helper()
	code, raw := a.g.ViaHTTP(a.t, method, path, "", body)
	if code != 200 {
		a.t.Fatalf("%s %s: %d %s", method, path, code, raw)
	}
	return a.record(name, raw)
}

func (a *answers) record(name string, raw []byte) map[string]any {
	a.t.Helper()
	var v any
	d := json.NewDecoder(bytes.NewReader(raw))
	d.UseNumber()
	if err := d.Decode(&v); err != nil {
		a.t.Fatalf("%s: %s: %v", name, raw, err)
	}
	if name != "" {
		a.sent[name] = append(a.sent[name], v)
	}
	m, _ := v.(map[string]any)
	return m
}

// TestAnswersAreDocumented: every answer body the two protocol documents
// describe, triggered against a real gateway, sends exactly the fields
// its documented list names.
func TestAnswersAreDocumented(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	// A reading with every field: the watcher that makes it is the
	// daemon's; the encoding is the gateway's.
	wait := false
	e.Durability = func() *queengate.DurabilityStat {
		return &queengate.DurabilityStat{Level: "local-disk", SynchronousCommit: "on", Fsync: true, SynchronousStandbyNames: "pg_b",
			Standbys: []queengate.StandbyStat{{Name: "pg_b", SyncState: "potential"}}, CommitsWait: &wait,
			Warning: "no synchronous standby streams", CheckedAt: time.Now()}
	}
	g := e.startOpsGateway("", ingest.Config{})
	doc := readDocFields(t, "../docs/protocol.md", "../docs/admin-api.md")
	a := &answers{t: t, g: g, sent: map[string][]any{}}
	triggerAnswers(t, e, a)
	var names []string
	for name := range doc {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		if len(a.sent[name]) == 0 {
			t.Errorf("%s: documented, but this test triggers no such answer", name)
			continue
		}
		compareFields(t, name, doc[name], a.sent[name], unseenFields[name])
	}
	for name := range a.sent {
		if doc[name] == nil {
			t.Errorf("%s: answered, but no document lists its fields (<!-- fields: %s -->)", name, name)
		}
	}
}

// unseenFields are documented fields this test cannot make the gateway
// send, each with why; other tests cover them.
var unseenFields = map[string][]string{
	// Cut to the max payload: the paging tests (operator, consume,
	// timers) fill answers past it.
	"queues":       {"answer.truncated", "answer.nextQueue"},
	"overview":     {"answer.truncated", "answer.nextQueue"},
	"queue":        {"answer.truncated", "answer.nextPartition", "groups[].nextPartition"},
	"groups":       {"groups[].nextPartition"},
	"group-create": {"answer.truncated"},
	"group-seek":   {"answer.truncated"},
	"timer-list":   {"answer.truncated"},
	// Selected dead letters left beyond the limit: the redrive tests.
	"redrive": {"answer.more"},
	// Data near the limit, retention of an original, or ids stored
	// more than 100 times: the dead-letter and explain tests.
	"dead-letter": {"answer.dataOmitted", "dataOmitted.bytes"},
	"explain":     {"answer.originalDataGone", "cache.offsetsTruncated"},
	// The ack answer's own fields are checked under "ack".
	"pop": {"ack.deadLettered", "acks[].deadLettered", "more[].messages[].lastError"},
	// The gateway's readiness check is the daemon's (package server).
	"readyz": {"answer.gateway"},
}

// triggerAnswers sends the requests whose answers the documents describe.
func triggerAnswers(t *testing.T, e *testEnv, a *answers) {
	t.Helper()
	q, p := e.Queue, "p"
	a.nats("configure", "configure", fmt.Sprintf(`{"queue":%q,"options":{"onConflict":"flag","maxAttempts":2}}`, q))
	a.http("configure", "POST", "/configure", fmt.Sprintf(`{"queue":%q}`, q))
	a.nats("push", "push."+q+"."+p, `[{"transactionId":"t-0","data":{"n":0}},{"transactionId":"t-1","data":{"n":1}},{"transactionId":"t-2"}]`)
	a.nats("push", "push."+q+"."+p, `[{"transactionId":"t-0","data":{"n":"other"}}]`)
	reject := q + "-r"
	a.nats("", "configure", fmt.Sprintf(`{"queue":%q,"options":{"onConflict":"reject"}}`, reject))
	a.nats("", "push."+reject, `{"transactionId":"r","data":1}`)
	a.nats("push", "push."+reject, `{"transactionId":"r","data":2}`)

	timer := a.nats("timer-schedule", "timer."+q+"."+p, `{"transactionId":"tm-1","delayMs":3600000}`)
	a.nats("timer-schedule", "timer."+q+"."+p, `{"transactionId":"tm-1","delayMs":60000}`)
	a.nats("", "timer."+q+"."+p, `{"transactionId":"tm-2","delayMs":7200000}`)
	a.nats("timer-list", "timer.list", fmt.Sprintf(`{"queue":%q,"limit":1}`, q))
	a.http("timer-list", "GET", "/timers?queue="+q, "")
	a.nats("timer-cancel", "timer.cancel", fmt.Sprintf(`{"timerId":%q}`, timer["timerId"]))
	a.nats("timer-cancel", "timer.cancel", fmt.Sprintf(`{"timerId":%q}`, timer["timerId"]))

	read := a.nats("read", "read."+q+"."+p, `{}`)
	a.nats("message", "message.get", fmt.Sprintf(`{"messageId":%q}`, read["messages"].([]any)[0].(map[string]any)["messageId"]))
	a.http("message", "GET", "/queues/"+q+"/partitions/"+p+"/transactions/t-1", "")
	a.nats("explain", "explain."+q+"."+p, `{"transactionId":"t-0"}`)
	a.nats("explain", "explain."+q+"."+p, `{"transactionId":"t-0","data":{"n":"other"}}`)
	a.nats("explain", "explain."+q+"."+p, `{"transactionId":"nothing-such"}`)

	triggerConsuming(t, a, q, p)
	triggerSeeks(t, a, q)
	triggerDeadLetters(t, a, q, p)
	triggerOperator(t, a, q, p)
	a.sent["error"] = append(a.sent["error"], a.record("", errorBody(t, a, "queues.get.no-such-queue")))
}

// errorBody is the error answer to subject.
func errorBody(t *testing.T, a *answers, subject string) []byte {
	t.Helper()
	code, raw := a.g.ViaNATS(t, subject, "", "")
	if code == 200 {
		t.Fatalf("%s: answered %s, want an error", subject, raw)
	}
	return raw
}

// longError is a failure's error over the 256 bytes a dead-letter list
// shows, in two-byte characters (256 is a character boundary).
var longError = strings.Repeat("é", 150)

// triggerConsuming pops, acks, leases, dead-letters and redrives.
func triggerConsuming(t *testing.T, a *answers, q, p string) {
	t.Helper()
	a.nats("group-create", "consume.create."+q+".g1", ``)
	again := a.nats("group-create", "consume.create."+q+".g1", ``)
	if again["created"] != false || again["partitions"] != json.Number("0") || !reflect.DeepEqual(again["changes"], []any{}) {
		t.Errorf("a create of a group that exists: %v; want created false, partitions 0 and no changes, as documented", again)
	}
	a.nats("group-create", "consume.create."+q+".g2", `{"start":"latest"}`)
	a.nats("group-create", "consume.create."+q+".g5", `{"time":"2000-01-01T00:00:00Z"}`)
	a.nats("group-create", "consume.create."+q+".g7", fmt.Sprintf(`{"offsets":{%q:1000}}`, p))
	pop := a.nats("pop", "consume.pop."+q+"."+p, `{"group":"g1","max":1,"consumer":"w1"}`)
	lease := pop["leaseId"].(string)
	a.nats("renew", "consume.renew."+q+"."+p, fmt.Sprintf(`{"group":"g1","leaseId":%q,"leaseMs":30000}`, lease))
	a.nats("ack", "consume.ack."+q+"."+p, fmt.Sprintf(`{"group":"g1","leaseId":%q,"items":[{"offset":0,"status":"failed","error":"boom"}]}`, lease))
	// Attempt 2 of offset 0, with its lastError, fails again: out of attempts.
	pop = a.nats("pop", "consume.pop."+q+"."+p, `{"group":"g1","max":1}`)
	lease = pop["leaseId"].(string)
	a.nats("ack", "consume.ack."+q+"."+p, fmt.Sprintf(`{"group":"g1","leaseId":%q,"items":[{"transactionId":"t-0","status":"failed","error":%q}]}`, lease, longError))
	pop = a.nats("pop", "consume.pop."+q+"."+p, `{"group":"g1","max":1}`)
	a.nats("pop", "consume.pop."+q+"."+p, fmt.Sprintf(`{"group":"g1","max":1,"ack":{"partition":%q,"leaseId":%q,"items":[{"transactionId":"t-1","status":"completed"}]}}`, p, pop["leaseId"]))
	deadLetterByLeases(t, a, q, p, "g5")
	a.nats("", "push."+q+"."+p, `{"transactionId":"t-3"}`)
	pop = a.nats("pop", "consume.pop."+q+"."+p, `{"group":"g2","max":1}`)
	a.nats("ackpush", "consume.ackpush."+q+"."+p, fmt.Sprintf(`{"group":"g2","leaseId":%q,"items":[{"transactionId":"t-3","status":"completed"}],
		"push":[{"queue":%q,"partition":"eu","transactionId":"out-3","data":1},{"queue":%q,"partition":%q,"transactionId":"t-1","data":"other"}]}`,
		pop["leaseId"], q+"-out", q, p))
	a.nats("pop", "consume.pop."+q+"."+p, `{"group":"g2","max":1}`) // nothing left: no lease
	pop = a.nats("pop", "consume.pop."+q+"."+p, `{"group":"g3","max":1,"consumer":"w3"}`)
	a.nats("release", "consume.release."+q+"."+p, fmt.Sprintf(`{"group":"g3","leaseId":%q}`, pop["leaseId"]))
	pop = a.nats("pop", "consume.pop."+q+"."+p, `{"group":"g6","max":1}`)
	a.nats("ack", "consume.ack."+q+"."+p, fmt.Sprintf(`{"group":"g6","leaseId":%q,"items":[{"offset":0,"status":"failed","delayMs":3600000}]}`, pop["leaseId"]))
	unconfirmed(t, a, q, p, "g4")
	multiPartition(a, q)
	a.nats("groups", "consume.groups."+q, ``)
	a.http("groups", "GET", "/queues/"+q+"/groups", "")
	a.http("queue", "GET", "/queues/"+q, "")
}

// multiPartition pops over two partitions for a new group, and acks the
// second one's lease with the next pop's "acks".
func multiPartition(a *answers, q string) {
	a.nats("", "push."+q+".p2", `{"transactionId":"m-1"}`)
	multi := a.nats("pop", "consume.pop."+q, `{"group":"g8","max":100,"partitions":2}`)
	more := multi["more"].([]any)[0].(map[string]any)
	a.nats("pop", "consume.pop."+q, fmt.Sprintf(`{"group":"g8","max":1,"acks":[{"partition":%q,"leaseId":%q,"items":[{"transactionId":"m-1","status":"completed"}]}]}`,
		more["partition"], more["leaseId"]))
}

// triggerSeeks moves group g1 past the end (clamped), to its start, and
// to a time after the last message.
func triggerSeeks(t *testing.T, a *answers, q string) {
	t.Helper()
	a.nats("group-seek", "consume.seek."+q+".g1", `{"offset":1000}`)
	a.nats("group-seek", "consume.seek."+q+".g1", `{"offset":0}`)
	past := a.http("group-seek", "POST", "/queues/"+q+"/groups/g1/seek", `{"time":"2100-01-01T00:00:00Z","partition":"p"}`)
	if c := past["changes"].([]any)[0].(map[string]any); c["to"] != json.Number("4") || c["clamped"] != nil {
		t.Errorf("a seek to a time after the last message: %v; want it at the last offset + 1, not clamped, as documented", c)
	}
}

// deadLetterByLeases has group's leases run out after a renewal until
// the pop that finds message 0 out of attempts dead-letters it.
func deadLetterByLeases(t *testing.T, a *answers, q, p, group string) {
	t.Helper()
	checkfor.Check(t, 10*time.Second, func() error {
		code, raw := a.g.ViaNATS(t, "consume.pop."+q+"."+p, "", `{"group":"`+group+`","max":1,"consumer":"w5"}`)
		if code != 200 {
			return fmt.Errorf("pop: %d %s", code, raw)
		}
		pop := a.record("", raw)
		if pop["deadLettered"] != nil {
			a.record("pop", raw)
			return nil
		}
		if lease, ok := pop["leaseId"].(string); ok { // heard from, then left to run out
			a.nats("", "consume.renew."+q+"."+p, fmt.Sprintf(`{"group":%q,"leaseId":%q,"leaseMs":1}`, group, lease))
		}
		return fmt.Errorf("not dead-lettered yet: %s", raw)
	})
}

// unconfirmed has a lease of group run out unheard, and its next pop take
// it back.
func unconfirmed(t *testing.T, a *answers, q, p, group string) {
	t.Helper()
	a.nats("", "consume.pop."+q+"."+p, `{"group":"`+group+`","max":1,"leaseMs":1}`)
	checkfor.Check(t, 10*time.Second, func() error {
		a.nats("", "consume.pop."+q+"."+p, `{"group":"`+group+`","max":1,"leaseMs":600000}`)
		_, raw := a.g.ViaNATS(t, "consume.groups."+q, "", `{"group":"`+group+`"}`)
		if !bytes.Contains(raw, []byte(`"unconfirmed":1`)) {
			return fmt.Errorf("no delivery taken back unconfirmed: %s", raw)
		}
		return nil
	})
}

// triggerDeadLetters lists and redrives the dead letters of message 0
// (by g1 and g5, and left by g3's lease), and a message pushed to the dead-letter queue by hand.
func triggerDeadLetters(t *testing.T, a *answers, q, p string) {
	t.Helper()
	a.nats("", "push."+q+"-dlq."+p, `{"transactionId":"by-hand"}`)
	list := a.nats("dlq-list", "dlq.list."+q, ``)
	for _, l := range list["deadLetters"].([]any) {
		if l := l.(map[string]any); l["group"] == "g1" && l["error"] != longError[:256] {
			t.Errorf("a listed dead letter's %d-byte error: %q; want its first 256 bytes, nothing added, as documented", len(longError), l["error"])
		}
	}
	a.nats("dlq-list", "dlq.list."+q, `{"limit":1}`)
	dlq := a.nats("", "read."+q+"-dlq."+p, `{}`)
	for _, m := range dlq["messages"].([]any) {
		if data := m.(map[string]any)["data"]; data != nil {
			a.sent["dead-letter"] = append(a.sent["dead-letter"], data)
		}
	}
	r := a.nats("redrive", "dlq.redrive."+q, ``)
	moved := r["partitions"].([]any)[0].(map[string]any)
	if n := len(list["deadLetters"].([]any)); n < 2 || r["moved"] != json.Number(fmt.Sprint(n)) || moved["firstOffset"] != moved["lastOffset"] {
		t.Errorf("a redrive of %d groups' dead letters of one message: %v; want them all counted moved, the message put back once, as documented", n, r)
	}
	a.http("redrive", "POST", "/queues/"+q+"/dlq/redrive", ``)
}

// triggerOperator asks for the views and deletes.
func triggerOperator(t *testing.T, a *answers, q, p string) {
	t.Helper()
	a.nats("queues", "queues.list", ``)
	a.nats("status", "status", ``)
	a.nats("", "configure", fmt.Sprintf(`{"queue":%q}`, q+"-quiet"))
	quiet := a.nats("overview", "overview", fmt.Sprintf(`{"from":%q}`, q+"-quiet"))
	if h := quiet["queues"].([]any)[0].(map[string]any)["history"]; !reflect.DeepEqual(h, []any{}) {
		t.Errorf("the overview's history of a queue the gateway answered no push for: %v; want [], as documented", h)
	}
	// The overview's history: once the gateway has sampled its counters.
	checkfor.Check(t, 10*time.Second, checkfor.Cond("the overview's history has an interval", func() bool {
		_, raw := a.g.ViaHTTP(t, "GET", "/overview?from="+q, "", "")
		return bytes.Contains(raw, []byte(`"history":[{`))
	}))
	a.http("overview", "GET", "/overview?from="+q, "")
	a.http("healthz", "GET", "/healthz", "")
	a.http("readyz", "GET", "/readyz", "")
	a.nats("group-delete", "consume.delete."+q+".g3", ``)
	a.nats("purge", "queues.purge."+q, `{"partition":"p"}`)
	a.nats("read", "read."+q+"."+p, `{}`)
	a.nats("groups", "consume.groups."+q, ``) // the purged messages, deletedUnconsumed
	a.http("queue", "GET", "/queues/"+q, "")
	a.nats("purge", "queues.purge."+q, ``)
	a.nats("queue-delete", "queues.delete."+q, ``)
	a.nats("queue-delete", "queues.delete."+q+"-out", ``)
}
