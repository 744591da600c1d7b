package gateway

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"

	queengate "github.com/queengate/queengate"
	"github.com/queengate/queengate/internal/checkfor"
	"github.com/queengate/queengate/internal/natsembed"
	"github.com/queengate/queengate/internal/obstest"
	"github.com/queengate/queengate/model"
)

// TestRequestResultsTellRefusedFromFailed: queengate_request_duration_seconds
// labels a request answered with a 4xx refused and one answered with a
// 5xx error, a push too (a bad body is a 400, an ingester that takes
// nothing a 503); micro's num_errors counts both.
func TestRequestResultsTellRefusedFromFailed(t *testing.T) {
	t.Parallel()
	ns, err := natsembed.Start(natsembed.Config{Port: -1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(ns.Shutdown)
	nc, err := nats.Connect(ns.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	client, err := nats.Connect(ns.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(client.Close)
	reg := prometheus.NewRegistry()
	g, err := New(Config{}, nc, idleIngester{}, zerolog.Nop(), reg)
	if err != nil {
		t.Fatal(err)
	}
	if err := g.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(g.Stop)
	answering := func(code int) func(context.Context, *Request) (any, *queengate.Error) {
		return func(context.Context, *Request) (any, *queengate.Error) {
			if code == 200 {
				return map[string]bool{"ok": true}, nil
			}
			return nil, &queengate.Error{Code: code, Text: fmt.Sprint("answered ", code)}
		}
	}
	codes := []int{200, 400, 404, 409, 413, 500, 503}
	var eps []Endpoint
	for _, code := range codes {
		eps = append(eps, Endpoint{Name: fmt.Sprint("test-", code), Verb: fmt.Sprint("test.", code), Op: answering(code)})
	}
	if err := g.addRequestEndpoints(eps); err != nil {
		t.Fatal(err)
	}
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	for _, code := range codes {
		request(t, client, fmt.Sprint("test.", code), "")
	}
	request(t, client, "queen.push.q.p", `{"transactionId":`)     // 400
	request(t, client, "queen.push.q.p", `{"transactionId":"a"}`) // 503: nothing takes it

	want := map[string]string{"test-200": "ok", "test-400": "refused", "test-404": "refused", "test-409": "refused",
		"test-413": "refused", "test-500": "error", "test-503": "error"}
	checkfor.Check(t, 10*time.Second, func() error {
		for endpoint, result := range want {
			if n := obstest.MetricValue(t, reg, "queengate_request_duration_seconds", map[string]string{"endpoint": endpoint, "result": result}); n != 1 {
				return fmt.Errorf("%s: %v requests with result %s, want 1", endpoint, n, result)
			}
		}
		for _, result := range []string{"refused", "error"} {
			if n := obstest.MetricValue(t, reg, "queengate_request_duration_seconds", map[string]string{"endpoint": "push", "result": result}); n != 1 {
				return fmt.Errorf("push: %v requests with result %s, want 1", n, result)
			}
		}
		return nil
	})
	for endpoint, result := range want {
		for _, other := range []string{"ok", "refused", "error"} {
			if n := obstest.MetricValue(t, reg, "queengate_request_duration_seconds", map[string]string{"endpoint": endpoint, "result": other}); other != result && n != 0 {
				t.Errorf("%s: %v requests with result %s, want only %s", endpoint, n, other, result)
			}
		}
	}
	for _, es := range g.svc.stats().Endpoints {
		if wantErrors := map[string]int{"ok": 0, "refused": 1, "error": 1}[want[es.Name]]; es.Name != "push" && want[es.Name] != "" && es.NumErrors != wantErrors {
			t.Errorf("micro stats of %s: %d errors, want %d", es.Name, es.NumErrors, wantErrors)
		}
		if es.Name == "push" && es.NumErrors != 2 {
			t.Errorf("micro stats of push: %d errors, want 2", es.NumErrors)
		}
	}
}

// request sends body to subject and waits for the answer, whatever it is.
func request(t *testing.T, nc *nats.Conn, subject, body string) {
	t.Helper()
	if _, err := nc.Request(subject, []byte(body), 10*time.Second); err != nil {
		t.Fatalf("%s: %v", subject, err)
	}
}

// A push whose failed messages are all payload conflicts was refused
// (the producer's to fix); one with a message not stored failed.
func TestPushOutcomeRefusesOnlyConflicts(t *testing.T) {
	conflict := model.PushOutcome{Status: model.StatusFailed, Err: fmt.Errorf("%w: stored with different data", model.ErrPayloadConflict)}
	notStored := model.PushOutcome{Status: model.StatusFailed, Err: errors.New("ingest: not stored: PostgreSQL unreachable")}
	queued := model.PushOutcome{Status: model.StatusQueued}
	for _, c := range []struct {
		name    string
		results []model.PushOutcome
		want    string
	}{
		{"all queued", []model.PushOutcome{queued, queued}, "ok"},
		{"a conflict", []model.PushOutcome{queued, conflict}, "refused"},
		{"a conflict and a message not stored", []model.PushOutcome{conflict, notStored}, "error"},
		{"a message not stored", []model.PushOutcome{notStored, queued}, "error"},
	} {
		if got := pushOutcome(c.results).result(); got != c.want {
			t.Errorf("%s: %s, want %s", c.name, got, c.want)
		}
	}
}
