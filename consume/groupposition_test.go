package consume_test

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	queengate "github.com/queengate/queengate"
	"github.com/queengate/queengate/ingest"
)

// TestGroupCreateOverNATSAndHTTP: a group created at the latest over
// NATS starts after what is stored; the same create again answers
// created false, another start 409; one created over HTTP at an offset
// pops from there. Bad bodies, names and partitions are refused naming
// what to fix, and create nothing.
func TestGroupCreateOverNATSAndHTTP(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	g := e.startOpsGateway("tok-1", ingest.Config{})
	e.Push(t, e.Subject("p1"), msgs("a-1", "a-2", "a-3"))
	e.Push(t, e.Subject("p2"), msgs("b-1"))
	subject := func(group string) string { return "consume.create." + e.Queue + "." + group }
	path := func(group string) string { return "/queues/" + e.Queue + "/groups/" + group }

	code, raw := g.ViaNATS(t, subject("late"), "", `{"start":"latest"}`)
	var ans queengate.GroupCreateAnswer
	if err := json.Unmarshal(raw, &ans); code != 200 || err != nil {
		t.Fatalf("create: %d %s", code, raw)
	}
	if !ans.Created || ans.Partitions != 2 || ans.Moved != 2 || len(ans.Changes) != 2 ||
		ans.Changes[0] != (queengate.GroupMoveView{Partition: "p1", From: 0, To: 3}) {
		t.Fatalf("create at the latest answered %s", raw)
	}
	if code, raw := g.ViaNATS(t, subject("late"), "", `{"start":"latest"}`); code != 200 || !strings.Contains(string(raw), `"created":false`) {
		t.Fatalf("the same create again: %d %s; want 200, created false", code, raw)
	}
	if code, raw := g.ViaNATS(t, subject("late"), "", ``); code != 409 || !strings.Contains(string(raw), `with start \"latest\", not \"earliest\"`) {
		t.Fatalf("a create at another start: %d %s; want 409 naming both starts", code, raw)
	}
	if code, raw := g.ViaHTTP(t, "PUT", path("at2"), "tok-1", `{"offsets":{"p1":2}}`); code != 200 || !strings.Contains(string(raw), `"created":true`) {
		t.Fatalf("create over HTTP: %d %s", code, raw)
	}
	_, raw = g.ViaNATS(t, "consume.pop."+e.Queue+".p1", "", `{"group":"at2","consumer":"c","leaseMs":60000,"max":5}`)
	var popped queengate.PopAnswer
	if err := json.Unmarshal(raw, &popped); err != nil || len(popped.Messages) != 1 || popped.Messages[0].TransactionID != "a-3" {
		t.Fatalf("a pop of the group created at offset 2: %s; want a-3 alone", raw)
	}

	client := e.queenClient(t)
	at := time.Now().Add(time.Hour)
	if a, err := client.CreateGroup(t.Context(), e.Queue, "byclient", queengate.GroupCreateRequest{Time: &at}); err != nil || !a.Created || a.Moved != 2 {
		t.Fatalf("the client's create at a time after every message: %+v %v; want created, both partitions moved to their end", a, err)
	}
	var werr *queengate.Error
	if _, err := client.CreateGroup(t.Context(), e.Queue, "byclient", queengate.GroupCreateRequest{Start: "latest"}); !errors.As(err, &werr) || werr.Code != 409 {
		t.Fatalf("the client's create at another start: %v; want a 409", err)
	}

	for _, c := range []struct {
		via, group, body string
		code             int
		says             string
	}{
		{"nats", "bad", `{"start":"middle"}`, 400, `\"start\" must be \"earliest\" or \"latest\", not a string \"middle\"`},
		{"nats", "bad", `{"start":5}`, 400, `\"start\" must be \"earliest\" or \"latest\", not the JSON number 5`},
		{"nats", "bad", `{"start":"latest","time":"2026-12-01T09:00:00Z"}`, 400, `give one of \"start\", \"offsets\" and \"time\"`},
		{"nats", "bad", `{"offsets":{}}`, 400, `\"offsets\" is empty`},
		{"nats", "bad", `{"offsets":[1]}`, 400, `\"offsets\" must be a JSON object`},
		{"nats", "bad", `{"offsets":{"p1":-1}}`, 400, `\"offsets: p1\" is -1`},
		{"nats", "bad", `{"offsets":{"p1":"x"}}`, 400, `\"offsets: p1\" must be a whole number`},
		{"nats", "bad", `{"offsets":{"p1":1,"p1":2}}`, 400, `partition \"p1\" is given twice`},
		{"nats", "bad", `{"offsets":{"bad!":1}}`, 400, `\"bad!\" is not a partition name`},
		{"nats", "bad", `{"offsets":{"p1":1,"nope":1}}`, 404, `partition \"nope\"`},
		{"http", "bad", `{"time":"yesterday"}`, 400, `\"time\" \"yesterday\" is not RFC 3339`},
		{"http", "bad", `{"time":5}`, 400, `\"time\" must be an RFC 3339 string`},
		{"http", "bad", `{"Start":"latest"}`, 400, `unknown field \"Start\"`},
		{"http", "bad", `[]`, 400, "must be a JSON object"},
		{"http", "bad!", ``, 400, `bad group name \"bad!\"`},
	} {
		var code int
		var body []byte
		if c.via == "nats" {
			code, body = g.ViaNATS(t, subject(c.group), "", c.body)
		} else {
			code, body = g.ViaHTTP(t, "PUT", path(c.group), "tok-1", c.body)
		}
		if code != c.code || !strings.Contains(string(body), c.says) {
			t.Errorf("%s create %s %s: %d %s; want %d saying %s", c.via, c.group, c.body, code, body, c.code, c.says)
		}
	}
	if _, err := e.Store.FindGroup(t.Context(), e.Queue, "bad"); err == nil {
		t.Fatal("a refused create created the group")
	}
	if code, body := g.ViaNATS(t, "consume.create."+e.Queue+"-none.g", "", ""); code != 404 || !strings.Contains(string(body), e.Queue+"-none") {
		t.Errorf("a create in an unknown queue: %d %s; want 404 naming it", code, body)
	}
}

// TestGroupSeekOverNATSAndHTTP: an operator seeks a group back over NATS
// (ending its lease: the old lease's ack answers leaseNotHeld) and one
// partition of it forward over HTTP; bad input is refused naming what to
// fix, and moves nothing.
func TestGroupSeekOverNATSAndHTTP(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	g := e.startOpsGateway("tok-1", ingest.Config{})
	e.Push(t, e.Subject("p1"), msgs("a-1", "a-2", "a-3"))
	e.Push(t, e.Subject("p2"), msgs("b-1"))
	_, raw := g.ViaNATS(t, "consume.pop."+e.Queue+".p1", "", `{"group":"g","consumer":"c","leaseMs":60000,"max":2}`)
	var popped queengate.PopAnswer
	if err := json.Unmarshal(raw, &popped); err != nil || len(popped.Messages) != 2 {
		t.Fatalf("pop: %s, %v", raw, err)
	}
	ack := func(offsets string) []byte {
		_, raw := g.ViaNATS(t, "consume.ack."+e.Queue+".p1", "", `{"group":"g","leaseId":"`+popped.LeaseID+`","items":[`+offsets+`]}`)
		return raw
	}
	ack(`{"offset":0,"status":"completed"}`)
	subject := "consume.seek." + e.Queue + ".g"
	path := "/queues/" + e.Queue + "/groups/g/seek"
	positions := func() string {
		t.Helper()
		_, raw := g.ViaNATS(t, "consume.groups."+e.Queue, "", "")
		var a queengate.GroupsAnswer
		if err := json.Unmarshal(raw, &a); err != nil || len(a.Groups) != 1 {
			t.Fatalf("groups: %s", raw)
		}
		var out []string
		for _, p := range a.Groups[0].Partitions {
			out = append(out, p.Partition+":"+string(rune('0'+p.NextOffset)))
		}
		return strings.Join(out, " ")
	}
	before := positions()
	for _, c := range []struct {
		via, where, token, body string
		code                    int
		says                    string
	}{
		{"nats", subject, "", `{"offset":0}`, 401, "unauthorized"},
		{"http", path, "", `{"offset":0}`, 401, "unauthorized"},
		{"nats", subject, "tok-1", ``, 400, "the body is empty"},
		{"nats", subject, "tok-1", `{}`, 400, `\"offset\" or \"time\" is missing`},
		{"nats", subject, "tok-1", `{"offset":0,"time":"2026-12-01T09:00:00Z"}`, 400, `give \"offset\" or \"time\", not both`},
		{"nats", subject, "tok-1", `{"offset":-1}`, 400, `\"offset\" is -1`},
		{"nats", subject, "tok-1", `{"offset":1.5}`, 400, `\"offset\" must be a whole number`},
		{"nats", subject, "tok-1", `{"offset":"1"}`, 400, `\"offset\" must be a whole number`},
		{"nats", subject, "tok-1", `{"time":"soon"}`, 400, `\"time\" \"soon\" is not RFC 3339`},
		{"nats", subject, "tok-1", `{"partition":"bad!","offset":0}`, 400, `\"partition\" must be a name`},
		{"nats", subject, "tok-1", `{"partition":"nope","offset":0}`, 404, "nope"},
		{"nats", subject, "tok-1", `{"ofset":0}`, 400, `unknown field \"ofset\"`},
		{"nats", "consume.seek." + e.Queue + ".nosuch", "tok-1", `{"offset":0}`, 404, `\"nosuch\" of queue`},
		{"http", path + "?x=1", "tok-1", `{"offset":0}`, 400, `unknown parameter \"x\"`},
		{"http", "/queues/" + e.Queue + "/groups/bad!/seek", "tok-1", `{"offset":0}`, 400, `bad group name \"bad!\"`},
	} {
		var code int
		var body []byte
		if c.via == "nats" {
			code, body = g.ViaNATS(t, c.where, c.token, c.body)
		} else {
			code, body = g.ViaHTTP(t, "POST", c.where, c.token, c.body)
		}
		if code != c.code || !strings.Contains(string(body), c.says) {
			t.Errorf("%s %s (token %q) %s: %d %s; want %d saying %s", c.via, c.where, c.token, c.body, code, body, c.code, c.says)
		}
	}
	if after := positions(); after != before {
		t.Fatalf("refused seeks moved the group: %s, before %s", after, before)
	}

	code, raw := g.ViaNATS(t, subject, "tok-1", `{"offset":0}`)
	var ans queengate.GroupSeekAnswer
	if err := json.Unmarshal(raw, &ans); code != 200 || err != nil {
		t.Fatalf("seek: %d %s", code, raw)
	}
	want := []queengate.GroupMoveView{{Partition: "p1", From: 1, To: 0, LeaseEnded: true}}
	if ans.Partitions != 2 || ans.Moved != 1 || ans.LeasesEnded != 1 || len(ans.Changes) != 1 || ans.Changes[0] != want[0] {
		t.Fatalf("seek back answered %s; want 2 partitions, p1 moved from 1 to 0 ending its lease", raw)
	}
	if raw := ack(`{"offset":1,"status":"completed"}`); !strings.Contains(string(raw), "leaseNotHeld") {
		t.Fatalf("an ack under the lease the seek ended: %s; want leaseNotHeld", raw)
	}
	code, raw = g.ViaHTTP(t, "POST", path, "tok-1", `{"partition":"p2","offset":7}`)
	if code != 200 || !strings.Contains(string(raw), `"changes":[{"partition":"p2","from":0,"to":1,"clamped":true}]`) {
		t.Fatalf("seek of p2 past its end over HTTP: %d %s; want p2 clamped to 1", code, raw)
	}
	if got := positions(); got != "p1:0 p2:1" {
		t.Fatalf("after the seeks: %s; want p1:0 p2:1", got)
	}
}

// TestTheGroupsListSaysWhichGroupsAreIdle: with groupIdleSeconds set, a
// group idle past it is listed as not holding retention, with its idle
// time; one whose lease runs is idle 0 and holds.
func TestTheGroupsListSaysWhichGroupsAreIdle(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	g := e.startOpsGateway("tok-1", ingest.Config{})
	e.Push(t, e.Subject("p1"), msgs("a-1"))
	if code, raw := g.ViaHTTP(t, "POST", "/configure", "tok-1", `{"queue":"`+e.Queue+`","options":{"groupIdleSeconds":60}}`); code != 200 ||
		!strings.Contains(string(raw), `"groupIdleSeconds":60`) {
		t.Fatalf("configure: %d %s", code, raw)
	}
	g.ViaNATS(t, "consume.create."+e.Queue+".asleep", "", "")
	g.ViaNATS(t, "consume.pop."+e.Queue+".p1", "", `{"group":"busy","consumer":"c","leaseMs":60000,"max":1}`)
	if _, err := e.Store.Pool().Exec(t.Context(), `UPDATE queen.consumer_groups SET created_at = now() - interval '2 minutes'
		WHERE name IN ('asleep', 'busy') AND queue_id = (SELECT id FROM queen.queues WHERE name = $1)`, e.Queue); err != nil {
		t.Fatal(err)
	}
	_, raw := g.ViaHTTP(t, "GET", "/queues/"+e.Queue+"/groups", "tok-1", "")
	var a queengate.GroupsAnswer
	if err := json.Unmarshal(raw, &a); err != nil || len(a.Groups) != 2 {
		t.Fatalf("groups: %s", raw)
	}
	asleep, busy := a.Groups[0], a.Groups[1]
	if asleep.HoldsRetention || asleep.IdleMs < 120_000 {
		t.Errorf("the group idle 2 minutes of 1 allowed: %s; want holdsRetention false, idleMs 120000 at least", raw)
	}
	if !busy.HoldsRetention || busy.IdleMs != 0 {
		t.Errorf("the group holding a lease: %s; want holdsRetention true, idleMs 0", raw)
	}
}
