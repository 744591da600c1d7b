package gateway

import (
	"bytes"
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"

	queengate "github.com/queengate/queengate"
	"github.com/queengate/queengate/ingest"
	"github.com/queengate/queengate/internal/checkfor"
	"github.com/queengate/queengate/internal/natsembed"
	"github.com/queengate/queengate/internal/obstest"
	"github.com/queengate/queengate/internal/wire"
)

// idleIngester takes no push: these tests answer other requests.
type idleIngester struct{}

func (idleIngester) Submit(*ingest.Request) error { return ingest.ErrNotStarted }
func (idleIngester) Stop()                        {}

// TestUnsendableAnswerIsGivenUpAtOnce: an answer NATS refuses for good
// (over the max payload) is not retried: the requester gets a 500 in its
// place, it is logged once with its subject and size, counted by reason,
// the request counts as an error, and the gateway stops without waiting
// for it, though ReplyRetry and DrainTimeout would let it wait an hour.
func TestUnsendableAnswerIsGivenUpAtOnce(t *testing.T) {
	t.Parallel()
	ns, err := natsembed.Start(natsembed.Config{Port: -1, MaxPayload: 64 << 10})
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

	var logs obstest.LogBuffer
	reg := prometheus.NewRegistry()
	g, err := New(Config{ReplyRetry: time.Hour, DrainTimeout: time.Hour}, nc, idleIngester{}, zerolog.New(&logs), reg)
	if err != nil {
		t.Fatal(err)
	}
	if err := g.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(g.Stop)
	t.Cleanup(nc.Close) // first: a publish still waiting gives up, so Stop returns
	// No endpoint answers more than fits: this one stands for a bug.
	tooBig := wire.RawAnswer(bytes.Repeat([]byte("x"), 100<<10))
	if err := g.addRequestEndpoints([]Endpoint{{Name: "too-big", Verb: "test.too-big",
		Op: func(context.Context, *Request) (any, *queengate.Error) { return tooBig, nil }}}); err != nil {
		t.Fatal(err)
	}
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	reply := client.NewRespInbox()
	answers, err := client.SubscribeSync(reply)
	if err != nil {
		t.Fatal(err)
	}
	if err := client.PublishRequest("test.too-big", reply, nil); err != nil {
		t.Fatal(err)
	}
	// The requester is told, rather than left to time out.
	m, err := answers.NextMsg(20 * time.Second)
	if err != nil {
		t.Fatalf("no answer: %v", err)
	}
	if code, text := m.Header.Get("Nats-Service-Error-Code"), m.Header.Get("Nats-Service-Error"); code != "500" || !strings.Contains(text, strconv.Itoa(len(tooBig))+" bytes") {
		t.Errorf("answered %s %q, want a 500 naming the answer's size", code, text)
	}

	unsent := map[string]string{"reason": "too_large"}
	checkfor.Check(t, 20*time.Second, checkfor.Cond("the answer counted unsent, too_large", func() bool {
		return obstest.MetricValue(t, reg, "queengate_answers_unsent_total", unsent) == 1
	}))
	stopped := make(chan struct{})
	go func() { g.Stop(); close(stopped) }()
	checkfor.Check(t, 30*time.Second, checkfor.Cond("Stop returned", func() bool {
		select {
		case <-stopped:
			return true
		default:
			return false
		}
	}))

	lines := logs.Lines(t, "answer not sent")
	if len(lines) != 1 {
		t.Fatalf("%d log lines say the answer was not sent, want 1: %v", len(lines), lines)
	}
	if l := lines[0]; l["subject"] != reply || l["bytes"] != float64(len(tooBig)) || l["reason"] != "too_large" {
		t.Errorf("log line %v: want subject %s, bytes %d, reason too_large", l, reply, len(tooBig))
	}
	if n := obstest.MetricValue(t, reg, "queengate_answers_unsent_total", unsent); n != 1 {
		t.Errorf("answers unsent (too_large) = %v, want 1", n)
	}
	failed := map[string]string{"endpoint": "too-big", "result": "error"}
	if n := obstest.MetricValue(t, reg, "queengate_request_duration_seconds", failed); n != 1 {
		t.Errorf("requests of too-big with result=error = %v, want 1", n)
	}
	for _, ep := range g.svc.stats().Endpoints {
		if ep.Name != "too-big" {
			continue
		}
		if ep.NumErrors != 1 || !strings.Contains(ep.LastError, "answer not sent") {
			t.Errorf("service stats of too-big: %d errors, last %q; want 1, answer not sent", ep.NumErrors, ep.LastError)
		}
		return
	}
	t.Error("service stats list no endpoint too-big")
}
