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

// applyRoutines makes schema queen's routines exactly the embedded ones,
// when the checksum recorded in queen.routines differs: in one
// transaction it drops every routine of the schema and creates each file's
// (so a changed signature needs no hand-written DROP, and a routine whose
// file is gone goes too), then records the checksum. Other sessions see
// the old set or the new one, never a mix. The caller holds the migration
// lock. Routines change with a release: a gateway of the previous release
// still running may then fail calls whose signature changed (answered
// failed; a retry on a current gateway is exact).
func applyRoutines(ctx context.Context, conn *pgx.Conn) error {
	rs, err := Routines()
	if err != nil {
		return err
	}
	want := routinesChecksum(rs)
	var have string
	err = conn.QueryRow(ctx, "SELECT checksum FROM queen.routines").Scan(&have)
	if err != nil && !errors.Is(err, pgx.ErrNoRows) {
		return fmt.Errorf("pgstore: read routines checksum: %w", err)
	}
	if have == want {
		return nil
	}
	err = pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
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
		_, err := tx.Exec(ctx, "INSERT INTO queen.routines (checksum) VALUES ($1)", want)
		return err
	})
	if err != nil {
		return fmt.Errorf("pgstore: apply routines: %w", err)
	}
	return nil
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
