package proc

import (
	"context"
	"os"
	"slices"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/queengate/queengate/internal/bench"
)

// startTestPostgres starts what --self --replication mode runs for
// PostgreSQL, without the gateways, and stops it after the test.
func startTestPostgres(ctx context.Context, t *testing.T, mode string) *Self {
	t.Helper()
	// Not t.TempDir: its parent is private to root, and the servers may
	// run as the postgres user.
	dir, err := os.MkdirTemp("", "queenbench-test-")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	e := &Self{dir: dir, w: bench.Workload{Replication: mode}}
	t.Cleanup(e.Stop)
	if err := e.startPostgres(ctx, t.Logf); err != nil {
		t.Fatal(err)
	}
	return e
}

// replicationState is what the gateways' URL leads to: whether the
// server is a standby, its synchronous_commit, and its standbys as
// pg_stat_replication shows them ("name state sync_state").
func replicationState(ctx context.Context, t *testing.T, url string) (inRecovery bool, commit string, standbys []string) {
	t.Helper()
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	if err := conn.QueryRow(ctx, "SELECT pg_is_in_recovery(), current_setting('synchronous_commit')").Scan(&inRecovery, &commit); err != nil {
		t.Fatal(err)
	}
	rows, err := conn.Query(ctx, "SELECT application_name || ' ' || state || ' ' || sync_state FROM pg_stat_replication ORDER BY 1")
	if err != nil {
		t.Fatal(err)
	}
	if standbys, err = pgx.CollectRows(rows, pgx.RowTo[string]); err != nil {
		t.Fatal(err)
	}
	return inRecovery, commit, standbys
}

// TestReplicationModes: the gateways' multi-host URL leads to the
// primary; it commits with synchronous_commit on in every mode, with a
// streaming standby that is synchronous for sync and asynchronous for
// async, and none for none; the primary's CPU is read.
func TestReplicationModes(t *testing.T) {
	t.Parallel()
	cases := []struct {
		mode     string
		standbys []string
	}{
		{bench.ReplicationSync, []string{"standby streaming sync"}},
		{bench.ReplicationAsync, []string{"standby streaming async"}},
		{bench.ReplicationNone, nil},
	}
	for _, c := range cases {
		t.Run(c.mode, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
			defer cancel()
			e := startTestPostgres(ctx, t, c.mode)
			inRecovery, commit, standbys := replicationState(ctx, t, e.PGURL)
			if inRecovery || commit != "on" || !slices.Equal(standbys, c.standbys) {
				t.Errorf("through %s: standby %v, synchronous_commit %q, pg_stat_replication %q; want the primary, on, %q",
					e.PGURL, inRecovery, commit, standbys, c.standbys)
			}
			primary, _, ok := e.ReplicationCPU()
			if !ok || primary <= 0 {
				t.Errorf("ReplicationCPU: primary %v s, ok %v; want the primary's CPU read", primary, ok)
			}
		})
	}
}
