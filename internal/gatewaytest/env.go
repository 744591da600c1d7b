package gatewaytest

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"

	queengate "github.com/queengate/queengate"
	"github.com/queengate/queengate/consume"
	"github.com/queengate/queengate/gateway"
	"github.com/queengate/queengate/ingest"
	"github.com/queengate/queengate/internal/natsembed"
	"github.com/queengate/queengate/internal/obstest"
	"github.com/queengate/queengate/internal/pgtest"
	"github.com/queengate/queengate/operator"
	"github.com/queengate/queengate/pgstore"
	"github.com/queengate/queengate/timers"
)

// Env starts, for the gateway's, the consuming endpoints' and the
// operator API's tests, one embedded NATS server and any number of
// gateways on it, as a daemon assembles them.

// Env is one embedded NATS server and any number of gateways on it.
type Env struct {
	T      *testing.T
	NS     *server.Server
	Client *nats.Conn
	Store  *pgstore.Store
	PGURL  string
	Prefix string
	Queue  string // a queue name no other test uses
	// Conns are the gateways' own NATS connections: closing one is how a
	// test kills a gateway outright.
	Conns map[*gateway.Gateway]*nats.Conn
	// Durability, when set, is the durability reading StartOpsGateway's
	// status and /readyz report (the daemon's watcher is package
	// server's); nil: none, as before the first reading.
	Durability func() *queengate.DurabilityStat
}

// NewEnv starts an embedded NATS server for the test.
func NewEnv(t *testing.T) *Env {
	t.Helper()
	return NewEnvWith(t, natsembed.Config{Port: -1})
}

// NewEnvWith is NewEnv with the embedded server configured by cfg.
func NewEnvWith(t *testing.T, cfg natsembed.Config) *Env {
	t.Helper()
	ns, err := natsembed.Start(cfg)
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
	return &Env{T: t, NS: ns, Client: client, Store: pgtest.Store(t, url), PGURL: url,
		Prefix: "queen", Queue: pgtest.UniqueName(t), Conns: map[*gateway.Gateway]*nats.Conn{}}
}

// GatewayOpts configure one gateway of an Env.
type GatewayOpts struct {
	Store   ingest.Store
	Ingest  ingest.Config
	Gateway gateway.Config
	// NATSURL is where the gateway connects; default the env's server.
	NATSURL string
	// Reg receives the gateway's metrics; default none.
	Reg prometheus.Registerer
	// Consume serves the consuming subjects, woken by this gateway's
	// commits.
	Consume bool
}

// StartGateway runs one gateway (its own NATS connection, ingester and
// store pool) until the test ends.
func (e *Env) StartGateway(opts GatewayOpts) (*gateway.Gateway, *ingest.Ingester) {
	e.T.Helper()
	url := opts.NATSURL
	if url == "" {
		url = e.NS.ClientURL()
	}
	nc, err := nats.Connect(url, nats.MaxReconnects(-1), nats.ReconnectWait(50*time.Millisecond))
	if err != nil {
		e.T.Fatal(err)
	}
	e.T.Cleanup(nc.Close)
	store, ownStore := opts.Store, opts.Store == nil
	if ownStore {
		store = pgtest.Store(e.T, e.PGURL)
	}
	log := zerolog.New(zerolog.NewTestWriter(e.T)).Level(zerolog.WarnLevel)
	ing, err := ingest.New(store, opts.Ingest, log, nil)
	if err != nil {
		e.T.Fatal(err)
	}
	if err := ing.Start(context.Background()); err != nil {
		e.T.Fatal(err)
	}
	if opts.Gateway.Prefix == "" {
		opts.Gateway.Prefix = e.Prefix
	}
	if opts.Consume && opts.Gateway.Endpoints == nil {
		if ownStore {
			// The ingester's store: its tail speaks of that store's
			// epochs, and serves cycles in check mode.
			opts.Gateway.Endpoints = []gateway.EndpointSet{e.consumersWithTail(store.(*pgstore.Store), ing)}
		} else {
			opts.Gateway.Endpoints = []gateway.EndpointSet{consume.New(pgtest.Store(e.T, e.PGURL))}
		}
	}
	gw, err := gateway.New(opts.Gateway, nc, ing, log, opts.Reg)
	if err != nil {
		e.T.Fatal(err)
	}
	if opts.Gateway.Endpoints != nil {
		ing.OnCommit(gw.PublishCommitted)
	}
	if err := gw.Start(context.Background()); err != nil {
		e.T.Fatal(err)
	}
	e.T.Cleanup(gw.Stop)
	e.Conns[gw] = nc
	return gw, ing
}

// Answer is one entry of a push reply.
type Answer struct {
	Index         int    `json:"index"`
	TransactionID string `json:"transactionId"`
	Status        string `json:"status"`
	MessageID     string `json:"messageId"`
	PartitionID   int64  `json:"partitionId"`
	Offset        *int64 `json:"offset"`
	Error         string `json:"error"`
}

// WireErr is an error answer's body.
type WireErr struct {
	Error struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
}

// Subject is the push subject of the env's queue ("": no partition).
func (e *Env) Subject(partition string) string {
	if partition == "" {
		return e.Prefix + ".push." + e.Queue
	}
	return e.Prefix + ".push." + e.Queue + "." + partition
}

// Push sends a request and decodes the per-message answers; it fails the
// test on a whole-request error.
func (e *Env) Push(t *testing.T, subject string, body any) []Answer {
	t.Helper()
	msg := e.Request(t, subject, body)
	if code := msg.Header.Get("Nats-Service-Error-Code"); code != "" {
		t.Fatalf("push to %s rejected: %s %s: %s", subject, code, msg.Header.Get("Nats-Service-Error"), msg.Data)
	}
	var answers []Answer
	if err := json.Unmarshal(msg.Data, &answers); err != nil {
		t.Fatalf("reply %q: %v", msg.Data, err)
	}
	return answers
}

// Request sends body (a string, bytes, or JSON of a value) and waits
// for the answer.
func (e *Env) Request(t *testing.T, subject string, body any) *nats.Msg {
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
	msg, err := e.Client.Request(subject, data, 30*time.Second)
	if err != nil {
		t.Fatalf("request %s: %v", subject, err)
	}
	return msg
}

// Msg is a push message.
type Msg struct {
	TransactionID string `json:"transactionId,omitempty"`
	Data          any    `json:"data,omitempty"`
}

// Msgs are push messages with these transaction ids.
func Msgs(ids ...string) []Msg {
	out := make([]Msg, len(ids))
	for i, id := range ids {
		out[i] = Msg{TransactionID: id, Data: map[string]any{"id": id, "n": i}}
	}
	return out
}

// StoredCount is how many messages the queue holds in PostgreSQL.
func (e *Env) StoredCount(t *testing.T) int {
	t.Helper()
	var n int
	err := e.Store.Pool().QueryRow(context.Background(), `
		SELECT coalesce(sum(s.end_offset - s.base_offset + 1), 0)
		  FROM queen.log_segments s
		  JOIN queen.log_partitions p ON p.id = s.partition_id
		  JOIN queen.queues q ON q.id = p.queue_id
		 WHERE q.name = $1`, e.Queue).Scan(&n)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// WantStatus fails the test unless the answers' statuses are want.
func WantStatus(t *testing.T, got []Answer, want ...string) {
	t.Helper()
	var statuses []string
	for _, a := range got {
		statuses = append(statuses, a.Status)
	}
	if strings.Join(statuses, ",") != strings.Join(want, ",") {
		t.Fatalf("statuses = %v, want %v (answers %+v)", statuses, want, got)
	}
}

// Off is an answer's offset, -1 for none.
func Off(a Answer) int64 {
	if a.Offset == nil {
		return -1
	}
	return *a.Offset
}

// String is an answer as id:status@offset.
func (a Answer) String() string {
	return fmt.Sprintf("%s:%s@%d", a.TransactionID, a.Status, Off(a))
}

// OpsGateway is a gateway serving the operator API on NATS and HTTP.
type OpsGateway struct {
	E     *Env
	HTTP  string // base URL of the admin HTTP
	Token string
	Ing   *ingest.Ingester
	// Reg has the gateway's and the store's metrics; Logs its log.
	Reg  *prometheus.Registry
	Logs *obstest.LogBuffer
	// Tables are the endpoint sets the gateway serves and the admin HTTP
	// mounts, for tests that go over every operation.
	Tables []gateway.Table
}

// consumersWithTail serves consumer groups over store, the cycles the
// ingester's tail holds from memory in check mode: every one is read
// back from SQL, and a difference fails the pop and the test.
func (e *Env) consumersWithTail(store *pgstore.Store, ing *ingest.Ingester) *consume.Consumers {
	consumers := consume.New(store)
	consumers.UseTail(ing.Tail(), true)
	e.T.Cleanup(func() {
		if n := consumers.TailMismatches(); n > 0 {
			e.T.Errorf("%d cycles served from the tail differed from SQL", n)
		}
	})
	return consumers
}

// StartOpsGateway starts a gateway serving every endpoint set, and its
// admin HTTP server, until the test ends.
func (e *Env) StartOpsGateway(token string, icfg ingest.Config) *OpsGateway {
	e.T.Helper()
	nc, err := nats.Connect(e.NS.ClientURL())
	if err != nil {
		e.T.Fatal(err)
	}
	e.T.Cleanup(nc.Close)
	store := pgtest.Store(e.T, e.PGURL)
	store.SetMaxData(func() int64 { return queengate.MaxDataBytes(nc.MaxPayload()) }) // as the daemon does
	logs := &obstest.LogBuffer{}
	log := zerolog.New(io.MultiWriter(zerolog.NewTestWriter(e.T), logs)).Level(zerolog.WarnLevel)
	ing, err := ingest.New(store, icfg, log, nil)
	if err != nil {
		e.T.Fatal(err)
	}
	if err := ing.Start(context.Background()); err != nil {
		e.T.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(store.Collector())
	ops := operator.NewOps(operator.OpsConfig{Token: token, Version: "1.2.3", WantSchema: pgstore.LatestVersion(),
		SampleEvery: 100 * time.Millisecond, Durability: e.Durability}, store, ing, nc)
	// NoFire: the shared database holds other tests' timers; the fire loop
	// is tested in package timers and in the daemon's tests.
	tsvc, err := timers.New(store, timers.Config{NoFire: true}, log, nil)
	if err != nil {
		e.T.Fatal(err)
	}
	timerOps := timers.NewOps(tsvc, ops.AnswerBudget)
	consumers := e.consumersWithTail(store, ing)
	ops.WatchQueues(consumers)
	gw, err := gateway.New(gateway.Config{Prefix: e.Prefix, Endpoints: []gateway.EndpointSet{ops, timerOps, consumers}}, nc, ing, log, reg)
	if err != nil {
		e.T.Fatal(err)
	}
	ing.OnCommit(gw.PublishCommitted)
	if err := gw.Start(context.Background()); err != nil {
		e.T.Fatal(err)
	}
	e.T.Cleanup(gw.Stop)
	admin := operator.NewAdmin("127.0.0.1:0", store, pgstore.LatestVersion(), nc, reg, log)
	admin.Mount(ops)
	admin.MountTimers(timerOps)
	admin.MountTable(consumers)
	if err := admin.Start(context.Background()); err != nil {
		e.T.Fatal(err)
	}
	e.T.Cleanup(admin.Stop)
	return &OpsGateway{E: e, HTTP: "http://" + admin.Addr(), Token: token, Ing: ing, Reg: reg, Logs: logs,
		Tables: []gateway.Table{ops, timerOps, consumers}}
}

// ViaHTTP sends an operator request over HTTP; token "" sends none.
func (g *OpsGateway) ViaHTTP(t *testing.T, method, path, token string, body string) (int, []byte) {
	t.Helper()
	authorization := ""
	if token != "" {
		authorization = "Bearer " + token
	}
	resp, b := g.Do(t, method, path, authorization, body)
	return resp.StatusCode, b
}

// ViaNATS sends an operator request over NATS; the status is 200 or the
// micro error code.
func (g *OpsGateway) ViaNATS(t *testing.T, subject, token string, body string) (int, []byte) {
	t.Helper()
	m := nats.NewMsg(g.E.Prefix + "." + subject)
	m.Data = []byte(body)
	if token != "" {
		m.Header.Set("Authorization", "Bearer "+token)
	}
	reply, err := g.E.Client.RequestMsg(m, 30*time.Second)
	if err != nil {
		t.Fatalf("request %s: %v", m.Subject, err)
	}
	if code := reply.Header.Get("Nats-Service-Error-Code"); code != "" {
		var n int
		fmt.Sscan(code, &n)
		return n, reply.Data
	}
	return 200, reply.Data
}

// ViaNATSAuth is ViaNATS with the whole Authorization header given.
func (g *OpsGateway) ViaNATSAuth(t *testing.T, subject, authorization, body string) (int, []byte) {
	t.Helper()
	m := nats.NewMsg(subject)
	m.Data = []byte(body)
	if authorization != "" {
		m.Header.Set("Authorization", authorization)
	}
	reply, err := g.E.Client.RequestMsg(m, 30*time.Second)
	if err != nil {
		t.Fatalf("request %s: %v", subject, err)
	}
	var werr WireErr
	if reply.Header.Get("Nats-Service-Error-Code") != "" && json.Unmarshal(reply.Data, &werr) == nil {
		return werr.Error.Code, reply.Data
	}
	return 200, reply.Data
}

// Do sends an HTTP request with the Authorization header given ("":
// none), and reads the answer.
func (g *OpsGateway) Do(t *testing.T, method, path, authorization, body string) (*http.Response, []byte) {
	t.Helper()
	req, err := http.NewRequest(method, g.HTTP+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if authorization != "" {
		req.Header.Set("Authorization", authorization)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp, b
}
