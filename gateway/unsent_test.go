package gateway_test

import (
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/queengate/queengate/ingest"
	"github.com/queengate/queengate/internal/checkfor"
	"github.com/queengate/queengate/internal/obstest"
)

// TestPushAnswerNotSentCountsAsError: a push whose answer cannot be
// published (the gateway's connection closed before its commit) is
// counted unsent, reason closed, and its request as an error, though
// every message of it was stored.
func TestPushAnswerNotSentCountsAsError(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	reg := prometheus.NewRegistry()
	// The push waits in its buffer until Stop flushes it, when the
	// gateway's connection is gone.
	gw, _ := e.StartGateway(gatewayOpts{Reg: reg, Ingest: ingest.Config{Linger: time.Hour}})
	if err := e.Client.PublishRequest(e.Subject("p"), e.Client.NewRespInbox(), []byte(`{"transactionId":"a"}`)); err != nil {
		t.Fatal(err)
	}
	checkfor.Check(t, 20*time.Second, checkfor.Cond("the push taken in", func() bool {
		return obstest.MetricValue(t, reg, "queengate_requests_accepted_total", nil) == 1
	}))
	e.Conns[gw].Close()
	gw.Stop()
	if n := e.StoredCount(t); n != 1 {
		t.Fatalf("%d messages stored, want 1", n)
	}
	if n := obstest.MetricValue(t, reg, "queengate_answers_unsent_total", map[string]string{"reason": "closed"}); n != 1 {
		t.Errorf("answers unsent (closed) = %v, want 1", n)
	}
	if n := obstest.MetricValue(t, reg, "queengate_request_duration_seconds", map[string]string{"endpoint": "push", "result": "error"}); n != 1 {
		t.Errorf("pushes with result=error = %v, want 1", n)
	}
}
