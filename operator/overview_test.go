package operator_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	queengate "github.com/queengate/queengate"
	"github.com/queengate/queengate/ingest"
	"github.com/queengate/queengate/internal/checkfor"
	"github.com/queengate/queengate/model"
)

// overview asks for the overview over HTTP, from the queue named.
func (g *opsGateway) overview(t *testing.T, from string) queengate.OverviewAnswer {
	t.Helper()
	path := "/overview"
	if from != "" {
		path += "?from=" + from
	}
	status, body := g.ViaHTTP(t, "GET", path, g.Token, "")
	var a queengate.OverviewAnswer
	if err := json.Unmarshal(body, &a); status != 200 || err != nil {
		t.Fatalf("overview: %d %.300s", status, body)
	}
	return a
}

// queueOverview is the overview's entry of the env's queue.
func (g *opsGateway) queueOverview(t *testing.T) queengate.QueueOverview {
	t.Helper()
	a := g.overview(t, g.e.Queue)
	if len(a.Queues) == 0 || a.Queues[0].Queue != g.e.Queue {
		t.Fatalf("overview from %s: %+v", g.e.Queue, a)
	}
	return a.Queues[0]
}

// historyTotals sums a queue's history.
func historyTotals(h []queengate.RateView) (queued, duplicates int64) {
	for _, r := range h {
		queued, duplicates = queued+r.Queued, duplicates+r.Duplicates
	}
	return queued, duplicates
}

// fillQueue gives the env's queue three messages on partition p, a
// duplicate, a dead letter of group billing, a lease of group audit, and
// group slow's failure delayed by a minute (holding b and c from it).
func (g *opsGateway) fillQueue(t *testing.T) {
	t.Helper()
	e, q := g.e, g.e.Queue
	e.SetMaxAttempts(t, q, 1)
	wantStatus(t, e.Push(t, e.Subject("p"), msgs("a", "b", "c")), "queued", "queued", "queued")
	wantStatus(t, e.Push(t, e.Subject("p"), msgs("a")), "duplicate")
	a, _ := g.PopFrom(t, q, "billing")
	g.FailOne(t, q, "billing", a, "boom") // a dead letter
	g.PopFrom(t, q, "audit")
	e.SetMaxAttempts(t, q, 2) // slow's failure is retried
	a, _ = g.PopFrom(t, q, "slow")
	g.CompleteOne(t, q, "slow", a)
	b, _ := g.PopFrom(t, q, "slow")
	req := fmt.Sprintf(`{"group":"slow","leaseId":%q,"items":[{"offset":%d,"status":"failed","delayMs":60000}]}`,
		b.LeaseID, b.Messages[0].Offset)
	if status, body := g.ViaNATS(t, "consume.ack."+q+".p", "", req); status != 200 {
		t.Fatalf("a delayed failure: %d %s", status, body)
	}
}

// The overview says, per queue, what PostgreSQL stores, its groups' lag,
// its dead letters not redriven, and this gateway's push answers with
// their history; NATS answers the same; bad input is a 4xx naming it.
func TestOverviewSaysWhatAQueueHolds(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	g := e.startOpsGateway("secret", ingest.Config{})
	q := e.Queue
	g.fillQueue(t)
	wantStatus(t, e.Push(t, e.Subject("p2"), msgs("a", "b")), "queued", "queued")

	var got queengate.QueueOverview
	checkfor.Check(t, 10*time.Second, func() error {
		got = g.queueOverview(t)
		if queued, duplicates := historyTotals(got.History); queued != 5 || duplicates != 1 {
			return fmt.Errorf("history sums to %d queued, %d duplicates: %+v", queued, duplicates, got.History)
		}
		return nil
	})
	if got.Partitions != 2 || got.StoredMessages != 5 || got.Queued != 5 || got.Duplicates != 1 || got.Failed != 0 ||
		got.DLQDepth != 1 || got.Delayed != 2 || got.GroupCount != 3 || got.Options.MaxAttempts != 2 {
		t.Errorf("overview of %s: %+v", q, got)
	}
	// billing consumed a (dead-lettered); audit has a under a lease; slow
	// completed a, and a delay holds b and c of p from it.
	want := []queengate.GroupLagView{{Group: "audit", Lag: 5}, {Group: "billing", Lag: 4}, {Group: "slow", Lag: 4, Delayed: 2}}
	if fmt.Sprint(got.Groups) != fmt.Sprint(want) {
		t.Errorf("groups %+v, want %+v", got.Groups, want)
	}
	if delayed := g.Metric(t, "queengate_group_delayed_messages", "slow"); delayed != 2 {
		t.Errorf("queengate_group_delayed_messages of slow: %v, want 2", delayed)
	}
	if dlq := g.overview(t, model.DeadLetterQueue(q)).Queues[0]; dlq.Queue != model.DeadLetterQueue(q) || dlq.StoredMessages != 1 {
		t.Errorf("the dead-letter queue's entry: %+v", dlq)
	}

	status, body := g.ViaNATS(t, "overview", g.Token, `{"from":"`+q+`"}`)
	var overNATS queengate.OverviewAnswer
	if err := json.Unmarshal(body, &overNATS); status != 200 || err != nil || overNATS.Queues[0].StoredMessages != 5 ||
		overNATS.Queues[0].DLQDepth != 1 || overNATS.SampleSeconds != 0.1 {
		t.Errorf("over NATS: %d %.300s", status, body)
	}

	for _, c := range []struct {
		path  string
		code  int
		words string
	}{
		{"/overview?queue=x", 400, `/overview takes from`},
		{"/overview?from=a&from=b", 400, "given 2 times"},
		{"/overview?from=no-such-queue-" + q, 404, "no queue"},
		{"/overview?from=bad.name", 400, "from"},
	} {
		status, body := g.ViaHTTP(t, "GET", c.path, g.Token, "")
		if status != c.code || !strings.Contains(string(body), c.words) {
			t.Errorf("GET %s: %d %s, want %d saying %q", c.path, status, body, c.code, c.words)
		}
	}
	for _, c := range []struct{ body, words string }{
		{`{"from":5}`, "a string"},
		{`{"form":"x"}`, `did you mean`},
		{`[]`, "must be a JSON object"},
	} {
		status, body := g.ViaNATS(t, "overview", g.Token, c.body)
		if status != 400 || !strings.Contains(string(body), c.words) {
			t.Errorf("overview %s: %d %s, want 400 saying %q", c.body, status, body, c.words)
		}
	}
	if status, _ := g.ViaHTTP(t, "GET", "/overview", "", ""); status != 401 {
		t.Errorf("without the token: %d, want 401", status)
	}
}
