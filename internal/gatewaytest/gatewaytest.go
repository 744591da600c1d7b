// Package gatewaytest starts, for a test, a real gateway (embedded NATS,
// PostgreSQL from internal/pgtest, ingest, timers, the operator API and
// the consuming endpoints) and a client connected to it: the root
// package's tests and the consumer package's share it. Env (env.go) is
// the finer harness of the gateway's, consume's and operator's own tests:
// one NATS server, gateways started one by one, requests sent raw.
// Packages that use it call pgtest.Run from TestMain.
package gatewaytest

import (
	"context"
	"testing"

	"github.com/nats-io/nats.go"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"

	queengate "github.com/queengate/queengate"
	"github.com/queengate/queengate/consume"
	"github.com/queengate/queengate/gateway"
	"github.com/queengate/queengate/ingest"
	"github.com/queengate/queengate/internal/natsembed"
	"github.com/queengate/queengate/internal/pgtest"
	"github.com/queengate/queengate/operator"
	"github.com/queengate/queengate/pgstore"
	"github.com/queengate/queengate/timers"
)

// Running is a real gateway and a client connected to it.
type Running struct {
	Client *queengate.Client
	Queue  string // a queue name no other test uses
	URL    string // the embedded NATS server's
	Store  *pgstore.Store
	// Reg holds the gateway's metrics (requests by endpoint and result,
	// the consume counters), as its /metrics would export them.
	Reg *prometheus.Registry
	// StopGateway stops the gateway; NATS and PostgreSQL stay up.
	StopGateway func()
}

// Start starts a gateway whose operator API takes token ("": none) and
// connects a client to it with opts; all of it stops with the test.
func Start(t *testing.T, token string, opts ...queengate.Option) *Running {
	t.Helper()
	ns, err := natsembed.Start(natsembed.Config{Port: -1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(ns.Shutdown)
	gwConn, err := nats.Connect(ns.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(gwConn.Close)
	store := pgtest.Store(t, pgtest.SharedURL(t))
	log := zerolog.New(zerolog.NewTestWriter(t)).Level(zerolog.WarnLevel)
	ing, err := ingest.New(store, ingest.Config{}, log, nil)
	if err != nil {
		t.Fatal(err)
	}
	tsvc, err := timers.New(store, timers.Config{}, log, nil)
	if err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	ops := operator.NewOps(operator.OpsConfig{Token: token, Version: "1.2.3", WantSchema: pgstore.LatestVersion()}, store, ing, gwConn)
	consumers := consume.New(store)
	ops.WatchQueues(consumers)
	gw, err := gateway.New(gateway.Config{Endpoints: []gateway.EndpointSet{ops, timers.NewOps(tsvc, ops.AnswerBudget), consumers}},
		gwConn, ing, log, reg)
	if err != nil {
		t.Fatal(err)
	}
	ing.OnCommit(gw.PublishCommitted)
	for _, s := range []interface {
		Start(context.Context) error
		Stop()
	}{ing, tsvc, gw} {
		if err := s.Start(t.Context()); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(s.Stop)
	}
	nc, err := nats.Connect(ns.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	c, err := queengate.NewClient(nc, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return &Running{Client: c, Queue: pgtest.UniqueName(t), URL: ns.ClientURL(), Store: store, Reg: reg, StopGateway: gw.Stop}
}

// ClientConn is another connection to the gateway's NATS server, closed
// with the test.
func (r *Running) ClientConn(t *testing.T) *nats.Conn {
	t.Helper()
	nc, err := nats.Connect(r.URL)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	return nc
}
