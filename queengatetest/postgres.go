package queengatetest

import (
	"context"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/queengate/queengate/internal/pgadmin"
	"github.com/queengate/queengate/internal/pgcluster"
	"github.com/queengate/queengate/internal/pgtest"
)

// EnvPGURL names a PostgreSQL server to create the tests' databases on
// instead of starting a cluster.
const EnvPGURL = pgtest.EnvURL

// cluster is the private PostgreSQL of this test process, shared by the
// tests running at a time.
var cluster struct {
	mu      sync.Mutex
	running *pgcluster.Cluster
	users   int  // tests holding it
	held    bool // Main holds it for the whole run
}

var dbSeq atomic.Int64

// Main runs the tests of a package (call it from TestMain) with one
// private cluster for the whole run, instead of one per stretch of tests
// that need it, and removes it at the end.
func Main(m *testing.M) {
	cluster.mu.Lock()
	cluster.held = true
	cluster.mu.Unlock()
	code := m.Run()
	cluster.mu.Lock()
	cluster.held = false
	stopUnused()
	cluster.mu.Unlock()
	os.Exit(pgtest.CheckLeftovers(code))
}

// newDatabase creates an empty database for tb, dropped when tb ends, and
// returns its URL.
func newDatabase(tb testing.TB) string {
	tb.Helper()
	adminURL := os.Getenv(EnvPGURL)
	if adminURL == "" {
		adminURL = useCluster(tb)
	}
	name := fmt.Sprintf("queengatetest_%d_%d", os.Getpid(), dbSeq.Add(1))
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	url, err := pgadmin.DatabaseURL(adminURL, name)
	if err != nil {
		tb.Fatalf("queengatetest: %s: %v", EnvPGURL, err)
	}
	if err := pgadmin.EnsureDatabase(ctx, adminURL, name); err != nil {
		tb.Fatalf("queengatetest: create database %s: %v", name, err)
	}
	tb.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := pgadmin.DropDatabase(ctx, adminURL, name); err != nil {
			tb.Errorf("queengatetest: drop database %s: %v", name, err)
		}
	})
	return url
}

// useCluster returns the private cluster's admin URL, starting it if no
// test holds it; tb lets it go when it ends.
func useCluster(tb testing.TB) string {
	tb.Helper()
	cluster.mu.Lock()
	defer cluster.mu.Unlock()
	if cluster.running == nil {
		running, err := startCluster()
		if err != nil {
			tb.Fatalf("queengatetest: %v (set %s to use a running server instead)", err, EnvPGURL)
		}
		cluster.running = running
	}
	cluster.users++
	tb.Cleanup(func() {
		cluster.mu.Lock()
		defer cluster.mu.Unlock()
		cluster.users--
		stopUnused()
	})
	return cluster.running.URL("postgres")
}

func startCluster() (*pgcluster.Cluster, error) {
	dir, err := os.MkdirTemp("", "queengatetest-pg-")
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	running, err := pgcluster.Start(ctx, pgcluster.Options{Dir: dir, Settings: pgtest.TestSettings()})
	if err != nil {
		_ = os.RemoveAll(dir)
		return nil, err
	}
	return running, nil
}

// stopUnused stops and removes the cluster when nothing holds it; the
// caller holds cluster.mu.
func stopUnused() {
	if cluster.running == nil || cluster.users > 0 || cluster.held {
		return
	}
	cluster.running.Stop()
	_ = os.RemoveAll(cluster.running.Dir())
	cluster.running = nil
}
