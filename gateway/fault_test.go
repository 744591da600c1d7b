package gateway_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"

	"github.com/queengate/queengate/gateway"
	"github.com/queengate/queengate/ingest"
	"github.com/queengate/queengate/internal/checkfor"
	"github.com/queengate/queengate/internal/gatewaytest"
	"github.com/queengate/queengate/internal/pgtest"
	"github.com/queengate/queengate/internal/storewatch"
	"github.com/queengate/queengate/internal/tcpproxy"
	"github.com/queengate/queengate/operator"
	"github.com/queengate/queengate/pgstore"
)

// eventually polls cond until it holds or the timeout passes.

func TestPostgresDownGivesFailedThenRecovers(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	cluster := pgtest.NewCluster(t)
	store := pgtest.Store(t, cluster.URL)
	e.Store = store
	gw, _ := e.StartGateway(gatewayOpts{Store: store, Ingest: ingest.Config{PushTimeout: 5 * time.Second}})
	_ = gw
	admin := operator.NewAdmin("127.0.0.1:0", store, pgstore.LatestVersion(), e.Client, prometheus.NewRegistry(), zerolog.Nop())
	if err := admin.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(admin.Stop)

	wantStatus(t, e.Push(t, e.Subject("p"), msgs("before")), "queued")
	if code, body := gatewaytest.Readyz(t, admin.Addr()); code != http.StatusOK {
		t.Fatalf("/gatewaytest.Readyz = %d %v with everything up", code, body)
	}

	cluster.Stop()
	down := e.Push(t, e.Subject("p"), msgs("during-1", "during-2", "during-1"))
	wantStatus(t, down, "failed", "failed", "failed")
	if down[0].Error == "" {
		t.Errorf("failed answer carries no error: %+v", down[0])
	}
	if code, body := gatewaytest.Readyz(t, admin.Addr()); code != http.StatusServiceUnavailable || !strings.Contains(body["postgres"], "unreachable") {
		t.Errorf("/gatewaytest.Readyz = %d %v with PostgreSQL down, want 503 naming postgres", code, body)
	}

	cluster.Start(t)
	// No restart of the gateway: the pool reconnects by itself.
	var again []answer
	checkfor.Check(t, 30*time.Second, checkfor.Cond("pushes to succeed after PostgreSQL returns", func() bool {
		again = e.Push(t, e.Subject("p"), msgs("during-1", "during-2", "before"))
		return again[0].Status != "failed"
	}))
	wantStatus(t, again, "queued", "queued", "duplicate")
	if code, body := gatewaytest.Readyz(t, admin.Addr()); code != http.StatusOK {
		t.Errorf("/gatewaytest.Readyz = %d %v after recovery", code, body)
	}
	if n := e.StoredCount(t); n != 3 {
		t.Errorf("%d messages stored, want 3", n)
	}
}

// blockPartition holds the partition's row lock from another transaction
// until the returned function is called, so that a push waits on it.
func blockPartition(t *testing.T, store *pgstore.Store, queue, partition string) (blocker int32, release func()) {
	t.Helper()
	ctx := context.Background()
	p, err := store.EnsurePartition(ctx, queue, partition)
	if err != nil {
		t.Fatal(err)
	}
	tx, err := store.Pool().Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := tx.QueryRow(ctx, "SELECT pg_backend_pid() FROM queen.log_partitions WHERE id = $1 FOR UPDATE",
		p.ID).Scan(&blocker); err != nil {
		t.Fatal(err)
	}
	return blocker, func() { _ = tx.Rollback(ctx) }
}

func TestStatementTimeoutGivesFailedAndRetryIsExact(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	// Long enough for the pushes that are not blocked on a loaded
	// machine: only the blocked one may time out.
	e.StartGateway(gatewayOpts{Ingest: ingest.Config{PushTimeout: 2 * time.Second}})
	wantStatus(t, e.Push(t, e.Subject("slow"), msgs("a")), "queued")
	_, release := blockPartition(t, e.Store, e.Queue, "slow")
	got := e.Push(t, e.Subject("slow"), msgs("a", "b"))
	release()
	wantStatus(t, got, "failed", "failed")
	// The timed-out push reached the server, blocked on the partition's
	// lock; the gateway settles it before answering (its backend is
	// terminated, then the messages looked for): not stored, for certain.
	if !strings.Contains(got[1].Error, "not stored") {
		t.Errorf("a timed-out push, settled: %q, want a not-stored failure", got[1].Error)
	}
	retry := e.Push(t, e.Subject("slow"), msgs("a", "b"))
	if retry[0].Status != "duplicate" || retry[1].Status != "queued" {
		t.Errorf("retry answered %v, want a duplicate and b queued", retry)
	}
	if n := e.StoredCount(t); n != 2 {
		t.Errorf("%d messages stored, want 2: a once, b once", n)
	}
}

func TestConnectionKilledMidFlushGivesFailed(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.StartGateway(gatewayOpts{})
	wantStatus(t, e.Push(t, e.Subject("kill"), msgs("k0")), "queued")
	blocker, release := blockPartition(t, e.Store, e.Queue, "kill")
	defer release()

	done := make(chan []answer, 1)
	go func() { done <- e.Push(t, e.Subject("kill"), msgs("k1", "k2")) }()
	// Find the push waiting on the lock and terminate its backend.
	ctx := context.Background()
	checkfor.Check(t, 30*time.Second, checkfor.Cond("the push to wait on the row lock and be terminated", func() bool {
		var killed int
		err := e.Store.Pool().QueryRow(ctx, `
			SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity
			 WHERE $1 = ANY (pg_blocking_pids(pid)) AND query LIKE '%log_push_bundle%'`, blocker).Scan(&killed)
		if err != nil {
			t.Fatal(err)
		}
		return killed > 0
	}))
	got := <-done
	wantStatus(t, got, "failed", "failed")
	// The terminated backend's FATAL could have followed a COMMIT: the
	// gateway settles it (a verification read) before answering.
	if !strings.Contains(got[0].Error, "not stored") || !strings.Contains(got[0].Error, "settled") {
		t.Errorf("a push whose backend was terminated must be settled as not stored: %q", got[0].Error)
	}
	release()
	wantStatus(t, e.Push(t, e.Subject("kill"), msgs("k1", "k2", "k0")), "queued", "queued", "duplicate")
	if n := e.StoredCount(t); n != 3 {
		t.Errorf("%d messages stored, want 3", n)
	}
}

func TestReadyzWaitsForTheGatewayToServe(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ing, err := ingest.New(e.Store, ingest.Config{}, zerolog.Nop(), nil)
	if err != nil {
		t.Fatal(err)
	}
	gw, err := gateway.New(gateway.Config{}, e.Client, ing, zerolog.Nop(), nil)
	if err != nil {
		t.Fatal(err)
	}
	admin := operator.NewAdmin("127.0.0.1:0", e.Store, pgstore.LatestVersion(), e.Client, prometheus.NewRegistry(), zerolog.Nop())
	admin.AddReadiness("gateway", gw.Serving)
	if err := admin.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(admin.Stop)
	if code, body := gatewaytest.Readyz(t, admin.Addr()); code != http.StatusServiceUnavailable || body["gateway"] != "starting" {
		t.Errorf("/gatewaytest.Readyz before the gateway started = %d %v, want 503 with gateway starting", code, body)
	}
	if err := ing.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := gw.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	if code, body := gatewaytest.Readyz(t, admin.Addr()); code != http.StatusOK || body["gateway"] != "ok" {
		t.Errorf("/gatewaytest.Readyz while serving = %d %v", code, body)
	}
	gw.Stop()
	if code, body := gatewaytest.Readyz(t, admin.Addr()); code != http.StatusServiceUnavailable || body["gateway"] != "stopping" {
		t.Errorf("/gatewaytest.Readyz after Stop = %d %v, want 503 with gateway stopping", code, body)
	}
}

func TestStoreWatchFollowsPostgres(t *testing.T) {
	t.Parallel()
	cluster := pgtest.NewCluster(t)
	w := storewatch.New(pgtest.Store(t, cluster.URL), storewatch.Config{Every: 50 * time.Millisecond})
	if err := w.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(w.Stop)
	if !w.Up() {
		t.Fatal("PostgreSQL is up, the watch says down")
	}
	cluster.Stop()
	checkfor.Check(t, 10*time.Second, checkfor.Cond("the watch to see PostgreSQL down", func() bool { return !w.Up() }))
	cluster.Start(t)
	checkfor.Check(t, 30*time.Second, checkfor.Cond("the watch to see PostgreSQL back", w.Up))
}

// TestAFrozenPostgresGetsFastAnswers: PostgreSQL stops answering (a
// network freeze, nothing closed). The push timeout is far longer than
// the producer's, so only the store watch can answer in time: the push in
// flight is answered failed, new pushes 503, and once PostgreSQL answers
// again the retries store everything exactly once.
func TestAFrozenPostgresGetsFastAnswers(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	u, err := url.Parse(e.PGURL)
	if err != nil {
		t.Fatal(err)
	}
	proxy, err := tcpproxy.Start(u.Host)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(proxy.Close)
	u.Host = proxy.Addr()
	store := pgtest.Store(t, u.String())
	_, ing := e.StartGateway(gatewayOpts{Store: store, Ingest: ingest.Config{PushTimeout: 2 * time.Minute}})
	// Checks of 250 ms, not 100: on a machine starved by a race-detector
	// suite, two 100 ms heartbeats in a row timed out before the freeze,
	// and the push meant to be stored first was answered failed.
	watch := storewatch.New(store, storewatch.Config{Every: 250 * time.Millisecond, OnChange: ing.SetStoreReachable})
	if err := watch.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(watch.Stop)
	wantStatus(t, e.Push(t, e.Subject("frozen"), msgs("w")), "queued")

	proxy.Freeze(tcpproxy.Both)
	// e.request waits 30 s at most. The push is normally in flight when the
	// watch notices (after two 250 ms checks); on a starved machine it may
	// arrive after, and is refused: either is a fast answer.
	first := e.Request(t, e.Subject("frozen"), msgs("a", "b"))
	if code := first.Header.Get("Nats-Service-Error-Code"); code != "" {
		t.Logf("the first push arrived after the watch noticed: %s %s", code, first.Data)
	} else {
		var inFlight []answer
		if err := json.Unmarshal(first.Data, &inFlight); err != nil {
			t.Fatal(err)
		}
		wantStatus(t, inFlight, "failed", "failed")
		if !strings.Contains(inFlight[0].Error, "unreachable") {
			t.Errorf("the push in flight: %q, want it to name PostgreSQL unreachable", inFlight[0].Error)
		}
	}
	refused := e.Request(t, e.Subject("frozen"), msgs("c"))
	if code := refused.Header.Get("Nats-Service-Error-Code"); code != "503" || !strings.Contains(string(refused.Data), "PostgreSQL unreachable") {
		t.Errorf("a push while PostgreSQL is frozen: %s %s, want 503 naming PostgreSQL", code, refused.Data)
	}

	proxy.Thaw()
	proxy.Cut() // what a long freeze ends in: the stalled connections reset
	checkfor.Check(t, 30*time.Second, checkfor.Cond("the watch to see PostgreSQL again", watch.Up))
	retry := e.Push(t, e.Subject("frozen"), msgs("a", "b", "c", "w"))
	for _, a := range retry[:3] {
		if a.Status != "queued" && a.Status != "duplicate" {
			t.Errorf("retry after the freeze: %v, want each stored", retry)
		}
	}
	if retry[3].Status != "duplicate" {
		t.Errorf("w answered %v, want duplicate", retry[3])
	}
	if n := e.StoredCount(t); n != 4 {
		t.Errorf("%d messages stored, want 4 (w, a, b, c once each)", n)
	}
}
