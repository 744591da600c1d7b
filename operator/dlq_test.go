package operator_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	queengate "github.com/queengate/queengate"
	"github.com/queengate/queengate/ingest"
	"github.com/queengate/queengate/internal/gatewaytest"
)

// deadLetterThree pushes a, b, c to partition p and dead-letters them as
// group g: three dead letters.
func (g *opsGateway) deadLetterThree(t *testing.T) {
	t.Helper()
	e := g.e
	e.SetMaxAttempts(t, e.Queue, 1)
	wantStatus(t, e.Push(t, e.Subject("p"), msgs("a", "b", "c")), "queued", "queued", "queued")
	for range 3 {
		a, _ := g.PopFrom(t, e.Queue, "g")
		if ans := g.FailOne(t, e.Queue, "g", a, "boom"); ans.DeadLettered != 1 {
			t.Fatalf("fail: %+v", ans)
		}
	}
}

func (g *opsGateway) listDeadLetters(t *testing.T) queengate.DeadLettersAnswer {
	t.Helper()
	status, body := g.ViaHTTP(t, "POST", "/queues/"+g.e.Queue+"/dlq/list", g.Token, "")
	var a queengate.DeadLettersAnswer
	if err := json.Unmarshal(body, &a); status != 200 || err != nil {
		t.Fatalf("list: %d %.300s", status, body)
	}
	return a
}

// redrive sends a redrive over NATS, or HTTP, and decodes its answer.
func (g *opsGateway) redrive(t *testing.T, overHTTP bool, req string) queengate.RedriveAnswer {
	t.Helper()
	var status int
	var body []byte
	if overHTTP {
		status, body = g.ViaHTTP(t, "POST", "/queues/"+g.e.Queue+"/dlq/redrive", g.Token, req)
	} else {
		status, body = g.ViaNATS(t, "dlq.redrive."+g.e.Queue, g.Token, req)
	}
	return decodeRedriveBody(t, status, body)
}

// Bad input to a list or a redrive, over either face, is a 4xx naming
// what to fix, and moves nothing.
func TestRedriveBadInputIsA4xxAndMovesNothing(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	g := e.startOpsGateway("secret", ingest.Config{})
	g.deadLetterThree(t)
	for _, c := range []struct{ body, want string }{
		{`{"limit":0}`, `"limit" is 0: from 1 to 1000`},
		{`{"limit":"5"}`, `"limit" must be a whole number, not a string`},
		{`{"fromOffset":5,"toOffset":1}`, `"fromOffset" 5 is above "toOffset" 1`},
		{`{"fromOffset":-1}`, `"fromOffset" is -1`},
		{`{"grup":"g"}`, `"grup"`},
		{`{"group":"no such"}`, `"group" must be a name`},
		{`[]`, `want {"partition"`},
	} {
		for _, face := range []string{"NATS", "HTTP"} {
			var status int
			var body []byte
			if face == "NATS" {
				status, body = g.ViaNATS(t, "dlq.redrive."+e.Queue, "secret", c.body)
			} else {
				status, body = g.ViaHTTP(t, "POST", "/queues/"+e.Queue+"/dlq/redrive", "secret", c.body)
			}
			var ans struct{ Error queengate.Error }
			_ = json.Unmarshal(body, &ans)
			if status != 400 || !strings.Contains(ans.Error.Text, c.want) {
				t.Errorf("%s %s: %d %s, want 400 saying %s", face, c.body, status, body, c.want)
			}
		}
	}
	if status, body := g.ViaNATS(t, "dlq.redrive.nosuchqueue", "secret", ""); status != 404 || !strings.Contains(string(body), `nosuchqueue\" does not exist`) {
		t.Errorf("unknown queue: %d %s", status, body)
	}
	if status, _ := g.ViaNATS(t, "dlq.redrive."+e.Queue, "", ""); status != 401 {
		t.Errorf("no token: %d, want 401", status)
	}
	if status, _ := g.ViaHTTP(t, "POST", "/queues/"+e.Queue+"/dlq/redrive", "", ""); status != 401 {
		t.Errorf("no token over HTTP: %d, want 401", status)
	}
	if n := len(g.listDeadLetters(t).DeadLetters); n != 3 {
		t.Fatalf("%d dead letters left after bad requests, want 3", n)
	}
	if n := e.StoredCount(t); n != 3 {
		t.Fatalf("%d messages stored after bad requests, want 3", n)
	}
}

// Listed, then redriven over NATS and HTTP, each dead letter is back in
// its partition once, with its transactionId and data; a repeated redrive
// moves nothing; the group consumes them again.
func TestRedriveOverNATSAndHTTP(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	g := e.startOpsGateway("secret", ingest.Config{})
	g.deadLetterThree(t)
	l := g.listDeadLetters(t)
	if len(l.DeadLetters) != 3 || l.DeadLetters[0].TransactionID != "a" || l.DeadLetters[0].Group != "g" ||
		l.DeadLetters[0].Error != "boom" || l.DeadLetters[2].Offset != 2 || l.More {
		t.Fatalf("list: %+v", l)
	}
	a := g.redrive(t, false, `{"limit":2}`)
	if a.Moved != 2 || !a.More || len(a.Partitions) != 1 || a.Partitions[0].Partition != "p" || a.Partitions[0].FirstOffset != 3 {
		t.Fatalf("redrive of 2: %+v", a)
	}
	a = g.redrive(t, true, `{"partition":"p"}`)
	if a.Moved != 1 || a.More || a.Partitions[0].LastOffset != 5 {
		t.Fatalf("redrive of the rest: %+v", a)
	}
	if a = g.redrive(t, false, ""); a.Moved != 0 || len(a.Partitions) != 0 {
		t.Fatalf("a repeated redrive: %+v", a)
	}
	if n := len(g.listDeadLetters(t).DeadLetters); n != 0 {
		t.Fatalf("%d dead letters listed after the redrive", n)
	}
	e.SetMaxAttempts(t, e.Queue, 5)
	for i, id := range []string{"a", "b", "c"} {
		p, _ := g.PopFrom(t, e.Queue, "g")
		if len(p.Messages) != 1 || p.Messages[0].TransactionID != id || p.Messages[0].Offset != int64(3+i) {
			t.Fatalf("pop %d after the redrive: %+v", i, p.Messages)
		}
		g.CompleteOne(t, e.Queue, "g", p)
	}
}

// A redrive over more partitions than one answer can list moves what its
// answer lists, says more, and the next request goes on: every answer
// fits the max payload, and every dead letter moves once.
func TestARedriveAnswerFitsTheMaxPayload(t *testing.T) {
	t.Parallel()
	e := newSmallPayloadEnv(t)
	g := e.startOpsGateway("", ingest.Config{})
	e.SetMaxAttempts(t, e.Queue, 1)
	const n = 80
	for i := range n {
		wantStatus(t, e.Push(t, e.Subject(fmt.Sprintf("%03d", i)+strings.Repeat("x", 125)), msgs("m")), "queued")
	}
	for range n {
		status, body := g.ViaNATS(t, "consume.pop."+e.Queue, "", `{"group":"g","max":1}`)
		var a queengate.PopAnswer
		if err := json.Unmarshal(body, &a); status != 200 || err != nil || len(a.Messages) != 1 {
			t.Fatalf("pop: %d %.300s", status, body)
		}
		req, _ := json.Marshal(queengate.AckRequest{Group: "g", LeaseID: a.LeaseID,
			Items: []queengate.AckItem{{Offset: &a.Messages[0].Offset, Status: queengate.AckFailed, Error: "boom"}}})
		if status, body := g.ViaNATS(t, "consume.ack."+e.Queue+"."+a.Partition, "", string(req)); status != 200 {
			t.Fatalf("ack: %d %.300s", status, body)
		}
	}
	moved, requests := 0, 0
	for more := true; more; requests++ {
		status, body := g.ViaNATS(t, "dlq.redrive."+e.Queue, "", "")
		if len(body) > gatewaytest.SmallPayload {
			t.Fatalf("an answer of %d bytes, over the max payload %d", len(body), gatewaytest.SmallPayload)
		}
		a := decodeRedriveBody(t, status, body)
		if a.More && a.Moved == 0 {
			t.Fatalf("more, but nothing moved: %.300s", body)
		}
		moved += a.Moved
		more = a.More
	}
	if moved != n || requests < 2 {
		t.Fatalf("%d moved in %d requests, want %d in more than one", moved, requests, n)
	}
	if n := len(g.listDeadLetters(t).DeadLetters); n != 0 {
		t.Fatalf("%d dead letters left", n)
	}
}

func decodeRedriveBody(t *testing.T, status int, body []byte) queengate.RedriveAnswer {
	t.Helper()
	var a queengate.RedriveAnswer
	if err := json.Unmarshal(body, &a); status != 200 || err != nil {
		t.Fatalf("redrive: %d %.300s", status, body)
	}
	return a
}
