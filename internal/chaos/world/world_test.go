package world

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/nats-io/nats.go"

	"github.com/queengate/queengate/internal/checkfor"
	"github.com/queengate/queengate/routing"
)

// TestWorldWithoutGateways starts a world of PostgreSQL behind the proxy
// and two NATS servers (the gateways are cmd/queenchaos's tests'): each
// client starts on its own server, every server maps pushes onto the
// routing shards, a restarted server serves again on its port and maps,
// and PostgreSQL serves again after a crash.
func TestWorldWithoutGateways(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	// Not t.TempDir: its parent is private, and PostgreSQL runs as its
	// own user.
	dir, err := os.MkdirTemp("", "chaos-world-test-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	w, err := Start(ctx, dir, "", 2, 0, Replication{}, t.Logf)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	urls := strings.Split(w.NATSURLs(), ",")
	if len(urls) != 2 || len(w.NATSNodes()) != 2 || len(w.Gateways()) != 0 {
		t.Fatalf("NATS %v, %d nodes, %d gateways; want two servers and no gateway", urls, len(w.NATSNodes()), len(w.Gateways()))
	}
	sub, pub := connect(t, w, 0, urls[0]), connect(t, w, 1, urls[1])
	shardOf(t, sub, pub)

	if err := w.NATSNodes()[1].Restart(ctx, 0); err != nil {
		t.Fatal(err)
	}
	// On its port again: a new client starts on it, and pushes through
	// it are mapped.
	shardOf(t, sub, connect(t, w, 1, urls[1]))

	if err := w.PGCrash(ctx); err != nil {
		t.Fatal(err)
	}
	conn, err := pgx.Connect(ctx, w.PGURL())
	if err != nil {
		t.Fatalf("PostgreSQL after a crash: %v", err)
	}
	conn.Close(ctx)
}

// connect is client i's connection, which must start on want.
func connect(t *testing.T, w *World, i int, want string) *nats.Conn {
	t.Helper()
	nc, err := w.Connect(i, fmt.Sprintf("world test %d", i))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	if got := nc.ConnectedUrl(); got != want {
		t.Errorf("client %d connected to %s, want its own server %s", i, got, want)
	}
	return nc
}

// shardOf publishes a push through pub and checks that sub, on another
// server, receives it on the routing shard of its queue and partition.
func shardOf(t *testing.T, sub, pub *nats.Conn) {
	t.Helper()
	s, err := sub.SubscribeSync("queen.>")
	if err != nil {
		t.Fatal(err)
	}
	defer s.Unsubscribe()
	want := fmt.Sprintf(".%d.orders.p1", routing.ShardOf(routingShards, "orders", "p1"))
	// The subscription reaches the other server by the route, soon but
	// not at once: publish until it arrives.
	checkfor.Check(t, 30*time.Second, func() error {
		if err := pub.Publish("queen.push.orders.p1", []byte("x")); err != nil {
			return err
		}
		m, err := s.NextMsg(100 * time.Millisecond)
		if err != nil {
			return err
		}
		if strings.HasPrefix(m.Subject, "queen.push.") || !strings.HasSuffix(m.Subject, want) {
			return fmt.Errorf("push received on %s, want the shard subject ending %s", m.Subject, want)
		}
		return nil
	})
}

func TestSleepEndsWithTheContext(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	Sleep(ctx, time.Hour) // returns at once, or the test times out
}

func TestReplicationString(t *testing.T) {
	t.Parallel()
	for r, want := range map[Replication]string{
		{}:              "one PostgreSQL behind a proxy",
		{Standby: true}: "a PostgreSQL primary and an asynchronous standby",
		{Standby: true, Sync: true, Commit: "on"}: "a PostgreSQL primary and a synchronous standby (synchronous_commit on)",
	} {
		if got := r.String(); got != want {
			t.Errorf("%#v: %q, want %q", r, got, want)
		}
	}
}
