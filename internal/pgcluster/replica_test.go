package pgcluster_test

import (
	"context"
	"errors"
	"os"
	"slices"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/queengate/queengate/internal/checkfor"
	"github.com/queengate/queengate/internal/pgcluster"
)

// testSettings keep these harness tests quick. fsync=off is fine here
// (the servers are crashed, not the machine); a test of durability must
// not use it.
var testSettings = map[string]string{
	"fsync":           "off",
	"max_connections": "40",
	"shared_buffers":  "16MB",
}

func testContext(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// serverDir is a folder for one server, removed after the test. Not
// t.TempDir: its parent is private to root, and the server may run as
// the postgres user.
func serverDir(t *testing.T) string {
	dir, err := os.MkdirTemp("", "pgcluster-test-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	return dir
}

func startPrimary(ctx context.Context, t *testing.T, name string) *pgcluster.Cluster {
	t.Helper()
	c, err := pgcluster.StartPrimary(ctx, pgcluster.Options{Dir: serverDir(t), Name: name, Settings: testSettings})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Stop)
	return c
}

// startPair starts a primary, a standby of it, and a table t (name text)
// on the primary.
func startPair(ctx context.Context, t *testing.T, opts pgcluster.StandbyOptions) (primary, standby *pgcluster.Cluster) {
	t.Helper()
	primary = startPrimary(ctx, t, "primary")
	standby = startStandby(ctx, t, primary, opts)
	execSQL(ctx, t, primary.URL("postgres"), "CREATE TABLE t (name text)")
	return primary, standby
}

func waitCaughtUp(ctx context.Context, t *testing.T, standby, primary *pgcluster.Cluster) {
	t.Helper()
	if err := standby.WaitCaughtUp(ctx, primary); err != nil {
		t.Fatal(err)
	}
}

func startStandby(ctx context.Context, t *testing.T, primary *pgcluster.Cluster, opts pgcluster.StandbyOptions) *pgcluster.Cluster {
	t.Helper()
	opts.Dir = serverDir(t)
	c, err := pgcluster.StartStandby(ctx, primary, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Stop)
	return c
}

func execSQL(ctx context.Context, t *testing.T, url, sql string, args ...any) {
	t.Helper()
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, sql, args...); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
}

func queryInt(ctx context.Context, t *testing.T, url, sql string) int {
	t.Helper()
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	var n int
	if err := conn.QueryRow(ctx, sql).Scan(&n); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
	return n
}

func names(ctx context.Context, t *testing.T, c *pgcluster.Cluster) []string {
	t.Helper()
	conn, err := pgx.Connect(ctx, c.URL("postgres"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	rows, err := conn.Query(ctx, "SELECT name FROM t ORDER BY name")
	if err != nil {
		t.Fatal(err)
	}
	got, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	return got
}

// serverPort is the port of the server a URL connects to.
func serverPort(ctx context.Context, t *testing.T, url string) int {
	t.Helper()
	return queryInt(ctx, t, url, "SELECT inet_server_port()")
}

func TestSyncStandbyHasTheCommitWhenItReturns(t *testing.T) {
	t.Parallel()
	ctx := testContext(t)
	primary, standby := startPair(ctx, t, pgcluster.StandbyOptions{Name: "sync1", Sync: true, Commit: "remote_apply"})

	// With the standby's replay paused, a commit on the primary waits.
	execSQL(ctx, t, standby.URL("postgres"), "SELECT pg_wal_replay_pause()")
	committed := make(chan error, 1)
	go func() {
		conn, err := pgx.Connect(ctx, primary.URL("postgres")+"&application_name=committer")
		if err == nil {
			defer conn.Close(ctx)
			_, err = conn.Exec(ctx, "INSERT INTO t VALUES ('synced')")
		}
		committed <- err
	}()
	checkfor.Check(t, time.Minute, func() error {
		n := queryInt(ctx, t, primary.URL("postgres"),
			"SELECT count(*) FROM pg_stat_activity WHERE application_name = 'committer' AND wait_event = 'SyncRep'")
		if n != 1 {
			return errors.New("the commit does not wait for the standby")
		}
		return nil
	})
	execSQL(ctx, t, standby.URL("postgres"), "SELECT pg_wal_replay_resume()")
	if err := <-committed; err != nil {
		t.Fatal(err)
	}
	if got := names(ctx, t, standby); !slices.Equal(got, []string{"synced"}) {
		t.Fatalf("standby has %q when the commit returns, want [synced]", got)
	}

	// Switched off at runtime, a commit no longer waits for the standby.
	if err := primary.SetSync(ctx, ""); err != nil {
		t.Fatal(err)
	}
	execSQL(ctx, t, standby.URL("postgres"), "SELECT pg_wal_replay_pause()")
	execSQL(ctx, t, primary.URL("postgres"), "INSERT INTO t VALUES ('unsynced')")
	if got := names(ctx, t, standby); !slices.Equal(got, []string{"synced"}) {
		t.Fatalf("paused standby has %q, want [synced]", got)
	}
	execSQL(ctx, t, standby.URL("postgres"), "SELECT pg_wal_replay_resume()")
	waitCaughtUp(ctx, t, standby, primary)
	if got := names(ctx, t, standby); !slices.Equal(got, []string{"synced", "unsynced"}) {
		t.Fatalf("standby caught up has %q", got)
	}
}

func TestAsyncStandbyCatchesUpAfterBeingDown(t *testing.T) {
	t.Parallel()
	ctx := testContext(t)
	primary, standby := startPair(ctx, t, pgcluster.StandbyOptions{Name: "async1"})
	execSQL(ctx, t, primary.URL("postgres"), "INSERT INTO t SELECT 'a' || i FROM generate_series(1, 1000) i")
	waitCaughtUp(ctx, t, standby, primary)
	const count = "SELECT count(*) FROM t"
	if n := queryInt(ctx, t, standby.URL("postgres"), count); n != 1000 {
		t.Fatalf("standby has %d rows, want 1000", n)
	}
	if port := serverPort(ctx, t, pgcluster.MultiHostURL("postgres", "standby", primary, standby)); port != standby.Port() {
		t.Errorf("standby URL connects to %d, want the standby's %d", port, standby.Port())
	}
	if port := serverPort(ctx, t, pgcluster.MultiHostURL("postgres", "read-write", standby, primary)); port != primary.Port() {
		t.Errorf("read-write URL connects to %d, want the primary's %d", port, primary.Port())
	}

	// Crashed while the primary writes and moves to new WAL files, the
	// standby recovers and catches up from the WAL the primary kept.
	standby.Crash()
	if port := serverPort(ctx, t, pgcluster.MultiHostURL("postgres", "prefer-standby", standby, primary)); port != primary.Port() {
		t.Errorf("prefer-standby URL without a standby connects to %d, want the primary's %d", port, primary.Port())
	}
	for range 3 {
		execSQL(ctx, t, primary.URL("postgres"), "INSERT INTO t SELECT 'b' || i FROM generate_series(1, 1000) i")
		execSQL(ctx, t, primary.URL("postgres"), "SELECT pg_switch_wal()")
	}
	if err := standby.Restart(ctx); err != nil {
		t.Fatal(err)
	}
	waitCaughtUp(ctx, t, standby, primary)
	if n := queryInt(ctx, t, standby.URL("postgres"), count); n != 4000 {
		t.Fatalf("standby has %d rows, want 4000", n)
	}
	if port := serverPort(ctx, t, pgcluster.MultiHostURL("postgres", "prefer-standby", primary, standby)); port != standby.Port() {
		t.Errorf("prefer-standby URL connects to %d, want the standby's %d", port, standby.Port())
	}
}

func TestFailoverAfterTheCrashOfASyncPrimary(t *testing.T) {
	t.Parallel()
	ctx := testContext(t)
	primary, standby := startPair(ctx, t, pgcluster.StandbyOptions{Name: "new", Sync: true})
	execSQL(ctx, t, primary.URL("postgres"), "INSERT INTO t VALUES ('acknowledged')")
	systemID, timeline := identity(ctx, t, primary)
	readWrite := pgcluster.MultiHostURL("postgres", "read-write", primary, standby)
	if port := serverPort(ctx, t, readWrite); port != primary.Port() {
		t.Fatalf("read-write URL connects to %d, want the primary's %d", port, primary.Port())
	}

	primary.Kill()
	if err := standby.Promote(ctx); err != nil {
		t.Fatal(err)
	}
	newID, newTimeline := identity(ctx, t, standby)
	if newID != systemID || newTimeline <= timeline {
		t.Fatalf("promoted: system %d timeline %d, want system %d and a timeline above %d",
			newID, newTimeline, systemID, timeline)
	}
	if port := serverPort(ctx, t, readWrite); port != standby.Port() {
		t.Fatalf("read-write URL connects to %d after the failover, want the new primary's %d", port, standby.Port())
	}
	// The synchronous commit survived; the new primary takes writes.
	execSQL(ctx, t, readWrite, "INSERT INTO t VALUES ('after')")
	if got := names(ctx, t, standby); !slices.Equal(got, []string{"acknowledged", "after"}) {
		t.Fatalf("new primary has %q", got)
	}

	// The old primary comes back as a synchronous standby of the new one.
	if _, err := primary.Rewind(ctx, standby); err != nil {
		t.Fatal(err)
	}
	if err := standby.SetSync(ctx, "remote_apply", primary.Name()); err != nil {
		t.Fatal(err)
	}
	execSQL(ctx, t, readWrite, "INSERT INTO t VALUES ('later')")
	if got := names(ctx, t, primary); !slices.Equal(got, []string{"acknowledged", "after", "later"}) {
		t.Fatalf("re-attached old primary has %q", got)
	}
	if id, tli := identity(ctx, t, primary); id != systemID || tli != newTimeline {
		t.Fatalf("re-attached old primary: system %d timeline %d, want %d and %d", id, tli, systemID, newTimeline)
	}
}

func identity(ctx context.Context, t *testing.T, c *pgcluster.Cluster) (systemID uint64, timeline uint32) {
	t.Helper()
	systemID, err := c.SystemID(ctx)
	if err != nil {
		t.Fatal(err)
	}
	timeline, err = c.Timeline(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return systemID, timeline
}

func TestRewindDropsWhatOnlyTheOldPrimaryHad(t *testing.T) {
	t.Parallel()
	ctx := testContext(t)
	primary, standby := startPair(ctx, t, pgcluster.StandbyOptions{Name: "new"})
	execSQL(ctx, t, primary.URL("postgres"), "INSERT INTO t VALUES ('common')")
	waitCaughtUp(ctx, t, standby, primary)
	// Promoted while the old primary still runs (a partition), the
	// standby no longer follows it: what the old primary writes now only
	// it has.
	if err := standby.Promote(ctx); err != nil {
		t.Fatal(err)
	}
	execSQL(ctx, t, primary.URL("postgres"), "INSERT INTO t VALUES ('lost')")
	primary.Crash()
	execSQL(ctx, t, standby.URL("postgres"), "INSERT INTO t VALUES ('kept')")

	rewound, err := primary.Rewind(ctx, standby)
	if err != nil || !rewound {
		t.Fatalf("rewind: rewound %v, err %v", rewound, err)
	}
	waitCaughtUp(ctx, t, primary, standby)
	if got := names(ctx, t, primary); !slices.Equal(got, []string{"common", "kept"}) {
		t.Fatalf("rewound old primary has %q, want [common kept]", got)
	}
	if recovering, err := primary.InRecovery(ctx); err != nil || !recovering {
		t.Fatalf("rewound old primary in recovery: %v, %v", recovering, err)
	}
}

func TestRewindFallsBackToABaseBackup(t *testing.T) {
	t.Parallel()
	ctx := testContext(t)
	primary := startPrimary(ctx, t, "primary")
	execSQL(ctx, t, primary.URL("postgres"), "CREATE TABLE t (name text)")
	execSQL(ctx, t, primary.URL("postgres"), "INSERT INTO t VALUES ('primary')")
	// A server of another system: pg_rewind refuses it.
	stranger := startPrimary(ctx, t, "stranger")

	rewound, err := stranger.Rewind(ctx, primary)
	if err != nil || rewound {
		t.Fatalf("rewind of a stranger: rewound %v, err %v; want a base backup", rewound, err)
	}
	waitCaughtUp(ctx, t, stranger, primary)
	if got := names(ctx, t, stranger); !slices.Equal(got, []string{"primary"}) {
		t.Fatalf("rebuilt standby has %q", got)
	}
	wantID, _ := identity(ctx, t, primary)
	if id, _ := identity(ctx, t, stranger); id != wantID {
		t.Fatalf("rebuilt standby is system %d, want %d", id, wantID)
	}
}

func TestParseLSN(t *testing.T) {
	for _, text := range []string{"0/0", "16/B374D848", "FFFFFFFF/FFFFFFFF"} {
		lsn, err := pgcluster.ParseLSN(text)
		if err != nil || lsn.String() != text {
			t.Errorf("ParseLSN(%q) = %v, %v", text, lsn, err)
		}
	}
	if lsn, _ := pgcluster.ParseLSN("1/0"); lsn != 1<<32 {
		t.Errorf("1/0 is %d, want %d", lsn, uint64(1)<<32)
	}
	for _, bad := range []string{"", "16", "G/0", "1/100000000"} {
		if _, err := pgcluster.ParseLSN(bad); err == nil {
			t.Errorf("ParseLSN(%q) did not fail", bad)
		}
	}
}

// TestAServerOnATakenPortIsNotMistakenForOurs: a start whose port another
// server already serves fails with PortTakenError, rather than taking
// the other server's answers for its own (a standby that then never
// streamed hung its test for three minutes).
func TestAServerOnATakenPortIsNotMistakenForOurs(t *testing.T) {
	t.Parallel()
	ctx := testContext(t)
	first := startPrimary(ctx, t, "first")
	second, err := pgcluster.Start(ctx, pgcluster.Options{Dir: serverDir(t), Port: first.Port(), Settings: testSettings})
	if err == nil {
		second.Stop()
		t.Fatalf("a second server started on the first's port %d", first.Port())
	}
	var taken *pgcluster.PortTakenError
	if !errors.As(err, &taken) || taken.Port != first.Port() {
		t.Fatalf("start on a taken port: %v, want a PortTakenError for port %d", err, first.Port())
	}
}
