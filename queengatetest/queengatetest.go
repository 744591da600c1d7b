// Package queengatetest runs a real queengate gateway for a Go test: in
// one call, an in-process gateway with an embedded nats-server and a
// throwaway PostgreSQL database, stopped and dropped when the test ends.
//
//	func TestCheckout(t *testing.T) {
//		c := queengatetest.New(t) // a connected *queengate.Client
//		answers, err := c.Push(ctx, "orders", "customer-42", msg)
//		…
//	}
//
// PostgreSQL is the server named by QUEEN_TEST_PG_URL when it is set (a
// URL of a user that may create databases; each test gets a database of
// its own), otherwise a private cluster started from the PostgreSQL
// server binaries on the machine (QUEEN_PG_BIN, else pg_config --bindir,
// else /usr/lib/postgresql/*/bin): started by the first test that needs
// it and stopped when the last one ends, or once for the whole run with
// [Main].
package queengatetest

import (
	"cmp"
	"context"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	queengate "github.com/queengate/queengate"
	"github.com/queengate/queengate/server"
)

// Option changes the gateway's configuration before it starts, e.g.
// func(c *server.Config) { c.Prefix = "shop" }.
type Option func(*server.Config)

// Gateway is a gateway running for one test. Its ClientURL and AdminAddr
// are for tests that make their own connections.
type Gateway struct {
	*server.Server
	cfg server.Config
}

// New starts a gateway for tb and returns a client connected to it;
// everything is closed when tb ends.
func New(tb testing.TB, opts ...Option) *queengate.Client {
	tb.Helper()
	return Start(tb, opts...).Connect(tb)
}

// Start starts a gateway for tb: embedded NATS on a free port, the admin
// HTTP server on a free port, a fresh database; routing and retention
// off. It is stopped, and its database dropped, when tb ends.
func Start(tb testing.TB, opts ...Option) *Gateway {
	tb.Helper()
	cfg := server.Config{
		PGURL:        newDatabase(tb),
		EmbeddedNATS: server.EmbeddedNATS{Port: -1},
		AdminAddr:    "127.0.0.1:0",
	}
	for _, opt := range opts {
		opt(&cfg)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	srv, err := server.Start(ctx, cfg)
	if err != nil {
		tb.Fatalf("queengatetest: start the gateway: %v", err)
	}
	tb.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := srv.Stop(ctx); err != nil {
			tb.Errorf("queengatetest: stop the gateway: %v", err)
		}
	})
	return &Gateway{Server: srv, cfg: cfg}
}

// Connect returns a new client of g (with g's subject prefix and NATS
// credentials), closed when tb ends.
func (g *Gateway) Connect(tb testing.TB) *queengate.Client {
	tb.Helper()
	auth, err := g.cfg.NATSAuth.Options()
	if err != nil {
		tb.Fatalf("queengatetest: %v", err)
	}
	nc, err := nats.Connect(g.ClientURL(), append(auth, nats.Name("queengatetest "+tb.Name()))...)
	if err != nil {
		tb.Fatalf("queengatetest: connect to %s: %v", g.ClientURL(), err)
	}
	tb.Cleanup(nc.Close)
	client, err := queengate.NewClient(nc, queengate.WithPrefix(g.Prefix()))
	if err != nil {
		tb.Fatalf("queengatetest: %v", err)
	}
	tb.Cleanup(client.Close)
	return client
}

// Prefix is the gateway's subject prefix.
func (g *Gateway) Prefix() string { return cmp.Or(g.cfg.Prefix, queengate.DefaultPrefix) }
