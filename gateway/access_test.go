package gateway_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/micro"

	"github.com/queengate/queengate/ingest"
	"github.com/queengate/queengate/internal/checkfor"
)

// viaNATSAuth is viaNATS with the whole Authorization header given.
func (g *opsGateway) viaNATSAuth(t *testing.T, subject, authorization, body string) (int, []byte) {
	t.Helper()
	m := nats.NewMsg(subject)
	m.Data = []byte(body)
	if authorization != "" {
		m.Header.Set("Authorization", authorization)
	}
	reply, err := g.e.client.RequestMsg(m, 30*time.Second)
	if err != nil {
		t.Fatalf("request %s: %v", subject, err)
	}
	var werr wireErr
	if reply.Header.Get("Nats-Service-Error-Code") != "" && json.Unmarshal(reply.Data, &werr) == nil {
		return werr.Error.Code, reply.Data
	}
	return 200, reply.Data
}

// TestDataPlaneNeedsNoAdminToken: with an admin token set, the subjects
// that name their queue (reads, explain and consuming) answer without it,
// as pushes do — NATS permissions govern them — while the operator
// subjects, which span queues, answer 401 without it.
func TestDataPlaneNeedsNoAdminToken(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	g := e.startOpsGateway("tok-1", ingest.Config{})
	e.push(t, e.subject("p"), msgs("a-1"))
	q := e.prefix
	dataPlane := []struct{ subject, body, want string }{
		{q + ".read." + e.queue + ".p", `{}`, `"transactionId":"a-1"`},
		{q + ".explain." + e.queue + ".p", `{"transactionId":"a-1"}`, `"duplicate"`},
		{q + ".consume.pop." + e.queue + ".p", `{"group":"g1","consumer":"c"}`, `"transactionId":"a-1"`},
		{q + ".consume.groups." + e.queue, ``, `"group":"g1"`},
	}
	for _, c := range dataPlane {
		status, body := g.viaNATSAuth(t, c.subject, "", c.body)
		if status != 200 || !bytes.Contains(body, []byte(c.want)) {
			t.Errorf("%s without the token: %d %s; want 200 with %s", c.subject, status, body, c.want)
		}
	}
	operator := []struct{ subject, body string }{
		{q + ".configure", fmt.Sprintf(`{"queue":%q}`, e.queue)},
		{q + ".queues.list", ``},
		{q + ".queues.get." + e.queue, ``},
		{q + ".status", ``},
		{q + ".message.get", `{"messageId":"00000000-0000-0001-0000-000000000000"}`},
		{q + ".timer.list", ``},
	}
	for _, c := range operator {
		if status, body := g.viaNATSAuth(t, c.subject, "", c.body); status != 401 {
			t.Errorf("%s without the token: %d %s; want 401", c.subject, status, body)
		}
		// The scheme is case-insensitive (RFC 7235).
		for _, scheme := range []string{"Bearer", "bearer", "BEARER"} {
			if status, body := g.viaNATSAuth(t, c.subject, scheme+" tok-1", c.body); status == 401 {
				t.Errorf("%s with %q: %d %s; want it admitted", c.subject, scheme+" tok-1", status, body)
			}
		}
	}
	// The HTTP admin API has no NATS permissions: everything but health,
	// readiness and metrics stays behind the token there.
	path := "/queues/" + e.queue + "/partitions/p/messages"
	if status, body := g.viaHTTP(t, "GET", path, "", ""); status != 401 {
		t.Errorf("GET %s without the token: %d %s; want 401", path, status, body)
	}
	for _, auth := range []string{"bearer tok-1", "BEARER tok-1"} {
		if resp, body := g.do(t, "GET", path, auth, ""); resp.StatusCode != 200 {
			t.Errorf("GET %s with %q: %d %s; want 200", path, auth, resp.StatusCode, body)
		}
	}
}

// do sends an HTTP request with the Authorization header given ("":
// none), and reads the answer.
func (g *opsGateway) do(t *testing.T, method, path, authorization, body string) (*http.Response, []byte) {
	t.Helper()
	req, err := http.NewRequest(method, g.http+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if authorization != "" {
		req.Header.Set("Authorization", authorization)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp, b
}

// TestPopWithoutReplyLeasesNothing: a pop nobody can receive the answer
// of is not carried out: the next pop gets the partition and the message
// at its first attempt.
func TestPopWithoutReplyLeasesNothing(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	g := e.startOpsGateway("", ingest.Config{})
	e.push(t, e.subject("p"), msgs("a-1"))
	pop := e.prefix + ".consume.pop." + e.queue + ".p"
	if err := e.client.Publish(pop, []byte(`{"group":"g1","consumer":"nobody"}`)); err != nil {
		t.Fatal(err)
	}
	checkfor.Check(t, 30*time.Second, func() error {
		var stats micro.Stats
		e.discover(t, micro.StatsVerb, &stats)
		for _, es := range stats.Endpoints {
			if es.Name == "consume-pop" && es.NumRequests == 1 {
				return nil
			}
		}
		return errors.New("the pop without a reply subject is not counted yet")
	})
	status, body := g.viaNATSAuth(t, pop, "", `{"group":"g1","consumer":"c"}`)
	if status != 200 || !bytes.Contains(body, []byte(`"transactionId":"a-1"`)) || !bytes.Contains(body, []byte(`"attempts":1`)) {
		t.Errorf("pop after the unanswerable one: %d %s; want a-1 at its first attempt", status, body)
	}
}
