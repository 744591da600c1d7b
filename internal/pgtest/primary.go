package pgtest

import (
	"context"
	"os"
	"testing"

	"github.com/queengate/queengate/internal/pgcluster"
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
