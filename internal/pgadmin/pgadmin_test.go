package pgadmin_test

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/queengate/queengate/internal/pgadmin"
	"github.com/queengate/queengate/internal/pgtest"
)

func TestMain(m *testing.M) { pgtest.Run(m) }

func TestDatabaseURLKeepsUserHostAndParameters(t *testing.T) {
	t.Parallel()
	got, err := pgadmin.DatabaseURL("postgres://me:pw@db.example:5433/postgres?sslmode=disable&pool_max_conns=8", "other")
	if err != nil {
		t.Fatal(err)
	}
	if want := "postgres://me:pw@db.example:5433/other?sslmode=disable&pool_max_conns=8"; got != want {
		t.Errorf("DatabaseURL = %s, want %s", got, want)
	}
	if _, err := pgadmin.DatabaseURL("host=db user=me", "other"); err == nil {
		t.Error("a keyword/value string was taken for a URL")
	}
}

// TestEnsureThenDrop: EnsureDatabase creates a database once and is
// content the second time; DropDatabase removes it with a connection
// still open.
func TestEnsureThenDrop(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	admin := pgtest.SharedURL(t)
	name := "pgadmin_" + pgtest.UniqueName(t)
	for range 2 {
		if err := pgadmin.EnsureDatabase(ctx, admin, name); err != nil {
			t.Fatal(err)
		}
	}
	url, err := pgadmin.DatabaseURL(admin, name)
	if err != nil {
		t.Fatal(err)
	}
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatalf("connect to the new database: %v", err)
	}
	defer conn.Close(ctx)
	if err := pgadmin.DropDatabase(ctx, admin, name); err != nil {
		t.Fatal(err)
	}
	adminConn, err := pgx.Connect(ctx, admin)
	if err != nil {
		t.Fatal(err)
	}
	defer adminConn.Close(ctx)
	var exists bool
	if err := adminConn.QueryRow(ctx, "SELECT EXISTS (SELECT 1 FROM pg_database WHERE datname = $1)", name).Scan(&exists); err != nil {
		t.Fatal(err)
	}
	if exists {
		t.Errorf("database %s is still there after DropDatabase", name)
	}
}
