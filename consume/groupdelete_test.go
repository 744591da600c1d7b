package consume_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	queengate "github.com/queengate/queengate"
	"github.com/queengate/queengate/consume"
	"github.com/queengate/queengate/gateway"
	"github.com/queengate/queengate/ingest"
	"github.com/queengate/queengate/internal/checkfor"
	"github.com/queengate/queengate/internal/pgtest"
)

// TestGroupDeleteOverNATSAndHTTP: an operator deletes a group over NATS
// or HTTP with the admin token; the answer says what it released; bad
// names, a body, unknown queues and groups are refused naming what to
// fix, and change nothing; afterwards the group's leases answer 404 and a
// pop by name starts the group afresh.
func TestGroupDeleteOverNATSAndHTTP(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	g := e.startOpsGateway("tok-1", ingest.Config{})
	e.Push(t, e.Subject("p1"), msgs("a-1", "a-2"))
	e.Push(t, e.Subject("p2"), msgs("b-1"))
	_, raw := g.ViaNATS(t, "consume.pop."+e.Queue+".p1", "", `{"group":"g1","consumer":"c","leaseMs":60000,"max":1}`)
	var popped queengate.PopAnswer
	if err := json.Unmarshal(raw, &popped); err != nil || len(popped.Messages) != 1 {
		t.Fatalf("pop: %s, %v", raw, err)
	}
	subject := "consume.delete." + e.Queue + ".g1"
	path := "/queues/" + e.Queue + "/groups/g1"
	long := strings.Repeat("g", 129)
	for _, c := range []struct {
		via, where, token, body string
		code                    int
		says                    string
	}{
		{"nats", subject, "", "", 401, "unauthorized"},
		{"nats", subject, "nope", "", 401, "unauthorized"},
		{"http", path, "", "", 401, "unauthorized"},
		{"http", path, "nope", "", 401, "unauthorized"},
		{"nats", "consume.delete." + e.Queue + ".bad!name", "tok-1", "", 400, `bad group name \"bad!name\"`},
		{"http", "/queues/" + e.Queue + "/groups/bad!name", "tok-1", "", 400, `bad group name \"bad!name\"`},
		{"http", "/queues/" + e.Queue + "/groups/" + long, "tok-1", "", 400, "bad group name"},
		{"http", "/queues/bad!q/groups/g1", "tok-1", "", 400, "bad!q"},
		{"nats", subject, "tok-1", `{"group":"g1"}`, 400, "takes no body"},
		{"http", path, "tok-1", `{}`, 400, "takes no body"},
		{"http", path + "?force=1", "tok-1", "", 400, `unknown parameter \"force\"`},
		{"nats", "consume.delete." + e.Queue + ".nosuch", "tok-1", "", 404, `\"nosuch\" of queue ` + e.Queue},
		{"http", "/queues/" + e.Queue + "/groups/nosuch", "tok-1", "", 404, `\"nosuch\" of queue ` + e.Queue},
		{"nats", "consume.delete." + e.Queue + "-none.g1", "tok-1", "", 404, e.Queue + "-none"},
		{"http", "/queues/" + e.Queue + "-none/groups/g1", "tok-1", "", 404, e.Queue + "-none"},
	} {
		var code int
		var body []byte
		if c.via == "nats" {
			code, body = g.ViaNATS(t, c.where, c.token, c.body)
		} else {
			code, body = g.ViaHTTP(t, "DELETE", c.where, c.token, c.body)
		}
		if code != c.code || !strings.Contains(string(body), c.says) {
			t.Errorf("%s %s (token %q, body %q): %d %s; want %d saying %s", c.via, c.where, c.token, c.body, code, body, c.code, c.says)
		}
	}
	if _, err := e.Store.FindGroup(t.Context(), e.Queue, "g1"); err != nil {
		t.Fatalf("a refused delete changed something: %v", err)
	}

	code, raw := g.ViaNATS(t, subject, "tok-1", "")
	var ans queengate.GroupDeleteAnswer
	if err := json.Unmarshal(raw, &ans); code != 200 || err != nil {
		t.Fatalf("delete: %d %s", code, raw)
	}
	want := queengate.GroupDeleteAnswer{Queue: e.Queue, Group: "g1", Deleted: true, Partitions: 2, Unconsumed: 3, LeasesEnded: 1}
	if ans != want {
		t.Errorf("delete answered %+v; want %+v", ans, want)
	}
	if code, body := g.ViaHTTP(t, "DELETE", path, "tok-1", ""); code != 404 || !strings.Contains(string(body), "g1") {
		t.Errorf("deleting it again over HTTP: %d %s; want 404 naming g1", code, body)
	}
	ack := `{"group":"g1","leaseId":"` + popped.LeaseID + `","items":[{"offset":0,"status":"completed"}]}`
	if code, body := g.ViaNATS(t, "consume.ack."+e.Queue+".p1", "", ack); code != 404 || !strings.Contains(string(body), "consumer group not found") {
		t.Errorf("an ack under the deleted group's lease: %d %s; want 404, group not found", code, body)
	}
	_, raw = g.ViaNATS(t, "consume.pop."+e.Queue+".p1", "", `{"group":"g1","consumer":"c","leaseMs":60000,"max":1}`)
	if err := json.Unmarshal(raw, &popped); err != nil || len(popped.Messages) != 1 || popped.Messages[0].TransactionID != "a-1" {
		t.Errorf("a pop by name after the delete: %s; want a-1 again (the group afresh)", raw)
	}
}

// TestADeletedGroupIsForgottenByEveryGateway: two gateways have the
// group's id cached. A delete through one is announced and both forget
// it; a delete they hear nothing of (straight in the store) is found by
// their next pop, which starts the group afresh, while the old lease's
// ack answers 404 on either.
func TestADeletedGroupIsForgottenByEveryGateway(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	consumers := []*consume.Consumers{consume.New(pgtest.Store(t, e.PGURL)), consume.New(pgtest.Store(t, e.PGURL))}
	for _, c := range consumers {
		e.StartGateway(gatewayOpts{Gateway: gateway.Config{Endpoints: []gateway.EndpointSet{c}}})
	}
	e.fill(t, 3, "p1")
	client := e.queenClient(t)
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	pop := func() queengate.PopAnswer {
		t.Helper()
		a, err := client.Pop(ctx, e.Queue, "p1", queengate.PopRequest{Group: "g", Consumer: "c", Max: 1, LeaseMs: 60000})
		if err != nil {
			t.Fatal(err)
		}
		return a
	}
	// bothKnow pops until both gateways have cached the group, under
	// another id than old; it returns the pops' first lease.
	bothKnow := func(old int64) queengate.PopAnswer {
		t.Helper()
		var first queengate.PopAnswer
		checkfor.Check(t, 30*time.Second, func() error {
			if a := pop(); first.LeaseID == "" && len(a.Messages) > 0 {
				first = a
			}
			for i, c := range consumers {
				if id, ok := c.KnownGroupID(e.Queue, "g"); !ok || id == old {
					return &queengate.Error{Text: "gateway " + string(rune('1'+i)) + " has not cached the group"}
				}
			}
			return nil
		})
		return first
	}
	leased := bothKnow(0)
	if len(leased.Messages) != 1 || leased.Messages[0].TransactionID != "p1-0" {
		t.Fatalf("first pop: %+v", leased)
	}
	old, _ := consumers[0].KnownGroupID(e.Queue, "g")

	ans, err := client.DeleteGroup(ctx, e.Queue, "g")
	if err != nil || ans.Partitions != 1 || ans.Unconsumed != 3 || ans.LeasesEnded != 1 {
		t.Fatalf("delete: %+v, %v", ans, err)
	}
	checkfor.Check(t, 30*time.Second, checkfor.Cond("both gateways forget the deleted group", func() bool {
		_, known1 := consumers[0].KnownGroupID(e.Queue, "g")
		_, known2 := consumers[1].KnownGroupID(e.Queue, "g")
		return !known1 && !known2
	}))
	for range 4 { // whichever gateway answers
		_, err := client.Ack(ctx, e.Queue, "p1", queengate.AckRequest{Group: "g", LeaseID: leased.LeaseID,
			Items: completeAll(leased)})
		if !isCode(err, 404) || !strings.Contains(err.Error(), "consumer group not found") {
			t.Fatalf("an ack under the deleted group's lease: %v; want 404, group not found", err)
		}
	}

	// Deleted where no gateway hears of it: both still cache the id.
	leased = bothKnow(0)
	if len(leased.Messages) != 1 || leased.Messages[0].TransactionID != "p1-0" {
		t.Fatalf("the first pop after the delete: %+v; want p1-0 (the group afresh)", leased)
	}
	old, _ = consumers[0].KnownGroupID(e.Queue, "g")
	if _, err := e.Store.DeleteGroup(ctx, e.Queue, "g"); err != nil {
		t.Fatal(err)
	}
	leased = bothKnow(old)
	if len(leased.Messages) != 1 || leased.Messages[0].TransactionID != "p1-0" {
		t.Fatalf("the first pop after a delete no gateway heard of: %+v; want p1-0 (the group afresh)", leased)
	}
}
