package pgstore_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/queengate/queengate/internal/pgtest"
	"github.com/queengate/queengate/pgstore"
)

// routinesState is what a database holds of its routine set: the row of
// queen.routines, the routines' oids (new ones after every install) and
// whether log_unnest_hashes still has the files' body.
type routinesState struct {
	version  int
	checksum string
	oids     string
	filesSet bool
}

func readRoutinesState(t *testing.T, ctx context.Context, conn *pgx.Conn) routinesState {
	t.Helper()
	var s routinesState
	if err := conn.QueryRow(ctx, "SELECT version, checksum FROM queen.routines").Scan(&s.version, &s.checksum); err != nil {
		t.Fatal(err)
	}
	if err := conn.QueryRow(ctx,
		"SELECT string_agg(oid::text, ',' ORDER BY oid) FROM pg_proc WHERE pronamespace = 'queen'::regnamespace").Scan(&s.oids); err != nil {
		t.Fatal(err)
	}
	var n int
	if err := conn.QueryRow(ctx, "SELECT count(*) FROM queen.log_unnest_hashes(ARRAY[gen_random_uuid(), gen_random_uuid()])").Scan(&n); err != nil {
		t.Fatal(err)
	}
	s.filesSet = n == 2
	return s
}

// connectNewDB connects to a database of its own, migrated.
func connectNewDB(t *testing.T, ctx context.Context) *pgx.Conn {
	t.Helper()
	conn, err := pgx.Connect(ctx, pgtest.NewDB(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close(ctx) })
	return conn
}

// wantOwnRoutines fails t unless s is this build's routine set.
func wantOwnRoutines(t *testing.T, s routinesState, when string) {
	t.Helper()
	if s.version != pgstore.RoutinesVersion || s.checksum != pgstore.RoutinesChecksum() || !s.filesSet {
		t.Errorf("%s the database records routines %d %.12s (the files' body: %v), want this build's %d %.12s",
			when, s.version, s.checksum, s.filesSet, pgstore.RoutinesVersion, pgstore.RoutinesChecksum())
	}
}

// otherRoutineSet stands for another build's routines: one body edited
// and the row it would have recorded.
func otherRoutineSet(t *testing.T, ctx context.Context, conn *pgx.Conn, version int, checksum string) routinesState {
	t.Helper()
	if _, err := conn.Exec(ctx, `
		CREATE OR REPLACE FUNCTION queen.log_unnest_hashes(hashes uuid[]) RETURNS TABLE (idx integer, h uuid)
		    LANGUAGE sql AS 'SELECT 0, NULL::uuid'`); err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Exec(ctx, "UPDATE queen.routines SET version = $1, checksum = $2", version, checksum); err != nil {
		t.Fatal(err)
	}
	return readRoutinesState(t, ctx, conn)
}

// TestRoutinesVersionOnlyMovesForward: a build installs its routines over
// a lower version only. Over a higher one (a newer gateway's, which an
// older gateway restarting in the middle of a rolling upgrade meets) or
// the same version with other text it refuses, as over a newer schema,
// and leaves the database's set as it was; over its own set it does
// nothing.
func TestRoutinesVersionOnlyMovesForward(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	conn := connectNewDB(t, ctx)
	own := readRoutinesState(t, ctx, conn)
	wantOwnRoutines(t, own, "migrated,")
	if _, err := pgstore.Migrate(ctx, conn); err != nil {
		t.Fatal(err)
	}
	if got := readRoutinesState(t, ctx, conn); got != own {
		t.Errorf("Migrate over its own routine set changed it: %+v, was %+v", got, own)
	}

	for _, c := range []struct {
		what     string
		version  int
		checksum string
		refusal  string
	}{
		{"a newer build's set", pgstore.RoutinesVersion + 1, "newer build",
			fmt.Sprintf("routines are at version %d, newer than this build's %d: run a newer queengate",
				pgstore.RoutinesVersion+1, pgstore.RoutinesVersion)},
		{"the same version with other text", pgstore.RoutinesVersion, "edited",
			"a routine changed without a new version; run the build that installed them, or bump RoutinesVersion"},
	} {
		before := otherRoutineSet(t, ctx, conn, c.version, c.checksum)
		if _, err := pgstore.Migrate(ctx, conn); err == nil || !strings.Contains(err.Error(), c.refusal) {
			t.Errorf("Migrate over %s: err = %v, want %q", c.what, err, c.refusal)
		}
		if got := readRoutinesState(t, ctx, conn); got != before {
			t.Errorf("Migrate over %s changed it: %+v, was %+v", c.what, got, before)
		}
	}

	otherRoutineSet(t, ctx, conn, pgstore.RoutinesVersion-1, "older build")
	if _, err := pgstore.Migrate(ctx, conn); err != nil {
		t.Fatalf("Migrate over an older build's set: %v", err)
	}
	wantOwnRoutines(t, readRoutinesState(t, ctx, conn), "after Migrate over an older build's set,")
}

// TestRoutinesBeforeVersionsAreReplaced: a database whose routines a
// build before migration 016 installed (no version recorded) takes this
// build's.
func TestRoutinesBeforeVersionsAreReplaced(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	conn := connectNewDB(t, ctx)
	const routinesVersionMigration = 16
	if _, err := conn.Exec(ctx, `
		ALTER TABLE queen.routines DROP COLUMN version;
		UPDATE queen.routines SET checksum = 'previous release'`); err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Exec(ctx, "DELETE FROM queen.migrations WHERE version = $1", routinesVersionMigration); err != nil {
		t.Fatal(err)
	}
	applied, err := pgstore.Migrate(ctx, conn)
	if err != nil || len(applied) != 1 || applied[0] != routinesVersionMigration {
		t.Fatalf("Migrate applied %v, %v; want [%d]", applied, err, routinesVersionMigration)
	}
	wantOwnRoutines(t, readRoutinesState(t, ctx, conn), "after Migrate,")
}
