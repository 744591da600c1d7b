package gateway_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"

	"github.com/queengate/queengate/gateway"
	"github.com/queengate/queengate/ingest"
	"github.com/queengate/queengate/internal/pgtest"
	"github.com/queengate/queengate/pgstore"
)

func TestMain(m *testing.M) { pgtest.Run(m) }

// testEnv is one embedded NATS server and any number of gateways on it.
type testEnv struct {
	t      *testing.T
	ns     *server.Server
	client *nats.Conn
	store  *pgstore.Store
	pgURL  string
	prefix string
	queue  string
	// conns are the gateways' own NATS connections: closing one is how a
	// test kills a gateway outright.
	conns map[*gateway.Gateway]*nats.Conn
}

func newEnv(t *testing.T) *testEnv {
	t.Helper()
	return newEnvWith(t, gateway.EmbeddedNATS{Port: -1})
}

// newEnvWith is newEnv with the embedded server configured by cfg.
func newEnvWith(t *testing.T, cfg gateway.EmbeddedNATS) *testEnv {
	t.Helper()
	ns, err := gateway.StartEmbeddedNATS(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(ns.Shutdown)
	client, err := nats.Connect(ns.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(client.Close)
	url := pgtest.SharedURL(t)
	return &testEnv{t: t, ns: ns, client: client, store: pgtest.Store(t, url), pgURL: url,
		prefix: "queen", queue: pgtest.UniqueName(t), conns: map[*gateway.Gateway]*nats.Conn{}}
}

type gatewayOpts struct {
	store   ingest.Store
	ingest  ingest.Config
	gateway gateway.Config
	// natsURL is where the gateway connects; default the env's server.
	natsURL string
	// reg receives the gateway's metrics; default none.
	reg prometheus.Registerer
	// consume serves the consuming subjects, woken by this gateway's
	// commits.
	consume bool
}

// startGateway runs one gateway (its own NATS connection, ingester and
// store pool) until the test ends.
func (e *testEnv) startGateway(opts gatewayOpts) (*gateway.Gateway, *ingest.Ingester) {
	e.t.Helper()
	url := opts.natsURL
	if url == "" {
		url = e.ns.ClientURL()
	}
	nc, err := nats.Connect(url, nats.MaxReconnects(-1), nats.ReconnectWait(50*time.Millisecond))
	if err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(nc.Close)
	store := opts.store
	if store == nil {
		store = pgtest.Store(e.t, e.pgURL)
	}
	log := zerolog.New(zerolog.NewTestWriter(e.t)).Level(zerolog.WarnLevel)
	ing, err := ingest.New(store, opts.ingest, log, nil)
	if err != nil {
		e.t.Fatal(err)
	}
	if err := ing.Start(context.Background()); err != nil {
		e.t.Fatal(err)
	}
	if opts.gateway.Prefix == "" {
		opts.gateway.Prefix = e.prefix
	}
	if opts.consume && opts.gateway.Endpoints == nil {
		opts.gateway.Endpoints = []gateway.EndpointSet{gateway.NewConsumers(pgtest.Store(e.t, e.pgURL))}
	}
	gw, err := gateway.New(opts.gateway, nc, ing, log, opts.reg)
	if err != nil {
		e.t.Fatal(err)
	}
	if opts.gateway.Endpoints != nil {
		ing.OnCommit(gw.PublishCommitted)
	}
	if err := gw.Start(context.Background()); err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(gw.Stop)
	e.conns[gw] = nc
	return gw, ing
}

// answer is one entry of a push reply.
type answer struct {
	Index         int    `json:"index"`
	TransactionID string `json:"transactionId"`
	Status        string `json:"status"`
	MessageID     string `json:"messageId"`
	PartitionID   int64  `json:"partitionId"`
	Offset        *int64 `json:"offset"`
	Error         string `json:"error"`
}

type wireErr struct {
	Error struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
}

func (e *testEnv) subject(partition string) string {
	if partition == "" {
		return e.prefix + ".push." + e.queue
	}
	return e.prefix + ".push." + e.queue + "." + partition
}

// push sends a request and decodes the per-message answers; it fails the
// test on a whole-request error.
func (e *testEnv) push(t *testing.T, subject string, body any) []answer {
	t.Helper()
	msg := e.request(t, subject, body)
	if code := msg.Header.Get("Nats-Service-Error-Code"); code != "" {
		t.Fatalf("push to %s rejected: %s %s: %s", subject, code, msg.Header.Get("Nats-Service-Error"), msg.Data)
	}
	var answers []answer
	if err := json.Unmarshal(msg.Data, &answers); err != nil {
		t.Fatalf("reply %q: %v", msg.Data, err)
	}
	return answers
}

func (e *testEnv) request(t *testing.T, subject string, body any) *nats.Msg {
	t.Helper()
	var data []byte
	switch b := body.(type) {
	case string:
		data = []byte(b)
	case []byte:
		data = b
	default:
		var err error
		if data, err = json.Marshal(b); err != nil {
			t.Fatal(err)
		}
	}
	msg, err := e.client.Request(subject, data, 30*time.Second)
	if err != nil {
		t.Fatalf("request %s: %v", subject, err)
	}
	return msg
}

type msg struct {
	TransactionID string `json:"transactionId,omitempty"`
	Data          any    `json:"data,omitempty"`
}

func msgs(ids ...string) []msg {
	out := make([]msg, len(ids))
	for i, id := range ids {
		out[i] = msg{TransactionID: id, Data: map[string]any{"id": id, "n": i}}
	}
	return out
}

// storedCount is how many messages the queue holds in PostgreSQL.
func (e *testEnv) storedCount(t *testing.T) int {
	t.Helper()
	var n int
	err := e.store.Pool().QueryRow(context.Background(), `
		SELECT coalesce(sum(s.end_offset - s.base_offset + 1), 0)
		  FROM queen.log_segments s
		  JOIN queen.log_partitions p ON p.id = s.partition_id
		  JOIN queen.queues q ON q.id = p.queue_id
		 WHERE q.name = $1`, e.queue).Scan(&n)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func wantStatus(t *testing.T, got []answer, want ...string) {
	t.Helper()
	var statuses []string
	for _, a := range got {
		statuses = append(statuses, a.Status)
	}
	if strings.Join(statuses, ",") != strings.Join(want, ",") {
		t.Fatalf("statuses = %v, want %v (answers %+v)", statuses, want, got)
	}
}

func off(a answer) int64 {
	if a.Offset == nil {
		return -1
	}
	return *a.Offset
}

func (a answer) String() string {
	return fmt.Sprintf("%s:%s@%d", a.TransactionID, a.Status, off(a))
}

func jsonUnmarshal(b []byte, v any) error { return json.Unmarshal(b, v) }
