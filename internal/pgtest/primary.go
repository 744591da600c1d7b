package pgtest

import (
	"context"
	"os"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/queengate/queengate/internal/pgcluster"
	"github.com/queengate/queengate/pgstore"
)

// ServerDir is a folder for one PostgreSQL server, removed when the test
// ends. Not t.TempDir: its parent is private to root, and the server may
// run as the postgres user.
func ServerDir(tb testing.TB) string {
	tb.Helper()
	dir, err := os.MkdirTemp("", "queengate-pgserver-")
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { _ = os.RemoveAll(dir) })
	return dir
}

// DurablePrimary starts a primary standbys can stream from
// ([pgcluster.StartPrimary]), named name, with fsync and
// synchronous_commit as PostgreSQL ships them (on: durability is what
// its tests look at) and small buffers; it is stopped when the test
// ends.
func DurablePrimary(ctx context.Context, tb testing.TB, name string) *pgcluster.Cluster {
	tb.Helper()
	c, err := pgcluster.StartPrimary(ctx, pgcluster.Options{Dir: ServerDir(tb), Name: name,
		Settings: map[string]string{"max_connections": "60", "shared_buffers": "16MB"}})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(c.Stop)
	return c
}

// MigratedPair starts a primary ([pgcluster.StartPrimary]) with settings,
// migrates its postgres database, and streams an asynchronous hot standby
// of it named standbyName; both are stopped when the test ends.
func MigratedPair(ctx context.Context, tb testing.TB, settings map[string]string, standbyName string) (primary, standby *pgcluster.Cluster) {
	tb.Helper()
	primary, err := pgcluster.StartPrimary(ctx, pgcluster.Options{Dir: ServerDir(tb), Name: "primary", Settings: settings})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(primary.Stop)
	conn, err := pgx.Connect(ctx, primary.URL("postgres"))
	if err != nil {
		tb.Fatal(err)
	}
	defer conn.Close(ctx)
	if _, err := pgstore.Migrate(ctx, conn); err != nil {
		tb.Fatal(err)
	}
	standby, err = pgcluster.StartStandby(ctx, primary, pgcluster.StandbyOptions{Dir: ServerDir(tb), Name: standbyName})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(standby.Stop)
	return primary, standby
}
