package proc

import (
	"context"
	"os"
	"slices"
	"strings"
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
// async, and none for none; the gateways' read URL leads to the standby,
// and is empty without one; the primary's CPU is read.
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
			checkReadURL(ctx, t, e, c.standbys != nil)
			primary, _, ok := e.PostgresCPU()
			if !ok || primary <= 0 {
				t.Errorf("PostgresCPU: primary %v s, ok %v; want the primary's CPU read", primary, ok)
			}
		})
	}
}

// checkReadURL checks that e's read URL leads to a standby when there is
// one (withStandby), and that there is none otherwise.
func checkReadURL(ctx context.Context, t *testing.T, e *Self, withStandby bool) {
	t.Helper()
	if !withStandby {
		if e.ReadURL != "" {
			t.Errorf("read URL %q without a standby; want none", e.ReadURL)
		}
		return
	}
	if e.ReadURL == "" {
		t.Fatal("no read URL with a standby")
	}
	if inRecovery, _, _ := replicationState(ctx, t, e.ReadURL); !inRecovery {
		t.Errorf("through the read URL %s: the primary; want the standby", e.ReadURL)
	}
}

// TestGatewayEnvReadURL: a gateway of a fleet with a standby reads from it
// (QUEEN_PG_READ_URL is the read URL), and one without has no read URL.
func TestGatewayEnvReadURL(t *testing.T) {
	t.Parallel()
	readURL := "postgres://postgres@127.0.0.1:5433/bench?sslmode=disable&target_session_attrs=standby"
	for _, e := range []*Self{{PGURL: "postgres://p/bench", ReadURL: readURL, size: 1}, {PGURL: "postgres://p/bench", size: 1}} {
		env := e.gatewayEnv(6632)
		var got []string
		for _, kv := range env {
			if strings.HasPrefix(kv, "QUEEN_PG_READ_URL=") {
				got = append(got, kv)
			}
		}
		want := []string{}
		if e.ReadURL != "" {
			want = []string{"QUEEN_PG_READ_URL=" + readURL}
		}
		if !slices.Equal(got, want) || !slices.Contains(env, "QUEEN_PG_URL="+e.PGURL) {
			t.Errorf("read URL %q: gateway environment %q; want QUEEN_PG_URL and %q", e.ReadURL, env, want)
		}
	}
}
