package main

import (
	"encoding/json"
	"net/http"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"

	queengate "github.com/queengate/queengate"
)

func TestTimerUsageErrors(t *testing.T) {
	t.Parallel()
	n := []string{"--nats", deadNATS}
	cases := []struct {
		args []string
		want string
	}{
		{[]string{"timer"}, "timer: use 'timer schedule', 'timer cancel' or 'timer list' (see queenctl timer --help)"},
		{[]string{"timer", "frob"}, `timer: unknown subcommand "frob": use 'timer schedule', 'timer cancel' or 'timer list'`},
		{[]string{"help", "timer", "frob"}, `timer: unknown subcommand "frob"`},
		{[]string{"timer", "--bogus", "list"}, "timer: flag provided but not defined: -bogus (see queenctl timer --help)"},

		// schedule: arguments.
		{flags(n, "timer", "schedule"), "timer schedule: give QUEUE and PARTITION"},
		{flags(n, "timer", "schedule", "q", "--in", "1s"), "timer schedule: give QUEUE and PARTITION"},
		{flags(n, "timer", "schedule", "q", "p", "1", "2", "--in", "1s"), `timer schedule: unexpected arguments ["2"]: DATA is one JSON value`},
		{flags(n, "timer", "schedule", "q.x", "p", "--in", "1s"), `bad queue name "q.x"`},
		{flags(n, "timer", "schedule", "q", "p*", "--in", "1s"), `bad partition name "p*"`},
		{flags(n, "timer", "schedule", "q", "p", "--txn-id", strings.Repeat("t", 257), "--in", "1s"), "--txn-id is 257 bytes"},
		// schedule: when.
		{flags(n, "timer", "schedule", "q", "p", "--in", "1s", "--at", "2026-12-01T09:00:00Z"), "timer schedule: give either --at or --in, not both"},
		{flags(n, "timer", "schedule", "q", "p", "--in", "0s", "--at", "2026-12-01T09:00:00Z"), "give either --at or --in, not both"},
		{flags(n, "timer", "schedule", "q", "p", "data"), "timer schedule: when? give --at TIME (RFC 3339, e.g. 2026-12-01T09:00:00Z) or --in DURATION"},
		{flags(n, "timer", "schedule", "q", "p", "--at", "2026-12-01T09:00:00"), `timer schedule: invalid value "2026-12-01T09:00:00" for flag -at: want RFC 3339 with a zone`},
		{flags(n, "timer", "schedule", "q", "p", "--at", "2026-12-01 09:00:00Z"), `invalid value "2026-12-01 09:00:00Z" for flag -at: want RFC 3339`},
		{flags(n, "timer", "schedule", "q", "p", "--at", "tomorrow"), `invalid value "tomorrow" for flag -at`},
		{flags(n, "timer", "schedule", "q", "p", "--at", "2026-13-01T09:00:00Z"), `for flag -at: want RFC 3339`},
		{flags(n, "timer", "schedule", "q", "p", "--in", "-5s"), `invalid value "-5s" for flag -in: must be 0 or more`},
		{flags(n, "timer", "schedule", "q", "p", "--in", "-1d"), "must be 0 or more"},
		{flags(n, "timer", "schedule", "q", "p", "--in", "90"), "missing unit, e.g. 90s"},
		{flags(n, "timer", "schedule", "q", "p", "--in", "1500us"), "must be whole milliseconds"},
		{flags(n, "timer", "schedule", "q", "p", "--in", "soon"), "not a duration"},
		{flags(n, "timer", "schedule", "q", "p", "--in", "106752d"), "too long, at most 106751d"},
		{flags(n, "timer", "schedule", "q", "p", "--in"), "flag needs an argument: -in (see queenctl timer schedule --help)"},
		// schedule: NATS only.
		{[]string{"timer", "schedule", "q", "p", "--in", "1s"}, "timer schedule needs NATS (the gateway takes timers over NATS only): set --nats or QUEENCTL_NATS_URL"},
		{[]string{"--http", "http://127.0.0.1:1", "timer", "schedule", "q", "p", "--in", "1s"}, "timer schedule needs NATS"},

		// cancel.
		{flags(n, "timer", "cancel"), "timer cancel: which timer? give its id"},
		{flags(n, "timer", "cancel", "a", "b"), `timer cancel: give exactly one TIMER_ID; unexpected arguments ["b"]`},
		{flags(n, "timer", "cancel", ""), "timer cancel: the TIMER_ID is empty"},
		{[]string{"timer", "cancel", "3f0c9a6e-0000-4000-8000-000000000000"}, "timer cancel needs NATS"},
		{[]string{"timer", "cancel", "--http", "http://127.0.0.1:1", "3f0c9a6e-0000-4000-8000-000000000000"}, "timer cancel needs NATS"},
		{flags(n, "timer", "cancel", "x", "--in", "1s"), "timer cancel: flag provided but not defined: -in (see queenctl timer cancel --help)"},

		// list.
		{[]string{"timer", "list", "payments"}, `timer list: unexpected arguments ["payments"] (the queue is --queue QUEUE)`},
		{[]string{"timer", "list", "--limit", "0"}, "timer list: --limit 0: must be 1-10000"},
		{[]string{"timer", "list", "--limit", "10001"}, "--limit 10001: must be 1-10000"},
		{[]string{"timer", "list", "--limit", "-3"}, "--limit -3: must not be negative"},
		{[]string{"timer", "list", "--limit", "many"}, `invalid value "many" for flag -limit`},
		{[]string{"timer", "list", "--queue", "a/b"}, `bad queue name "a/b"`},
		{[]string{"timer", "list", "--at", "x"}, "timer list: flag provided but not defined: -at"},
	}
	for _, c := range cases {
		t.Run(strings.Join(c.args, " "), func(t *testing.T) {
			t.Parallel()
			r := ctl(t, "", c.args...)
			r.expect(t, exitUsage, c.want)
			if !strings.HasPrefix(r.stderr, "queenctl: ") {
				t.Errorf("stderr does not start with queenctl: %s", r.stderr)
			}
		})
	}
}

func TestTimerHelp(t *testing.T) {
	t.Parallel()
	ctl(t, "", "--help").expect(t, exitOK, "timer schedule QUEUE PARTITION [DATA] (--at TIME | --in DURATION)", "timer cancel TIMER_ID", "timer list")
	for _, args := range [][]string{{"timer", "--help"}, {"timer", "-h"}, {"help", "timer"}, {"--nats", deadNATS, "timer", "-h"}} {
		r := ctl(t, "", args...)
		r.expect(t, exitOK, "Usage:\n  queenctl timer schedule", "queenctl timer cancel TIMER_ID", "queenctl timer list", "Global flags:")
		if r.stderr != "" {
			t.Errorf("help wrote to stderr: %s", r.stderr)
		}
	}
	own := map[string][]string{"schedule": {"--at", "--in", "--txn-id"}, "cancel": nil, "list": {"--queue", "--limit"}}
	for sub, flagNames := range own {
		for _, args := range [][]string{{"timer", sub, "--help"}, {"help", "timer", sub}, {"--nats", deadNATS, "timer", sub, "-h"}, {"timer", "-o", "json", sub, "-h"}} {
			r := ctl(t, "", args...)
			r.expect(t, exitOK, "Usage:\n  queenctl timer "+sub, "Global flags:")
			mine, global, _ := strings.Cut(r.stdout, "Global flags:")
			for _, f := range flagNames {
				if !strings.Contains(mine, "\n  "+f+" ") || strings.Contains(global, f+" ") {
					t.Errorf("%q: %s is not listed apart from the global flags:\n%s", args, f, r.stdout)
				}
			}
		}
	}
	// absent is "no longer pending", never a statement about delivery.
	r := ctl(t, "", "timer", "cancel", "--help")
	r.expect(t, exitOK, "absent      no longer pending (fired, cancelled, or never existed)", "Both exit 0")
	for _, args := range [][]string{{"timer", "cancel", "--help"}, {"timer", "--help"}, {"--help"}} {
		if out := ctl(t, "", args...).stdout; strings.Contains(out, "not delivered") {
			t.Errorf("%q says \"not delivered\":\n%s", args, out)
		}
	}
}

// standIn is an in-process NATS server with a stand-in gateway on the
// timer subjects: it records each request and answers with answer.
type standIn struct {
	url  string
	mu   sync.Mutex
	reqs []*nats.Msg
}

func newStandIn(t *testing.T, answer func(m *nats.Msg) *nats.Msg) *standIn {
	t.Helper()
	ns, err := server.NewServer(&server.Options{Host: "127.0.0.1", Port: -1, NoLog: true, NoSigs: true})
	if err != nil {
		t.Fatal(err)
	}
	go ns.Start()
	if !ns.ReadyForConnections(10 * time.Second) {
		t.Fatal("nats-server did not start")
	}
	t.Cleanup(ns.Shutdown)
	s := &standIn{url: ns.ClientURL()}
	nc, err := nats.Connect(s.url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	if _, err := nc.Subscribe("queen.timer.>", func(m *nats.Msg) {
		s.mu.Lock()
		s.reqs = append(s.reqs, m)
		s.mu.Unlock()
		reply := answer(m)
		reply.Subject = m.Reply
		_ = nc.PublishMsg(reply)
	}); err != nil {
		t.Fatal(err)
	}
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	return s
}

// last is the last request's subject, body and Authorization header.
func (s *standIn) last(t *testing.T) (string, string, string) {
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.reqs) == 0 {
		t.Fatal("no request reached the stand-in")
	}
	m := s.reqs[len(s.reqs)-1]
	return m.Subject, string(m.Data), m.Header.Get("Authorization")
}

func replyJSON(body string) *nats.Msg {
	return &nats.Msg{Data: []byte(body), Header: nats.Header{}}
}

func replyError(code, msg string) *nats.Msg {
	m := replyJSON(`{"error":{"code":` + code + `,"message":` + strings.TrimSpace(mustJSON(msg)) + `}}`)
	m.Header.Set("Nats-Service-Error-Code", code)
	m.Header.Set("Nats-Service-Error", msg)
	return m
}

func mustJSON(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return string(b)
}

// TestTimerWire checks what schedule, cancel and list send over NATS and
// how they print the answers, against a stand-in gateway.
func TestTimerWire(t *testing.T) {
	t.Parallel()
	const id = "3f0c9a6e-8b1d-4c51-9a55-2d1f0e6b7c11"
	const id2 = "3f0c9a6e-8b1d-4c51-9a55-2d1f0e6b7c12"
	s := newStandIn(t, func(m *nats.Msg) *nats.Msg {
		switch {
		case m.Subject == "queen.timer.cancel" && strings.Contains(string(m.Data), id):
			return replyJSON(`{"status":"cancelled"}`)
		case m.Subject == "queen.timer.cancel" && strings.Contains(string(m.Data), "not-a-uuid"):
			return replyError("400", `"timerId" must be the UUID a schedule answered, got "not-a-uuid"`)
		case m.Subject == "queen.timer.cancel":
			return replyJSON(`{"status":"absent"}`)
		case m.Subject == "queen.timer.list" && strings.Contains(string(m.Data), `"limit":1`):
			return replyJSON(`{"timers":[{"timerId":"` + id + `","queue":"payments","partition":"p1","transactionId":"reminder-42","fireAt":"2026-12-01T09:00:00Z","createdAt":"2026-11-30T09:00:00Z"}],` +
				`"next":{"fireAt":"2026-12-01T09:00:00Z","timerId":"` + id2 + `"}}`)
		case m.Subject == "queen.timer.list":
			return replyJSON(`{"timers":[{"timerId":"` + id + `","queue":"payments","partition":"p1","transactionId":"reminder-42","fireAt":"2026-12-01T09:00:00Z","createdAt":"2026-11-30T09:00:00Z"}]}`)
		case m.Subject == "queen.timer.payments.full":
			return replyError("503", "PostgreSQL unavailable")
		default:
			return replyJSON(`{"timerId":"` + id + `","status":"scheduled","fireAt":"2026-12-01T09:00:00Z","transactionId":"reminder-42"}`)
		}
	})
	n := []string{"--nats", s.url}
	checkLast := func(subject, body, auth string) {
		t.Helper()
		gs, gb, ga := s.last(t)
		if gs != subject || gb != body || ga != auth {
			t.Errorf("sent %s %s (Authorization %q), want %s %s (%q)", gs, gb, ga, subject, body, auth)
		}
	}

	// --in: delayMs; DATA that is JSON is sent as is, byte for byte, else
	// as a string.
	r := ctl(t, "", flags(n, "timer", "schedule", "payments", "p1", `{"remind": 42}`, "--in", "90s", "--txn-id", "reminder-42")...)
	r.expect(t, exitOK, "TIMER ID", "STATUS", "FIRE AT", "TRANSACTION ID", id, "scheduled", "2026-12-01T09:00:00Z", "reminder-42")
	checkLast("queen.timer.payments.p1", `{"transactionId":"reminder-42","delayMs":90000,"data":{"remind": 42}}`, "")
	ctl(t, "", flags(n, "timer", "schedule", "payments", "p1", "hello", "--in", "1d12h")...).expect(t, exitOK)
	checkLast("queen.timer.payments.p1", `{"delayMs":129600000,"data":"hello"}`, "")
	ctl(t, "", flags(n, "timer", "schedule", "payments", "p1", "--in", "0s")...).expect(t, exitOK)
	checkLast("queen.timer.payments.p1", `{"delayMs":0}`, "")
	ctl(t, "", flags(n, "timer", "schedule", "payments", "p1", "--", "-5", "--in", "0s")...).expect(t, exitUsage, `unexpected arguments ["--in" "0s"]`)
	ctl(t, "", flags(n, "timer", "schedule", "payments", "p1", "--in", "0s", "--", "-5")...).expect(t, exitOK)
	checkLast("queen.timer.payments.p1", `{"delayMs":0,"data":-5}`, "")
	// --at: fireAt, as given (offset kept).
	ctl(t, "", flags(n, "timer", "schedule", "payments", "p1", "null", "--at", "2026-12-01T10:00:00.5+01:00")...).expect(t, exitOK)
	checkLast("queen.timer.payments.p1", `{"fireAt":"2026-12-01T10:00:00.5+01:00","data":null}`, "")
	// -o json prints the answer; the admin token, when set, goes along.
	r = ctl(t, "", flags(n, "timer", "schedule", "payments", "p1", "--at", "2026-12-01T09:00:00Z", "-o", "json", "--token", "tok")...)
	r.expect(t, exitOK)
	if a := jsonOf[queengate.TimerScheduled](t, r); a.TimerID != id || a.Status != "scheduled" || a.TransactionID != "reminder-42" {
		t.Errorf("schedule -o json: %+v", a)
	}
	checkLast("queen.timer.payments.p1", `{"fireAt":"2026-12-01T09:00:00Z"}`, "Bearer tok")
	// A gateway error: exit 1 with its message; another prefix: nobody answers.
	ctl(t, "", flags(n, "timer", "schedule", "payments", "full", "--in", "1s")...).expect(t, exitGateway, "timer schedule: gateway answered 503: PostgreSQL unavailable")
	ctl(t, "", flags(n, "--prefix", "elsewhere", "timer", "schedule", "payments", "p1", "--in", "1s")...).expect(t, exitUnreachable, "no gateway answers on elsewhere.timer.payments.p1")

	// cancel: one word, exit 0 either way.
	r = ctl(t, "", flags(n, "timer", "cancel", id)...)
	r.expect(t, exitOK)
	if r.stdout != "cancelled\n" {
		t.Errorf("cancel printed %q, want cancelled", r.stdout)
	}
	checkLast("queen.timer.cancel", `{"timerId":"`+id+`"}`, "")
	r = ctl(t, "", flags(n, "timer", "cancel", "00000000-0000-4000-8000-000000000000")...)
	r.expect(t, exitOK)
	if r.stdout != "absent\n" {
		t.Errorf("cancel printed %q, want absent", r.stdout)
	}
	r = ctl(t, "", flags(n, "timer", "cancel", "00000000-0000-4000-8000-000000000000", "-o", "json")...)
	if r.expect(t, exitOK); r.stdout != "{\n  \"status\": \"absent\"\n}\n" {
		t.Errorf("cancel -o json printed %q", r.stdout)
	}
	ctl(t, "", flags(n, "timer", "cancel", "not-a-uuid")...).expect(t, exitGateway,
		`timer cancel: gateway answered 400: "timerId" must be the UUID a schedule answered, got "not-a-uuid"`)

	// list over NATS (only --nats given), with the token.
	r = ctl(t, "", flags(n, "timer", "list", "--queue", "payments", "--limit", "5", "--token", "tok")...)
	r.expect(t, exitOK, "TIMER ID", "QUEUE", "PARTITION", "TRANSACTION ID", "FIRE AT", id+"  payments  p1", "reminder-42     2026-12-01T09:00:00Z")
	checkLast("queen.timer.list", `{"limit":5,"queue":"payments"}`, "Bearer tok")
	ctl(t, "", flags(n, "timer", "list")...).expect(t, exitOK)
	checkLast("queen.timer.list", `{}`, "")
	// The answer lists as many as asked and names the next: more are
	// pending.
	ctl(t, "", flags(n, "timer", "list", "--limit", "1")...).expect(t, exitOK, "the first 1, due first; more are pending (--limit, at most 10000, or --all)")
	checkLast("queen.timer.list", `{"limit":1}`, "")
}

// TestTimerListOverHTTP checks GET /timers: the query, the token, no body,
// and the tables.
func TestTimerListOverHTTP(t *testing.T) {
	t.Parallel()
	f := newFakeGateway(t, func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Query().Get("queue") {
		case "":
			answerJSON(w, 200, `{"timers":[{"timerId":"t-1","queue":"a","partition":"p","transactionId":"x","fireAt":"2026-12-01T09:00:00Z","createdAt":"2026-11-30T09:00:00Z"},`+
				`{"timerId":"t-2","queue":"b","partition":"Default","transactionId":"qg-1","fireAt":"2026-12-02T09:00:00Z","createdAt":"2026-11-30T09:00:00Z"}]}`)
		case "empty":
			answerJSON(w, 200, `{"timers":[]}`)
		case "old":
			http.NotFound(w, r)
		default:
			answerJSON(w, 400, `{"error":{"code":400,"message":"limit 20000: 1 to 10000"}}`)
		}
	})
	h := []string{"--http", f.URL, "--token", "tok"}
	r := ctl(t, "", flags(h, "timer", "list")...)
	r.expect(t, exitOK)
	want := "TIMER ID  QUEUE  PARTITION  TRANSACTION ID  FIRE AT\n" +
		"t-1       a      p          x               2026-12-01T09:00:00Z\n" +
		"t-2       b      Default    qg-1            2026-12-02T09:00:00Z\n"
	if r.stdout != want {
		t.Errorf("list table:\n%s\nwant:\n%s", r.stdout, want)
	}
	ctl(t, "", flags(h, "timer", "list", "--queue", "empty", "--limit", "10")...).expect(t, exitOK, "no pending timers in queue empty")
	list := jsonOf[queengate.TimersAnswer](t, ctl(t, "", flags(h, "timer", "list", "-o", "json")...))
	if len(list.Timers) != 2 || list.Timers[1].Partition != "Default" {
		t.Errorf("list -o json: %+v", list)
	}
	ctl(t, "", flags(h, "timer", "list", "--queue", "old")...).expect(t, exitGateway, f.URL+" does not serve GET /timers: is it a queengate recent enough")
	ctl(t, "", flags(h, "timer", "list", "--queue", "other")...).expect(t, exitGateway, "gateway answered 400: limit 20000: 1 to 10000")

	f.mu.Lock()
	defer f.mu.Unlock()
	var got []string
	for i, r := range f.reqs {
		got = append(got, r.Method+" "+r.URL.RequestURI()+" "+r.Header.Get("Authorization")+" body="+f.body[i])
	}
	wantReqs := []string{
		"GET /timers Bearer tok body=",
		"GET /timers?limit=10&queue=empty Bearer tok body=",
		"GET /timers Bearer tok body=",
		"GET /timers?queue=old Bearer tok body=",
		"GET /timers?queue=other Bearer tok body=",
	}
	if !reflect.DeepEqual(got, wantReqs) {
		t.Errorf("requests %q, want %q", got, wantReqs)
	}
}
