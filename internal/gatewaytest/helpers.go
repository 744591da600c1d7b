package gatewaytest

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/micro"

	queengate "github.com/queengate/queengate"
	"github.com/queengate/queengate/internal/natsembed"
	"github.com/queengate/queengate/internal/obstest"
	"github.com/queengate/queengate/model"
)

// CompleteOne completes the one message a pop delivered.
func (g *OpsGateway) CompleteOne(t *testing.T, queue, group string, a queengate.PopAnswer) {
	t.Helper()
	req, _ := json.Marshal(queengate.AckRequest{Group: group, LeaseID: a.LeaseID,
		Items: []queengate.AckItem{{Offset: &a.Messages[0].Offset, Status: queengate.AckCompleted}}})
	if status, body := g.ViaNATS(t, "consume.ack."+queue+".p", "", string(req)); status != 200 {
		t.Fatalf("ack: %d %.300s", status, body)
	}
}

// PopFrom pops one message of queue's partition p as group over NATS,
// and returns the answer decoded and as sent.
func (g *OpsGateway) PopFrom(t *testing.T, queue, group string) (queengate.PopAnswer, string) {
	t.Helper()
	status, body := g.ViaNATS(t, "consume.pop."+queue+".p", "", `{"group":"`+group+`","max":1}`)
	var a queengate.PopAnswer
	if err := json.Unmarshal(body, &a); status != 200 || err != nil {
		t.Fatalf("pop of %s as %s: %d %.300s", queue, group, status, body)
	}
	return a, string(body)
}

// FailOne fails the one message a pop delivered, with why.
func (g *OpsGateway) FailOne(t *testing.T, queue, group string, a queengate.PopAnswer, why string) queengate.AckAnswer {
	t.Helper()
	req, _ := json.Marshal(queengate.AckRequest{Group: group, LeaseID: a.LeaseID,
		Items: []queengate.AckItem{{Offset: &a.Messages[0].Offset, Status: queengate.AckFailed, Error: why}}})
	status, body := g.ViaNATS(t, "consume.ack."+queue+".p", "", string(req))
	var ans queengate.AckAnswer
	if err := json.Unmarshal(body, &ans); status != 200 || err != nil {
		t.Fatalf("ack of %s as %s: %d %.300s", queue, group, status, body)
	}
	return ans
}

// SetMaxAttempts sets queue's maxAttempts in the store.
func (e *Env) SetMaxAttempts(t *testing.T, queue string, n int) {
	t.Helper()
	if _, _, err := e.Store.Configure(context.Background(), queue, model.OptionsPatch{MaxAttempts: &n}, false); err != nil {
		t.Fatal(err)
	}
}

// Metric is a series of the gateway's registry, of queue and group.
func (g *OpsGateway) Metric(t *testing.T, name, group string, more ...string) float64 {
	t.Helper()
	labels := map[string]string{"queue": g.E.Queue}
	if group != "" {
		labels["group"] = group
	}
	for i := 0; i+1 < len(more); i += 2 {
		labels[more[i]] = more[i+1]
	}
	return obstest.MetricValue(t, g.Reg, name, labels)
}

// ConflictAnswer is a push Answer with its conflict mark.
type ConflictAnswer struct {
	Answer
	Conflict bool `json:"conflict"`
}

// Summary writes answers as status[+conflict] lists, e.g.
// "duplicate,failed+conflict".
func Summary(as []ConflictAnswer) string {
	var s []string
	for _, a := range as {
		if a.Conflict {
			s = append(s, a.Status+"+conflict")
		} else {
			s = append(s, a.Status)
		}
	}
	return strings.Join(s, ",")
}

// SetOnConflict sets the env's queue's onConflict in the store.
func (e *Env) SetOnConflict(t *testing.T, mode model.ConflictMode) {
	t.Helper()
	if _, _, err := e.Store.Configure(context.Background(), e.Queue, model.OptionsPatch{OnConflict: &mode}, false); err != nil {
		t.Fatal(err)
	}
}

// PushRaw pushes body as it is and decodes the answers with their
// conflict marks.
func (e *Env) PushRaw(t *testing.T, subject, body string) []ConflictAnswer {
	t.Helper()
	msg := e.Request(t, subject, body)
	if code := msg.Header.Get("Nats-Service-Error-Code"); code != "" {
		t.Fatalf("push rejected: %s %s", code, msg.Data)
	}
	var out []ConflictAnswer
	if err := json.Unmarshal(msg.Data, &out); err != nil {
		t.Fatalf("reply %q: %v", msg.Data, err)
	}
	return out
}

// Discover asks every queengate instance for verb (PING, INFO, STATS)
// and decodes the one Answer into v.
func (e *Env) Discover(t *testing.T, verb micro.Verb, v any) {
	t.Helper()
	subject, err := micro.ControlSubject(verb, "queengate", "")
	if err != nil {
		t.Fatal(err)
	}
	m, err := e.Client.Request(subject, nil, 10*time.Second)
	if err != nil {
		t.Fatalf("%s: %v", subject, err)
	}
	if err := json.Unmarshal(m.Data, v); err != nil {
		t.Fatalf("%s answered %s: %v", subject, m.Data, err)
	}
}

// Readyz is the admin server's /readyz answer at addr: status and checks.
func Readyz(t *testing.T, addr string) (int, map[string]string) {
	t.Helper()
	resp, err := http.Get("http://" + addr + "/readyz")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var body map[string]string
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, body
}

// SmallPayload is the max payload of the embedded servers these tests
// start: small, so that answers reach it cheaply.
const SmallPayload = 64 << 10

// NewSmallPayloadEnv is NewEnv with SmallPayload as the max payload.
func NewSmallPayloadEnv(t *testing.T) *Env {
	t.Helper()
	return NewEnvWith(t, natsembed.Config{Port: -1, MaxPayload: SmallPayload})
}

// PendingTimers counts the timers of the env's queue in the store.
func (e *Env) PendingTimers(t *testing.T) int {
	t.Helper()
	var n int
	if err := e.Store.Pool().QueryRow(context.Background(), `
		SELECT count(*) FROM queen.timers t JOIN queen.log_partitions p ON p.id = t.partition_id
		  JOIN queen.queues q ON q.id = p.queue_id WHERE q.name = $1`, e.Queue).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}
