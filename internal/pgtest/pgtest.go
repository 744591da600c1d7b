// Package pgtest gives tests a real PostgreSQL: QUEEN_TEST_PG_URL when set
// (a superuser URL on a server the tests may create databases in),
// otherwise a throwaway cluster started once per test process from the
// server binaries on the machine (fsync off: test-only settings).
//
// A migrated template database is built once per process; [NewDB] clones it
// for tests that need a whole database, and [Shared] is one migrated
// database for tests that isolate themselves with [UniqueName].
//
// Packages that use it call [Run] from TestMain so the cluster is stopped.
package pgtest

import (
	"context"
	"fmt"
	"os"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/queengate/queengate/internal/pgadmin"
	"github.com/queengate/queengate/internal/pgcluster"
	"github.com/queengate/queengate/pgstore"
)

// EnvURL names a server to use instead of starting a cluster.
const EnvURL = "QUEEN_TEST_PG_URL"

type server struct {
	cluster  *pgcluster.Cluster // nil when EnvURL is used
	adminURL string
	template string
	shared   string
	prefix   string // distinguishes this process's databases on a shared server
}

var (
	startOnce sync.Once
	srv       *server
	startErr  error
	dbSeq     atomic.Int64
	nameSeq   atomic.Int64
)

// Run runs the tests, then each of after (the package's own cleanup:
// Run exits, so deferred calls in TestMain would not run), stops the
// cluster (if one was started) and removes this process's databases, and
// exits with the tests' status. It fails the run when a PostgreSQL
// process a test started outlived it ([pgcluster.CheckLeftovers]), and
// kills it.
func Run(m *testing.M, after ...func()) {
	code := m.Run()
	for _, f := range after {
		f()
	}
	stop()
	os.Exit(CheckLeftovers(code))
}

// CheckLeftovers is the exit code of a test run that ended with code:
// 1 when PostgreSQL processes its tests started are still running
// (reported on stderr and killed), code otherwise.
func CheckLeftovers(code int) int {
	if err := pgcluster.CheckLeftovers(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return code
}

func stop() {
	if srv == nil {
		return
	}
	if srv.cluster != nil {
		srv.cluster.Stop()
		_ = os.RemoveAll(srv.cluster.Dir())
		return
	}
	// On a server we do not own, drop what this process created.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, srv.adminURL)
	if err != nil {
		return
	}
	defer conn.Close(ctx)
	rows, err := conn.Query(ctx, "SELECT datname FROM pg_database WHERE datname LIKE $1", srv.prefix+"%")
	if err != nil {
		return
	}
	names, _ := pgx.CollectRows(rows, pgx.RowTo[string])
	for _, name := range names {
		_ = pgadmin.DropDatabase(ctx, srv.adminURL, name)
	}
}

func get(tb testing.TB) *server {
	tb.Helper()
	startOnce.Do(func() { srv, startErr = start() })
	if startErr != nil {
		tb.Fatalf("pgtest: %v", startErr)
	}
	return srv
}

func start() (*server, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	s := &server{prefix: fmt.Sprintf("qtest_%d_", os.Getpid())}
	if url := os.Getenv(EnvURL); url != "" {
		s.adminURL = url
	} else {
		dir, err := os.MkdirTemp("", "queengate-pgtest-")
		if err != nil {
			return nil, err
		}
		c, err := pgcluster.Start(ctx, pgcluster.Options{Dir: dir, Settings: TestSettings()})
		if err != nil {
			_ = os.RemoveAll(dir)
			return nil, err
		}
		s.cluster = c
		s.adminURL = c.URL("postgres")
	}
	s.template = s.prefix + "template"
	s.shared = s.prefix + "shared"
	if err := s.createMigratedTemplate(ctx); err != nil {
		return nil, err
	}
	if err := pgadmin.CreateDatabase(ctx, s.adminURL, s.shared, s.template); err != nil {
		return nil, err
	}
	return s, nil
}

// TestSettings are server settings for disposable test clusters: no
// durability, room for many parallel connections.
func TestSettings() map[string]string {
	return map[string]string{
		"fsync":              "off",
		"synchronous_commit": "off",
		"full_page_writes":   "off",
		"max_connections":    "300",
		"shared_buffers":     "256MB",
	}
}

func (s *server) createMigratedTemplate(ctx context.Context) error {
	if err := pgadmin.CreateDatabase(ctx, s.adminURL, s.template, ""); err != nil {
		return fmt.Errorf("create template on %s: %w", redact(s.adminURL), err)
	}
	conn, err := pgx.Connect(ctx, s.urlFor(s.template))
	if err != nil {
		return err
	}
	defer conn.Close(ctx)
	if _, err := pgstore.Migrate(ctx, conn); err != nil {
		return fmt.Errorf("migrate template: %w", err)
	}
	return nil
}

func (s *server) urlFor(db string) string {
	cfg, err := pgx.ParseConfig(s.adminURL)
	if err != nil {
		panic(err) // parsed successfully when the server was started
	}
	return fmt.Sprintf("postgres://%s@%s:%d/%s?sslmode=disable", userInfo(cfg), cfg.Host, cfg.Port, db)
}

func userInfo(cfg *pgx.ConnConfig) string {
	if cfg.Password == "" {
		return cfg.User
	}
	return cfg.User + ":" + cfg.Password
}

var secret = regexp.MustCompile(`:[^:@/]*@`)

func redact(url string) string { return secret.ReplaceAllString(url, ":***@") }

// NewDB creates a fresh, migrated database for this test and returns its
// URL. It is dropped when the test ends.
func NewDB(tb testing.TB) string {
	tb.Helper()
	s := get(tb)
	name := fmt.Sprintf("%sdb%d", s.prefix, dbSeq.Add(1))
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := pgadmin.CreateDatabase(ctx, s.adminURL, name, s.template); err != nil {
		tb.Fatalf("pgtest: create database: %v", err)
	}
	tb.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := pgadmin.DropDatabase(ctx, s.adminURL, name); err != nil {
			tb.Errorf("pgtest: drop database: %v", err)
		}
	})
	return s.urlFor(name)
}

// SharedURL is the URL of this process's shared migrated database. Tests
// using it must isolate themselves, e.g. with UniqueName.
func SharedURL(tb testing.TB) string {
	tb.Helper()
	s := get(tb)
	return s.urlFor(s.shared)
}

// Store opens a pgstore.Store on url, closed when the test ends.
func Store(tb testing.TB, url string) *pgstore.Store {
	tb.Helper()
	st, err := pgstore.Open(context.Background(), url)
	if err != nil {
		tb.Fatalf("pgtest: %v", err)
	}
	tb.Cleanup(st.Close)
	return st
}

var notName = regexp.MustCompile(`[^A-Za-z0-9_-]+`)

// UniqueName returns a queue or partition name, valid on the wire, that no
// other call in this process returns.
func UniqueName(tb testing.TB) string {
	base := notName.ReplaceAllString(tb.Name(), "_")
	if len(base) > 100 {
		base = base[len(base)-100:]
	}
	return strings.Trim(base, "_-") + fmt.Sprintf("-%d", nameSeq.Add(1))
}

// Cluster is a private PostgreSQL for a test that stops and restarts the
// server (fault tests). It always uses the machine's server binaries.
type Cluster struct {
	opts    pgcluster.Options
	running *pgcluster.Cluster
	// URL is a migrated database on the cluster.
	URL string
}

// NewCluster starts a private cluster with a migrated database; it is
// stopped and removed when the test ends.
func NewCluster(tb testing.TB) *Cluster {
	tb.Helper()
	dir, err := os.MkdirTemp("", "queengate-pgfault-")
	if err != nil {
		tb.Fatal(err)
	}
	c := &Cluster{opts: pgcluster.Options{Dir: dir, Settings: TestSettings()}}
	c.Start(tb)
	tb.Cleanup(func() {
		c.Stop()
		_ = os.RemoveAll(dir)
	})
	c.URL = c.running.URL("postgres")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	conn, err := pgx.Connect(ctx, c.URL)
	if err != nil {
		tb.Fatal(err)
	}
	defer conn.Close(ctx)
	if _, err := pgstore.Migrate(ctx, conn); err != nil {
		tb.Fatal(err)
	}
	return c
}

// Start starts the server (again), on the same port as before.
func (c *Cluster) Start(tb testing.TB) {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	running, err := pgcluster.Start(ctx, c.opts)
	if err != nil {
		tb.Fatalf("pgtest: %v", err)
	}
	c.running = running
	c.opts.Port = running.Port()
}

// Stop shuts the server down (fast shutdown: open connections are cut).
func (c *Cluster) Stop() {
	if c.running != nil {
		c.running.Stop()
	}
}
