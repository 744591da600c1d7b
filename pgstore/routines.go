package pgstore

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"sort"

	"github.com/jackc/pgx/v5"
)

// Routine is one function or procedure of schema queen, from its file in
// routines/: tables live in the numbered migrations, routines in one file
// each, so today's text of every routine is read in one place.
type Routine struct {
	Name string
	SQL  string
}

// Routines lists the embedded routines by file name.
func Routines() ([]Routine, error) {
	entries, err := fs.ReadDir(migrationFS, "routines")
	if err != nil {
		return nil, err
	}
	var out []Routine
	for _, e := range entries {
		sql, err := migrationFS.ReadFile("routines/" + e.Name())
		if err != nil {
			return nil, err
		}
		out = append(out, Routine{Name: e.Name(), SQL: string(sql)})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

// routinesChecksum identifies the text of all routines together.
func routinesChecksum(rs []Routine) string {
	h := sha256.New()
	for _, r := range rs {
		fmt.Fprintf(h, "%s\x00%s\x00", r.Name, r.SQL)
	}
	return hex.EncodeToString(h.Sum(nil))
}

// RoutinesVersion numbers this build's routine set. Bump it whenever any
// file under routines/ changes: a build installs its routines only over a
// lower version recorded in queen.routines and refuses to start over a
// higher one, so a gateway of an older release restarting in the middle
// of a rolling upgrade cannot put its routines back under the newer ones.
// TestRoutinesVersion fails when the files changed and this did not;
// `go test ./pgstore -run TestRoutinesVersion -update` bumps it and
// records the new set in testdata/routines.sum.
const RoutinesVersion = 16

// applyRoutines makes schema queen's routines the embedded ones when the
// version recorded in queen.routines is lower than RoutinesVersion (or
// none is recorded): in one transaction it drops every routine of the
// schema and creates each file's (so a changed signature needs no
// hand-written DROP, and a routine whose file is gone goes too), then
// records the version and checksum. Other sessions see the old set or
// the new one, never a mix. The caller holds the migration lock. A higher
// recorded version is refused, like a newer schema; so is the same
// version with other text: installing it would let two builds replace
// each other's routines at every restart, which versions exist to stop.
// A gateway of the previous release still running may fail calls whose
// signature changed (answered failed; a retry on a current gateway is
// exact).
func applyRoutines(ctx context.Context, conn *pgx.Conn) error {
	rs, err := Routines()
	if err != nil {
		return err
	}
	want := routinesChecksum(rs)
	var (
		haveVersion int
		have        string
	)
	err = conn.QueryRow(ctx, "SELECT version, checksum FROM queen.routines").Scan(&haveVersion, &have)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
	case err != nil:
		return fmt.Errorf("pgstore: read routines version: %w", err)
	case haveVersion > RoutinesVersion:
		return fmt.Errorf("pgstore: the database's routines are at version %d, newer than this build's %d: run a newer queengate",
			haveVersion, RoutinesVersion)
	case haveVersion == RoutinesVersion && have == want:
		return nil
	case haveVersion == RoutinesVersion:
		return fmt.Errorf("pgstore: the database's routines at version %d have other text (checksum %.12s, this build has %.12s): "+
			"a routine changed without a new version; run the build that installed them, or bump RoutinesVersion in pgstore/routines.go "+
			"(go test ./pgstore -run TestRoutinesVersion -update)", haveVersion, have, want)
	}
	if err := installRoutines(ctx, conn, rs, want); err != nil {
		return fmt.Errorf("pgstore: apply routines: %w", err)
	}
	return nil
}

// installRoutines replaces every routine of schema queen by rs and
// records RoutinesVersion with checksum, in one transaction.
func installRoutines(ctx context.Context, conn *pgx.Conn, rs []Routine, checksum string) error {
	return pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
		// Routines may name each other in any order: bodies are checked
		// when called, as pg_dump restores them.
		if _, err := tx.Exec(ctx, "SET LOCAL check_function_bodies = off"); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, dropRoutinesSQL); err != nil {
			return fmt.Errorf("drop routines: %w", err)
		}
		for _, r := range rs {
			if _, err := tx.Exec(ctx, r.SQL); err != nil {
				return fmt.Errorf("routine %s: %w", r.Name, err)
			}
		}
		if _, err := tx.Exec(ctx, "DELETE FROM queen.routines"); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, "INSERT INTO queen.routines (version, checksum) VALUES ($1, $2)", RoutinesVersion, checksum)
		return err
	})
}

// dropRoutinesSQL drops every function and procedure of schema queen but
// trigger functions, which their files replace in place.
const dropRoutinesSQL = `
DO $$
DECLARE r record;
BEGIN
    FOR r IN SELECT p.oid::regprocedure AS sig, p.prokind FROM pg_proc p
              WHERE p.pronamespace = 'queen'::regnamespace
                -- a trigger's function stays: its trigger depends on it,
                -- and its file replaces it in place
                AND p.prorettype <> 'trigger'::regtype
    LOOP
        EXECUTE format('DROP %s %s', CASE r.prokind WHEN 'p' THEN 'PROCEDURE' ELSE 'FUNCTION' END, r.sig);
    END LOOP;
END
$$`
