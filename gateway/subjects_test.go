package gateway_test

import (
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/nats-io/nats.go/micro"

	queengate "github.com/queengate/queengate"
	"github.com/queengate/queengate/ingest"
	"github.com/queengate/queengate/internal/peers"
)

// TestMisshapenSubjectsAnswer400: a subject under a served verb with too
// few or too many tokens is answered 400 with the expected form, not left
// to "no responders" (which clients take for a gateway out of reach).
func TestMisshapenSubjectsAnswer400(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	g := e.startOpsGateway("", ingest.Config{})
	q := e.Prefix
	cases := []struct{ subject, want string }{
		{q + ".read", q + ".read.<queue>.<partition>"},
		{q + ".read.orders", q + ".read.<queue>.<partition>"},
		{q + ".read.orders.p.x", q + ".read.<queue>.<partition>"},
		{q + ".explain.orders", q + ".explain.<queue>.<partition>"},
		{q + ".explain.orders.p.x.y", q + ".explain.<queue>.<partition>"},
		{q + ".queues.get", q + ".queues.get.<queue>"},
		{q + ".queues.get.orders.x", q + ".queues.get.<queue>"},
		{q + ".queues.list.x", q + ".queues.list"},
		{q + ".configure.x", q + ".configure"},
		{q + ".status.x.y", q + ".status"},
		{q + ".message.get.x", q + ".message.get"},
		{q + ".consume.ack", q + ".consume.ack.<queue>.<partition>"},
		{q + ".consume.ack.orders", q + ".consume.ack.<queue>.<partition>"},
		{q + ".consume.ack.orders.p.x", q + ".consume.ack.<queue>.<partition>"},
		{q + ".consume.renew.orders", q + ".consume.renew.<queue>.<partition>"},
		{q + ".consume.release.orders.p.x", q + ".consume.release.<queue>.<partition>"},
		{q + ".consume.groups", q + ".consume.groups.<queue>"},
		{q + ".consume.groups.orders.x", q + ".consume.groups.<queue>"},
		{q + ".consume.pop", q + ".consume.pop.<queue>[.<partition>]"},
		{q + ".consume.pop.orders.p.x", "<prefix>.consume.pop.<queue>[.<partition>]"},
		{q + ".timer", q + ".timer.<queue>.<partition>"},
		{q + ".timer.orders.p.x", q + ".timer.<queue>.<partition>"},
		{q + ".push", q + ".push.<queue> or " + q + ".push.<queue>.<partition>"},
		{q + ".push.orders.p.x", q + ".push.<queue>.<partition>"},
	}
	for _, c := range cases {
		status, body := g.ViaNATSAuth(t, c.subject, "", `{}`)
		if status != 400 || !strings.Contains(string(body), c.want) {
			t.Errorf("%s: %d %s; want 400 naming %s", c.subject, status, body, c.want)
		}
	}
}

// TestDiscoveryTableListsEveryEndpoint: docs/protocol.md's service
// discovery table has a row for every endpoint INFO reports, with its
// subject, for a gateway serving everything.
func TestDiscoveryTableListsEveryEndpoint(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.startOpsGateway("", ingest.Config{})
	doc, err := os.ReadFile("../docs/protocol.md")
	if err != nil {
		t.Fatal(err)
	}
	var info micro.Info
	e.Discover(t, micro.InfoVerb, &info)
	if len(info.Endpoints) < 16 {
		t.Fatalf("INFO lists %d endpoints, fewer than a gateway serving everything has", len(info.Endpoints))
	}
	for _, ep := range info.Endpoints {
		row := "| `" + ep.Name + "` | `" + ep.Subject + "`"
		if !strings.Contains(string(doc), row) {
			t.Errorf("docs/protocol.md has no row %s", row)
		}
	}
}

// TestEveryEndpointSubjectIsFromTheTable: each endpoint INFO reports is
// an API of the root package's subject table under its verb (its names
// as single-token wildcards, or the rest of the subject for a push or a
// pop), so that the gateway and its clients cannot drift apart.
func TestEveryEndpointSubjectIsFromTheTable(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.startOpsGateway("", ingest.Config{})
	served := map[string]bool{}
	s := queengate.Subjects{Prefix: e.Prefix}
	for _, a := range slices.Concat(queengate.APIs, peers.APIs) {
		served[s.Verb(a)+strings.Repeat(".*", len(a.Names))] = true
	}
	// A push names a partition or not, and so does a pop.
	served[s.Verb(queengate.APIPush)+".>"] = true
	served[s.Verb(queengate.APIPop)+".>"] = true
	var info micro.Info
	e.Discover(t, micro.InfoVerb, &info)
	for _, ep := range info.Endpoints {
		if !served[ep.Subject] {
			t.Errorf("endpoint %s serves %s, which no API of queengate.APIs or peers.APIs is", ep.Name, ep.Subject)
		}
	}
}
