package gateway_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/nats-io/nats.go/micro"

	"github.com/queengate/queengate/ingest"
	"github.com/queengate/queengate/internal/checkfor"
)

// TestServiceDiscoveryCountsEveryEndpoint: PING, INFO and STATS answer in
// micro's formats; every endpoint counts its errors, and a push's
// processing time runs until its answer is published (after the flush),
// not until the handler has handed it to ingest.
func TestServiceDiscoveryCountsEveryEndpoint(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	const linger = 300 * time.Millisecond
	g := e.startOpsGateway("", ingest.Config{Linger: linger})

	var ping micro.Ping
	e.Discover(t, micro.PingVerb, &ping)
	if ping.Type != micro.PingResponseType || ping.Name != "queengate" || ping.ID == "" || ping.Version != "0.0.0-dev" {
		t.Errorf("ping answered %+v", ping)
	}
	var info micro.Info
	e.Discover(t, micro.InfoVerb, &info)
	names := map[string]string{}
	for _, ep := range info.Endpoints {
		names[ep.Name] = ep.Subject
		if ep.QueueGroup != "queengate" {
			t.Errorf("endpoint %s in queue group %q", ep.Name, ep.QueueGroup)
		}
	}
	for name, subject := range map[string]string{"push": "queen.push.>", "configure": "queen.configure",
		"timer-cancel": "queen.timer.cancel", "timer-schedule": "queen.timer.*.*", "status": "queen.status"} {
		if names[name] != subject {
			t.Errorf("INFO lists endpoint %s on %q, want %q (all: %v)", name, names[name], subject, names)
		}
	}

	e.Push(t, e.Subject("p"), msgs("a", "b"))
	e.Request(t, e.Subject("p"), `{"transactionID":"typo"}`)
	for range 2 {
		if status, _ := g.ViaNATS(t, "configure", "", `{"queue":"bad.name"}`); status != 400 {
			t.Fatalf("bad configure answered %d", status)
		}
		if status, _ := g.ViaNATS(t, "timer.cancel", "", `{}`); status != 400 {
			t.Fatalf("bad cancel answered %d", status)
		}
	}
	if status, _ := g.ViaNATS(t, "status", "", ""); status != 200 {
		t.Fatalf("status answered %d", status)
	}

	// A request's figures are recorded once its answer is published: the
	// answer can reach us a moment before, so STATS is asked until the
	// last one is counted.
	var stats micro.Stats
	byName := map[string]*micro.EndpointStats{}
	checkfor.Check(t, 10*time.Second, func() error {
		stats = micro.Stats{}
		e.Discover(t, micro.StatsVerb, &stats)
		clear(byName)
		for _, es := range stats.Endpoints {
			byName[es.Name] = es
		}
		for name, want := range map[string][2]int{"push": {2, 1}, "configure": {2, 2}, "timer-cancel": {2, 2}, "status": {1, 0}} {
			if es := byName[name]; es == nil || es.NumRequests != want[0] || es.NumErrors != want[1] {
				return fmt.Errorf("%s: %+v, want %d requests and %d errors", name, es, want[0], want[1])
			}
		}
		return nil
	})
	if stats.Type != micro.StatsResponseType || stats.ID != ping.ID {
		t.Errorf("stats answered type %q id %q", stats.Type, stats.ID)
	}
	if es := byName["configure"]; es != nil && es.LastError == "" {
		t.Error("configure's last error is empty")
	}
	// The queued push waited for its flush (linger) before its answer;
	// the rejected one did not: their mean is at least half the linger.
	if es := byName["push"]; es != nil && es.AverageProcessingTime < linger/2 {
		t.Errorf("push average processing time %v: it must run until the answer is published (linger %v)", es.AverageProcessingTime, linger)
	}
}
