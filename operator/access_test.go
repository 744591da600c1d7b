package operator_test

import (
	"bytes"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/nats-io/nats.go/micro"

	"github.com/queengate/queengate/ingest"
	"github.com/queengate/queengate/internal/checkfor"
)

// TestDataPlaneNeedsNoAdminToken: with an admin token set, the subjects
// that name their queue (reads, explain and consuming) answer without it,
// as pushes do — NATS permissions govern them — while the operator
// subjects, which span queues, answer 401 without it.
func TestDataPlaneNeedsNoAdminToken(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	g := e.startOpsGateway("tok-1", ingest.Config{})
	e.Push(t, e.Subject("p"), msgs("a-1"))
	q := e.Prefix
	dataPlane := []struct{ subject, body, want string }{
		{q + ".read." + e.Queue + ".p", `{}`, `"transactionId":"a-1"`},
		{q + ".explain." + e.Queue + ".p", `{"transactionId":"a-1"}`, `"duplicate"`},
		{q + ".consume.pop." + e.Queue + ".p", `{"group":"g1","consumer":"c"}`, `"transactionId":"a-1"`},
		{q + ".consume.groups." + e.Queue, ``, `"group":"g1"`},
	}
	for _, c := range dataPlane {
		status, body := g.ViaNATSAuth(t, c.subject, "", c.body)
		if status != 200 || !bytes.Contains(body, []byte(c.want)) {
			t.Errorf("%s without the token: %d %s; want 200 with %s", c.subject, status, body, c.want)
		}
	}
	operator := []struct{ subject, body string }{
		{q + ".configure", fmt.Sprintf(`{"queue":%q}`, e.Queue)},
		{q + ".queues.list", ``},
		{q + ".queues.get." + e.Queue, ``},
		{q + ".status", ``},
		{q + ".message.get", `{"messageId":"00000000-0000-0001-0000-000000000000"}`},
		{q + ".timer.list", ``},
	}
	for _, c := range operator {
		if status, body := g.ViaNATSAuth(t, c.subject, "", c.body); status != 401 {
			t.Errorf("%s without the token: %d %s; want 401", c.subject, status, body)
		}
		// The scheme is case-insensitive (RFC 7235).
		for _, scheme := range []string{"Bearer", "bearer", "BEARER"} {
			if status, body := g.ViaNATSAuth(t, c.subject, scheme+" tok-1", c.body); status == 401 {
				t.Errorf("%s with %q: %d %s; want it admitted", c.subject, scheme+" tok-1", status, body)
			}
		}
	}
	// The HTTP admin API has no NATS permissions: everything but health,
	// readiness and metrics stays behind the token there.
	path := "/queues/" + e.Queue + "/partitions/p/messages"
	if status, body := g.ViaHTTP(t, "GET", path, "", ""); status != 401 {
		t.Errorf("GET %s without the token: %d %s; want 401", path, status, body)
	}
	for _, auth := range []string{"bearer tok-1", "BEARER tok-1"} {
		if resp, body := g.Do(t, "GET", path, auth, ""); resp.StatusCode != 200 {
			t.Errorf("GET %s with %q: %d %s; want 200", path, auth, resp.StatusCode, body)
		}
	}
}

// TestPopWithoutReplyLeasesNothing: a pop nobody can receive the answer
// of is not carried out: the next pop gets the partition and the message
// at its first attempt.
func TestPopWithoutReplyLeasesNothing(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	g := e.startOpsGateway("", ingest.Config{})
	e.Push(t, e.Subject("p"), msgs("a-1"))
	pop := e.Prefix + ".consume.pop." + e.Queue + ".p"
	if err := e.Client.Publish(pop, []byte(`{"group":"g1","consumer":"nobody"}`)); err != nil {
		t.Fatal(err)
	}
	checkfor.Check(t, 30*time.Second, func() error {
		var stats micro.Stats
		e.Discover(t, micro.StatsVerb, &stats)
		for _, es := range stats.Endpoints {
			if es.Name == "consume-pop" && es.NumRequests == 1 {
				return nil
			}
		}
		return errors.New("the pop without a reply subject is not counted yet")
	})
	status, body := g.ViaNATSAuth(t, pop, "", `{"group":"g1","consumer":"c"}`)
	if status != 200 || !bytes.Contains(body, []byte(`"transactionId":"a-1"`)) || !bytes.Contains(body, []byte(`"attempts":1`)) {
		t.Errorf("pop after the unanswerable one: %d %s; want a-1 at its first attempt", status, body)
	}
}
