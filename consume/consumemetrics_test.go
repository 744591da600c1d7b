package consume_test

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"

	queengate "github.com/queengate/queengate"
	"github.com/queengate/queengate/ingest"
	"github.com/queengate/queengate/model"
)

// leaseOp renews (renew) or releases a pop's lease on partition p, and
// answers the status.
func (g *opsGateway) leaseOp(t *testing.T, queue, group string, a queengate.PopAnswer, renew bool) int {
	t.Helper()
	verb, body := "release", fmt.Sprintf(`{"group":%q,"leaseId":%q}`, group, a.LeaseID)
	if renew {
		verb, body = "renew", fmt.Sprintf(`{"group":%q,"leaseId":%q,"leaseMs":30000}`, group, a.LeaseID)
	}
	status, _ := g.ViaNATS(t, "consume."+verb+"."+queue+".p", "", body)
	return status
}

// The consumer metrics count what pops, acks and leases did, per queue
// and group; lag and the dead-letter depth are what the API says; each
// dead letter is logged once, with its queue, group, partition,
// messageId, attempts and reason.
func TestConsumerMetricsCountWhatConsumersDid(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	g := e.startOpsGateway("", ingest.Config{})
	q := e.Queue
	e.SetMaxAttempts(t, q, 2)
	wantStatus(t, e.Push(t, e.Subject("p"), msgs("a", "b", "c", "d")), "queued", "queued", "queued", "queued")

	a, _ := g.PopFrom(t, q, "g")
	g.FailOne(t, q, "g", a, "boom once")
	a2, _ := g.PopFrom(t, q, "g") // a again: its second attempt
	if status := g.leaseOp(t, q, "g", a2, true); status != 200 {
		t.Fatalf("renew: %d", status)
	}
	if ans := g.FailOne(t, q, "g", a2, "boom twice"); ans.DeadLettered != 1 {
		t.Fatalf("the second failure: %+v, want a dead letter", ans)
	}
	if status := g.leaseOp(t, q, "g", a2, true); status != 409 {
		t.Fatalf("renewing an ended lease: %d, want 409", status)
	}
	b, _ := g.PopFrom(t, q, "g")
	g.CompleteOne(t, q, "g", b)
	c, _ := g.PopFrom(t, q, "g")
	if status := g.leaseOp(t, q, "g", c, false); status != 200 {
		t.Fatalf("release: %d", status)
	}
	c2, _ := g.PopFrom(t, q, "g") // c again, after its release
	if _, err := e.Store.Pool().Exec(context.Background(),
		"UPDATE queen.consumer_cursors SET lease_until = now() - interval '1 second' WHERE lease_id = $1", c2.LeaseID); err != nil {
		t.Fatal(err)
	}
	g.PopFrom(t, q, "g") // ends c2's lease, run out
	g.PopFrom(t, q, "other")

	for _, w := range []struct {
		name, group string
		labels      []string
		want        float64
	}{
		{"queengate_group_pops_total", "g", nil, 6},
		{"queengate_group_pops_total", "other", nil, 1},
		{"queengate_group_delivered_messages_total", "g", nil, 6},
		{"queengate_group_redelivered_messages_total", "g", nil, 3}, // a; c after its release, and after its lease ran out
		{"queengate_group_acks_total", "g", []string{"result", "failed"}, 2},
		{"queengate_group_acks_total", "g", []string{"result", "completed"}, 1},
		{"queengate_group_lease_renewals_total", "g", []string{"result", "renewed"}, 1},
		{"queengate_group_lease_renewals_total", "g", []string{"result", "notHeld"}, 1},
		{"queengate_group_lease_releases_total", "g", nil, 1},
		{"queengate_group_lease_expiries_total", "g", nil, 1},
		{"queengate_group_dead_letters_total", "g", nil, 1},
		{"queengate_dead_letters", "", nil, 1},
	} {
		if got := g.Metric(t, w.name, w.group, w.labels...); got != w.want {
			t.Errorf("%s{group=%q %v} = %v, want %v", w.name, w.group, w.labels, got, w.want)
		}
	}
	for group, want := range g.groupLags(t) {
		if got := g.Metric(t, "queengate_group_lag", group); got != float64(want) {
			t.Errorf("group lag of %s: metric %v, groups answer %d", group, got, want)
		}
	}

	// A deleted group's series go with it.
	if status, body := g.ViaHTTP(t, "DELETE", "/queues/"+q+"/groups/other", g.Token, ""); status != 200 {
		t.Fatalf("delete: %d %s", status, body)
	}
	if got := g.Metric(t, "queengate_group_pops_total", "other"); got != 0 {
		t.Errorf("pops of the deleted group: %v, want no series", got)
	}
	if got := g.Metric(t, "queengate_group_pops_total", "g"); got != 6 {
		t.Errorf("pops of g after another's delete: %v", got)
	}

	lines := g.Logs.Lines(t, "dead-lettered a message")
	if len(lines) != 1 {
		t.Fatalf("dead-letter log lines: %v, want one", lines)
	}
	want := map[string]any{"level": "warn", "queue": q, "group": "g", "partition": "p",
		"messageId": model.MessageID(a.PartitionID, a.Messages[0].Offset), "attempts": 2.0, "reason": "boom twice"}
	for k, v := range want {
		if lines[0][k] != v {
			t.Errorf("dead-letter log line %s = %v, want %v (line %v)", k, lines[0][k], v, lines[0])
		}
	}
}

// groupLags are the queue's groups' lags as the groups answer says.
func (g *opsGateway) groupLags(t *testing.T) map[string]int64 {
	t.Helper()
	status, body := g.ViaHTTP(t, "GET", "/queues/"+g.e.Queue+"/groups", g.Token, "")
	var ans queengate.GroupsAnswer
	if err := json.Unmarshal(body, &ans); status != 200 || err != nil || len(ans.Groups) != 2 {
		t.Fatalf("groups: %d %.300s", status, body)
	}
	out := map[string]int64{}
	for _, v := range ans.Groups {
		out[v.Group] = v.Lag
	}
	return out
}

// An ack-and-push counts its items in the ack metrics as an ack does: the
// completed ones under result="completed", a retry's alreadyAcked not
// again.
func TestAnAckAndPushCountsItsItemsInTheAckMetrics(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	g := e.startOpsGateway("", ingest.Config{})
	q := e.Queue
	wantStatus(t, e.Push(t, e.Subject("p"), msgs("a", "b")), "queued", "queued")
	status, body := g.ViaNATS(t, "consume.pop."+q+".p", "", `{"group":"g","max":2}`)
	var a queengate.PopAnswer
	if err := json.Unmarshal(body, &a); status != 200 || err != nil || len(a.Messages) != 2 {
		t.Fatalf("pop: %d %.300s", status, body)
	}
	req, _ := json.Marshal(queengate.AckPushRequest{Group: "g", LeaseID: a.LeaseID, Items: completeAll(a), Push: derivedOf(a, q+"-out")})
	for range 2 { // the second: a retry
		if status, body := g.ViaNATS(t, "consume.ackpush."+q+".p", "", string(req)); status != 200 {
			t.Fatalf("ack-and-push: %d %.300s", status, body)
		}
	}
	if got := g.Metric(t, "queengate_group_acks_total", "g", "result", "completed"); got != 2 {
		t.Errorf(`queengate_group_acks_total{result="completed"} after an ack-and-push of 2 and its retry: %v, want 2`, got)
	}
}

// A gateway that missed a group delete's announcement drops the group's
// series when the store tells it the group is gone.
func TestADeletedGroupsSeriesGoWhenTheStoreSaysSo(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	g := e.startOpsGateway("", ingest.Config{})
	q := e.Queue
	wantStatus(t, e.Push(t, e.Subject("p"), msgs("a")), "queued")
	a, _ := g.PopFrom(t, q, "g")
	if got := g.Metric(t, "queengate_group_pops_total", "g"); got != 1 {
		t.Fatalf("pops of g: %v", got)
	}
	if _, err := e.Store.DeleteGroup(t.Context(), q, "g"); err != nil { // no announcement
		t.Fatal(err)
	}
	if status := g.leaseOp(t, q, "g", a, true); status != 404 {
		t.Fatalf("a renewal in the deleted group: %d, want 404", status)
	}
	if got := g.Metric(t, "queengate_group_pops_total", "g"); got != 0 {
		t.Errorf("pops of the deleted group: %v, want no series", got)
	}
}
