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

// TestCreateFromTemplate: CreateDatabase copies its template's tables, and
// refuses a name that exists.
func TestCreateFromTemplate(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	admin := pgtest.SharedURL(t)
	template, copied := "pgadmin_t_"+pgtest.UniqueName(t), "pgadmin_c_"+pgtest.UniqueName(t)
	t.Cleanup(func() {
		for _, name := range []string{copied, template} {
			if err := pgadmin.DropDatabase(ctx, admin, name); err != nil {
				t.Error(err)
			}
		}
	})
	if err := pgadmin.CreateDatabase(ctx, admin, template, ""); err != nil {
		t.Fatal(err)
	}
	templateURL, err := pgadmin.DatabaseURL(admin, template)
	if err != nil {
		t.Fatal(err)
	}
	conn, err := pgx.Connect(ctx, templateURL)
	if err != nil {
		t.Fatal(err)
	}
	_, err = conn.Exec(ctx, "CREATE TABLE marker (n int)")
	conn.Close(ctx) // a template must have no connections to be copied
	if err != nil {
		t.Fatal(err)
	}
	if err := pgadmin.CreateDatabase(ctx, admin, copied, template); err != nil {
		t.Fatal(err)
	}
	copiedURL, err := pgadmin.DatabaseURL(admin, copied)
	if err != nil {
		t.Fatal(err)
	}
	conn, err = pgx.Connect(ctx, copiedURL)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, "SELECT n FROM marker"); err != nil {
		t.Errorf("the copy lacks its template's table: %v", err)
	}
	if err := pgadmin.CreateDatabase(ctx, admin, copied, ""); err == nil {
		t.Errorf("CreateDatabase of an existing database %s succeeded", copied)
	}
}
