package pgcluster_test

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/queengate/queengate/internal/checkfor"
	"github.com/queengate/queengate/internal/pgcluster"
)

// TestMain fails the run when a test left a PostgreSQL process behind.
func TestMain(m *testing.M) {
	code := m.Run()
	if err := pgcluster.CheckLeftovers(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		code = 1
	}
	os.Exit(code)
}

// frozenWALSender stops (SIGSTOP) the primary's WAL sender to standby, as
// the failover tests do to cut replication, and returns its pid.
func frozenWALSender(ctx context.Context, t *testing.T, primary, standby *pgcluster.Cluster) int {
	t.Helper()
	conn, err := pgx.Connect(ctx, primary.URL("postgres"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	var pid int
	if err := conn.QueryRow(ctx, "SELECT pid FROM pg_stat_replication WHERE application_name = $1", standby.Name()).Scan(&pid); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	checkfor.Check(t, time.Minute, checkfor.Cond("the WAL sender to stop", func() bool { return procState(pid) == "T" }))
	return pid
}

// procState is the state letter of a live process, "" once it is gone (a
// zombie is gone).
func procState(pid int) string {
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	_, after, found := strings.Cut(string(stat), ") ")
	if err != nil || !found || after == "" || after[0] == 'Z' {
		return ""
	}
	return after[:1]
}

// A frozen child of the postmaster is its own session leader: neither a
// kill -9 of the postmaster's process group nor the postmaster's death
// reaches it, and it ignores everything but SIGKILL until resumed. Kill,
// and a fast shutdown (which would wait for it), both end it.
func TestNoFrozenChildOutlivesItsServer(t *testing.T) {
	t.Parallel()
	for name, end := range map[string]func(*pgcluster.Cluster){"kill": (*pgcluster.Cluster).Kill, "stop": (*pgcluster.Cluster).Stop} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			ctx := testContext(t)
			primary, standby := startPair(ctx, t, pgcluster.StandbyOptions{Name: "standby"})
			waitCaughtUp(ctx, t, standby, primary)
			pid := frozenWALSender(ctx, t, primary, standby)
			end(primary)
			t.Cleanup(func() { _ = syscall.Kill(pid, syscall.SIGKILL) })
			// A process killed takes a moment to exit; one left stopped never does.
			checkfor.Check(t, 10*time.Second, checkfor.Cond("the frozen WAL sender to be gone after the primary's "+name,
				func() bool { return procState(pid) == "" }))
		})
	}
}

// TestLeftoversFindsAStrandedChild: a frozen backend whose postmaster was
// killed behind the cluster's back is what Leftovers (the check at the
// end of a test run) reports, and it is gone afterwards. Not parallel:
// Leftovers kills whatever runs in any cluster of the process.
func TestLeftoversFindsAStrandedChild(t *testing.T) {
	ctx := testContext(t)
	c, err := pgcluster.Start(ctx, pgcluster.Options{Dir: serverDir(t), Settings: testSettings})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Stop)
	conn, err := pgx.Connect(ctx, c.URL("postgres"))
	if err != nil {
		t.Fatal(err)
	}
	var backend int
	if err := conn.QueryRow(ctx, "SELECT pg_backend_pid()").Scan(&backend); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Kill(backend, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	pidFile, err := os.ReadFile(c.Dir() + "/data/postmaster.pid")
	if err != nil {
		t.Fatal(err)
	}
	first, _, _ := strings.Cut(string(pidFile), "\n")
	postmaster, err := strconv.Atoi(first)
	if err != nil {
		t.Fatal(err)
	}
	if err := syscall.Kill(postmaster, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	checkfor.Check(t, time.Minute, checkfor.Cond("the postmaster to be gone", func() bool { return procState(postmaster) == "" }))
	left := pgcluster.Leftovers()
	if !slices.ContainsFunc(left, func(p pgcluster.Proc) bool { return p.PID == backend && p.State == "T" }) {
		t.Errorf("Leftovers = %v, want the frozen backend %d among them", left, backend)
	}
	checkfor.Check(t, time.Minute, checkfor.Cond("the backend to be gone", func() bool { return procState(backend) == "" }))
}
