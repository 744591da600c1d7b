package server_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/nats-io/nats.go"
	"github.com/prometheus/client_golang/prometheus"

	queengate "github.com/queengate/queengate"
	"github.com/queengate/queengate/internal/checkfor"
	"github.com/queengate/queengate/internal/pgtest"
	"github.com/queengate/queengate/pgstore"
	"github.com/queengate/queengate/server"
)

func TestMain(m *testing.M) { pgtest.Run(m) }

func start(t *testing.T, cfg server.Config) *server.Server {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	srv, err := server.Start(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	return srv
}

// connect is a client of srv on a connection of the test's own, which
// outlives the gateway's; both close when the test ends.
func connect(t *testing.T, srv *server.Server, opts ...queengate.Option) *queengate.Client {
	t.Helper()
	nc, err := nats.Connect(srv.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	client, err := queengate.NewClient(nc, append(opts, queengate.WithTimeout(5*time.Second))...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(client.Close)
	return client
}

// pushQueued pushes message t-1 to q/p and fails unless it is queued.
func pushQueued(t *testing.T, client *queengate.Client) queengate.Message {
	t.Helper()
	msg := queengate.Message{TransactionID: "t-1", Data: json.RawMessage(`{}`)}
	if answers, err := client.Push(context.Background(), "q", "p", msg); err != nil || answers[0].Status != queengate.StatusQueued {
		t.Fatalf("push answered %v, %v; want queued", answers, err)
	}
	return msg
}

// TestServesUntilStopped: a started server takes pushes on ClientURL,
// registers its metrics in the Registry given, and after Stop (twice is
// harmless) answers nothing.
func TestServesUntilStopped(t *testing.T) {
	t.Parallel()
	reg := prometheus.NewRegistry()
	srv := start(t, server.Config{PGURL: pgtest.NewDB(t), EmbeddedNATS: server.EmbeddedNATS{Port: -1},
		AdminAddr: "127.0.0.1:0", Prefix: "embedded", Registry: reg})
	client := connect(t, srv, queengate.WithPrefix("embedded"))
	ctx := context.Background()
	msg := pushQueued(t, client)
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	names := map[string]bool{}
	for _, f := range families {
		names[f.GetName()] = true
	}
	if !names["queengate_build_info"] || !names["queengate_nats_connected"] || names["go_goroutines"] {
		t.Errorf("the registry given has %v: want the gateway's metrics, and no Go collector it did not ask for", names)
	}
	for range 2 {
		if err := srv.Stop(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := client.Push(ctx, "q", "p", msg); err == nil {
		t.Error("a stopped server answered a push")
	}
}

// TestReadsGoToTheReadPool: with PGReadURL, a read is served by the read
// pool (here the primary itself, which prefer-standby takes when no
// standby answers) and counted so.
func TestReadsGoToTheReadPool(t *testing.T) {
	t.Parallel()
	reg := prometheus.NewRegistry()
	url := pgtest.NewDB(t)
	srv := start(t, server.Config{PGURL: url, PGReadURL: url + "&target_session_attrs=prefer-standby",
		EmbeddedNATS: server.EmbeddedNATS{Port: -1}, AdminAddr: "127.0.0.1:0", Registry: reg})
	defer srv.Stop(context.Background())
	client := connect(t, srv)
	pushQueued(t, client)
	if ans, err := client.Read(context.Background(), "q", "p", queengate.ReadRequest{}); err != nil || len(ans.Messages) != 1 {
		t.Fatalf("read %+v, %v; want t-1", ans, err)
	}
	// Other tests write to the same server meanwhile: the read may have
	// waited for the position the primary had reached, never fallen back.
	paths := readPaths(t, reg)
	if paths["standby"]+paths["standby_after_wait"] < 1 || paths["primary_standby_behind"]+paths["primary_standby_failed"] != 0 {
		t.Errorf("read paths %v: want the read served by the read pool", paths)
	}
}

// readPaths is queengate_pg_read_pool_reads_total by path.
func readPaths(t *testing.T, reg *prometheus.Registry) map[string]float64 {
	t.Helper()
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	paths := map[string]float64{}
	for _, f := range families {
		if f.GetName() != "queengate_pg_read_pool_reads_total" {
			continue
		}
		for _, m := range f.GetMetric() {
			paths[m.GetLabel()[0].GetValue()] = m.GetCounter().GetValue()
		}
	}
	return paths
}

// TestStartRefusesASmallPool: a pool too small for the gateway's
// connections is an error at once, not a wait.
func TestStartRefusesASmallPool(t *testing.T) {
	t.Parallel()
	_, err := server.Start(context.Background(), server.Config{PGURL: pgtest.NewDB(t) + "&pool_max_conns=2",
		EmbeddedNATS: server.EmbeddedNATS{Port: -1}, AdminAddr: "127.0.0.1:0"})
	if err == nil || !strings.Contains(err.Error(), "pool_max_conns=2 is too few") {
		t.Errorf("Start with pool_max_conns=2: %v, want it refused", err)
	}
}

// TestStartEndsWithItsContext: while PostgreSQL is out of reach Start
// waits, and returns when its context ends.
func TestStartEndsWithItsContext(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	// Port 1 on loopback: nothing listens there.
	_, err := server.Start(ctx, server.Config{PGURL: "postgres://nobody@127.0.0.1:1/none?sslmode=disable",
		EmbeddedNATS: server.EmbeddedNATS{Port: -1}, AdminAddr: "127.0.0.1:0"})
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Start against no PostgreSQL: %v, want the context's deadline", err)
	}
	if _, err := server.Start(ctx, server.Config{}); err == nil {
		t.Error("Start without a PostgreSQL URL did not fail")
	}
}

// TestStartRefusesANewerSchemaOrRoutines: a database a newer build migrated, or
// whose routines a newer build installed (an old gateway restarting in
// the middle of a rolling upgrade), is an error at once, not a wait; the
// newer build's routines stay.
func TestStartRefusesANewerSchemaOrRoutines(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		what, newer string
		version     int
		refusal     string
	}{
		{"schema", "INSERT INTO queen.migrations (version, name, checksum) VALUES ($1, 'future', 'x')", pgstore.LatestVersion() + 1,
			fmt.Sprintf("schema is at version %d, newer than this build's %d", pgstore.LatestVersion()+1, pgstore.LatestVersion())},
		{"routines", "UPDATE queen.routines SET version = $1, checksum = 'newer build'", pgstore.RoutinesVersion + 1,
			fmt.Sprintf("routines are at version %d, newer than this build's %d", pgstore.RoutinesVersion+1, pgstore.RoutinesVersion)},
	} {
		t.Run(c.what, func(t *testing.T) {
			t.Parallel()
			url := pgtest.NewDB(t)
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			conn, err := pgx.Connect(ctx, url)
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close(ctx)
			if _, err := conn.Exec(ctx, c.newer, c.version); err != nil {
				t.Fatal(err)
			}
			_, err = server.Start(ctx, server.Config{PGURL: url, EmbeddedNATS: server.EmbeddedNATS{Port: -1}, AdminAddr: "127.0.0.1:0"})
			if err == nil || !strings.Contains(err.Error(), c.refusal) {
				t.Fatalf("Start over a newer %s: %v, want %q at once", c.what, err, c.refusal)
			}
			var version int
			if err := conn.QueryRow(ctx, "SELECT version FROM queen.routines").Scan(&version); err != nil ||
				(c.what == "routines" && version != c.version) {
				t.Errorf("routines version after the refusal: %d, %v; want the newer build's %d", version, err, c.version)
			}
		})
	}
}

// TestTheGatewayWritesItsGroupsActivity: the daemon runs the activity
// flusher, so a group whose pops find nothing is not idle: after a long
// poll answered empty, its idleMs is small although nothing of it was
// leased for an hour.
func TestTheGatewayWritesItsGroupsActivity(t *testing.T) {
	t.Parallel()
	url := pgtest.NewDB(t)
	srv := start(t, server.Config{PGURL: url, EmbeddedNATS: server.EmbeddedNATS{Port: -1}, AdminAddr: "127.0.0.1:0"})
	t.Cleanup(func() { _ = srv.Stop(context.Background()) })
	client := connect(t, srv)
	ctx := t.Context()
	pushQueued(t, client)
	a, err := client.Pop(ctx, "q", "", queengate.PopRequest{Group: "g"})
	if err != nil || len(a.Messages) != 1 {
		t.Fatalf("pop: %+v, %v", a, err)
	}
	if _, err := client.Ack(ctx, "q", a.Partition, queengate.AckRequest{Group: "g", LeaseID: a.LeaseID,
		Items: []queengate.AckItem{{TransactionID: "t-1", Status: queengate.AckCompleted}}}); err != nil {
		t.Fatal(err)
	}
	store := pgtest.Store(t, url)
	idleMs := func() int64 {
		ans, err := client.Groups(ctx, "q")
		if err != nil || len(ans.Groups) != 1 {
			t.Fatalf("groups: %+v, %v", ans, err)
		}
		return ans.Groups[0].IdleMs
	}
	checkfor.Check(t, 30*time.Second, func() error {
		var written bool
		if err := store.Pool().QueryRow(ctx, "SELECT active_at IS NOT NULL FROM queen.consumer_groups").Scan(&written); err != nil || !written {
			return fmt.Errorf("the ack's activity is not written (%v)", err)
		}
		return nil
	})
	// Everything of the group an hour old: only what comes next can make
	// it active.
	if _, err := store.Pool().Exec(ctx, `UPDATE queen.consumer_groups SET created_at = now() - interval '1 hour', active_at = NULL;
		UPDATE queen.consumer_cursors SET leased_at = now() - interval '1 hour'`); err != nil {
		t.Fatal(err)
	}
	if ms := idleMs(); ms < time.Hour.Milliseconds() {
		t.Fatalf("g backdated is idle %d ms; want an hour", ms)
	}
	if a, err := client.Pop(ctx, "q", "", queengate.PopRequest{Group: "g", WaitMs: 500}); err != nil || len(a.Messages) != 0 {
		t.Fatalf("long poll: %+v, %v; want nothing", a, err)
	}
	checkfor.Check(t, 30*time.Second, func() error {
		if ms := idleMs(); ms > time.Minute.Milliseconds() {
			return fmt.Errorf("after a long poll answered empty, g is idle %d ms", ms)
		}
		return nil
	})
}
