package timers_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	queengate "github.com/queengate/queengate"
	"github.com/queengate/queengate/ingest"
	"github.com/queengate/queengate/internal/checkfor"
	"github.com/queengate/queengate/internal/gatewaytest"
)

type scheduled struct {
	TimerID       string    `json:"timerId"`
	Status        string    `json:"status"`
	FireAt        time.Time `json:"fireAt"`
	TransactionID string    `json:"transactionId"`
	Existing      bool      `json:"existing"`
}

// TestTimerScheduleListCancelOverNATS: the wire of docs/protocol.md's timers.
func TestTimerScheduleListCancelOverNATS(t *testing.T) {
	t.Parallel()
	e := gatewaytest.NewEnv(t)
	g := e.StartOpsGateway("tok", ingest.Config{})
	at := time.Now().Add(time.Hour).UTC().Truncate(time.Millisecond)
	status, body := g.ViaNATS(t, "timer."+e.Queue+".p1", "",
		fmt.Sprintf(`{"transactionId":"remind-1","data":{"x":1},"fireAt":%q}`, at.Format(time.RFC3339Nano)))
	var a scheduled
	if status != 200 || json.Unmarshal(body, &a) != nil || a.Status != "scheduled" || a.TransactionID != "remind-1" || !a.FireAt.Equal(at) {
		t.Fatalf("schedule: %d %s", status, body)
	}
	// Minted transactionId, delayMs.
	status, body = g.ViaNATS(t, "timer."+e.Queue+".p1", "", `{"data":2,"delayMs":60000}`)
	var b scheduled
	if status != 200 || json.Unmarshal(body, &b) != nil || !strings.HasPrefix(b.TransactionID, "qg-") || time.Until(b.FireAt) < 50*time.Second {
		t.Fatalf("schedule with delayMs: %d %s", status, body)
	}
	// A retried schedule answers the same pending timer.
	status, body = g.ViaNATS(t, "timer."+e.Queue+".p1", "", `{"transactionId":"remind-1","fireAt":"2030-01-01T00:00:00Z"}`)
	var again scheduled
	if status != 200 || json.Unmarshal(body, &again) != nil || again.TimerID != a.TimerID || !again.FireAt.Equal(at) || !again.Existing {
		t.Errorf("retried schedule: %d %s; want timer %s unchanged", status, body, a.TimerID)
	}

	// List is an operator request: the token is needed.
	if status, _ := g.ViaNATS(t, "timer.list", "", `{"queue":"`+e.Queue+`"}`); status != 401 {
		t.Errorf("list without the token: %d, want 401", status)
	}
	var list struct {
		Timers []struct {
			TimerID, Queue, Partition, TransactionID string
		} `json:"timers"`
	}
	status, body = g.ViaHTTP(t, "GET", "/timers?queue="+e.Queue, "tok", "")
	if status != 200 || json.Unmarshal(body, &list) != nil || len(list.Timers) != 2 || list.Timers[0].TimerID != b.TimerID ||
		list.Timers[1].Partition != "p1" || list.Timers[1].TransactionID != "remind-1" {
		t.Errorf("list over HTTP (due first): %d %s", status, body)
	}
	// One of two: the other's position is the next page's start.
	var first queengate.TimersAnswer
	if status, body := g.ViaNATS(t, "timer.list", "tok", `{"queue":"`+e.Queue+`","limit":1}`); status != 200 || json.Unmarshal(body, &first) != nil ||
		len(first.Timers) != 1 || first.Timers[0].TimerID != b.TimerID || first.Next == nil || first.Next.TimerID != a.TimerID {
		t.Errorf("list over NATS with limit 1: %d %s; want timer %s, next %s", status, body, b.TimerID, a.TimerID)
	}

	for _, path := range []string{"/timers?limit=0", "/timers?limit=x", "/timers?limit=10001"} {
		if status, _ := g.ViaHTTP(t, "GET", path, "tok", ""); status != 400 {
			t.Errorf("GET %s: %d, want 400", path, status)
		}
	}
	if status, _ := g.ViaNATS(t, "timer.list", "tok", `{"limit":0}`); status != 400 {
		t.Errorf("NATS list with limit 0: %d, want 400", status)
	}
	// A timer's message is bounded like a push's (NATS's max payload), not
	// by the operator API's 64 KiB.
	big := fmt.Sprintf(`{"transactionId":"big","data":%q,"delayMs":3600000}`, strings.Repeat("x", 100<<10))
	if status, body := g.ViaNATS(t, "timer."+e.Queue+".p2", "", big); status != 200 {
		t.Errorf("a 100 KiB timer: %d %.200s", status, body)
	}

	for _, want := range []string{"cancelled", "absent"} {
		status, body = g.ViaNATS(t, "timer.cancel", "", `{"timerId":"`+a.TimerID+`"}`)
		if status != 200 || string(body) != `{"status":"`+want+`"}` {
			t.Errorf("cancel: %d %s, want %s", status, body, want)
		}
	}
	if n := e.PendingTimers(t); n != 2 {
		t.Errorf("%d timers pending, want 2", n)
	}
}

// TestTimerBadInputIsA400AndStoresNothing: docs/protocol.md's bad input for
// timers, each refused whole.
func TestTimerBadInputIsA400AndStoresNothing(t *testing.T) {
	t.Parallel()
	e := gatewaytest.NewEnv(t)
	g := e.StartOpsGateway("", ingest.Config{})
	ok := "timer." + e.Queue + ".p"
	cases := []struct{ subject, body, want string }{
		{ok, `{"data":1,"fireAt":"tomorrow"}`, "not RFC 3339"},
		{ok, `{"data":1,"fireAt":"2026-12-01T09:00:00"}`, "not RFC 3339"},
		{ok, `{"data":1,"fireAt":1767225600}`, "must be an RFC 3339 string"},
		{ok, `{"data":1,"delayMs":-5}`, `"delayMs" is -5: from 0 to 315360000000 (milliseconds from now, up to ten years)`},
		{ok, `{"data":1,"delayMs":1.5}`, `"delayMs" must be a whole number, not the JSON number 1.5`},
		{ok, `{"data":1,"delayMs":"10"}`, `"delayMs" must be a whole number, not a string "10"`},
		{ok, `{"data":1,"delayMs":999999999999999}`, "up to ten years"},
		{ok, `{"data":1,"delayMs":9223372036855}`, "from 0 to 315360000000"}, // overflows a Duration
		{ok, `{"data":1,"delayMs":99999999999999999999}`, "from 0 to 315360000000"},
		{ok, `{"data":1,"fireAt":"2999-01-01T00:00:00Z"}`, "more than ten years ahead"},
		{ok, `{"data":1}`, "exactly one of"},
		{ok, `{"data":1,"delayMs":0,"fireAt":"2026-12-01T09:00:00Z"}`, "exactly one of"},
		{ok, `[{"data":1,"delayMs":0}]`, "one message object"},
		{ok, `{"transactionId":"","delayMs":0}`, "transactionId must be 1-256 bytes"},
		{ok, `{"transactionId":7,"delayMs":0}`, "transactionId must be a string"},
		{ok, `{"delayMs":0,`, "malformed JSON"},
		{ok, `{"transactionID":"t","delayMs":0}`, `unknown field "transactionID": a message has only "transactionId", "data", "headers", "dataEncoding", "fireAt" and "delayMs"; did you mean "transactionId"?`},
		{ok, `{"data":1,"delayMs":0,"delayMs":5}`, `field "delayMs" is given twice`},
		{ok, `{"data":"\ud800","delayMs":0}`, "data: unpaired UTF-16 surrogate"},
		{ok, `{"data":1,"delay":5}`, `unknown field "delay"`},
		{"timer.bad$queue.p", `{"delayMs":0}`, "bad queue name"},
		{"timer." + e.Queue + ".bad$part", `{"delayMs":0}`, "bad partition name"},
		{"timer.cancel", `{"timerId":"not-a-uuid"}`, "must be the UUID"},
		{"timer.cancel", `{}`, `"timerId" is missing`},
		{"timer.cancel", `{"timerId":"00000000-0000-0000-0000-000000000000","timerId":"00000000-0000-0000-0000-000000000001"}`, "given twice"},
		{"timer.cancel", `{"timerID":"00000000-0000-0000-0000-000000000000"}`, `unknown field "timerID"`},
		{"timer.cancel", `nope`, "the body must be a JSON object"},
	}
	for _, c := range cases {
		status, body := g.ViaNATS(t, c.subject, "", c.body)
		var werr gatewaytest.WireErr
		if status != 400 || json.Unmarshal(body, &werr) != nil || !strings.Contains(werr.Error.Message, c.want) {
			t.Errorf("%s %s: %d %s; want 400 saying %q", c.subject, c.body, status, body, c.want)
		}
	}
	if n := e.PendingTimers(t); n != 0 {
		t.Errorf("%d timers stored by refused requests", n)
	}
}

// TestTimerScheduledWithoutAReplySubject: a schedule published (not
// requested) is carried out; only its answer has nowhere to go.
func TestTimerScheduledWithoutAReplySubject(t *testing.T) {
	t.Parallel()
	e := gatewaytest.NewEnv(t)
	e.StartOpsGateway("", ingest.Config{})
	if err := e.Client.Publish("queen.timer."+e.Queue+".p", []byte(`{"transactionId":"published","delayMs":3600000}`)); err != nil {
		t.Fatal(err)
	}
	checkfor.Check(t, 30*time.Second, checkfor.Cond("the published schedule stored", func() bool { return e.PendingTimers(t) == 1 }))
}
