package pgstore

import (
	"context"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"fmt"
	"io/fs"
	"regexp"
	"slices"
	"sort"
	"strconv"

	"github.com/jackc/pgx/v5"
)

//go:embed migrations/*.up.sql routines/*.sql
var migrationFS embed.FS

// migrationLockKey serializes migrations across gateways starting at once
// (pg_advisory_lock is held for the session that migrates).
const migrationLockKey = 0x717565656e676174 // "queengat"

// Migration is one numbered schema change.
type Migration struct {
	Version int
	Name    string
	SQL     string
}

// Checksum identifies the migration's text. Migrate refuses to run against
// a database where an applied migration's recorded checksum differs (and
// is not one of its supersededChecksums): the schema there is not what this
// binary expects.
func (m Migration) Checksum() string {
	sum := sha256.Sum256([]byte(m.SQL))
	return hex.EncodeToString(sum[:])
}

// supersededChecksums are earlier texts of migrations, applied somewhere
// before they changed in ways that leave the tables as they were: comments
// reworded, and the function definitions of 001-004 moved out to
// pgstore/routines/ (which replaces every routine whatever the migrations
// made).
var supersededChecksums = map[int][]string{
	1: {"1c8b8ef20bd125326313e778b7d02e6fe1aa1ad3609bc83366610006c8c941e5",
		"bcc69fcd6693b17f3245f371c51ec6f238af8acb1218928719e90ca2927ed4c1"},
	2: {"3d0b27b6284cb4be87ec2192b0393f58f02a7baa78f2f5bb8b3c437239d409ed",
		"d039921ede85db616d250f1dbdef9529481b90ccb74878f2d6853c1a65db14e1"},
	3: {"444e30fc18320c18d9b2b084a0857c396f168b901c955b0b15cb4c1ecf72e119"},
	4: {"cb9be02a86dacab57a3012d94e8bdfa303361bb276da1b80f096a48688d583cd",
		"65ae13df4f566c0aec37d0763b05c70810f0d1c2177e678d40da4d898d47a093"},
}

var migrationName = regexp.MustCompile(`^(\d{3})_([a-z0-9_]+)\.up\.sql$`)

// Migrations lists the embedded migrations in version order.
func Migrations() ([]Migration, error) {
	entries, err := fs.ReadDir(migrationFS, "migrations")
	if err != nil {
		return nil, err
	}
	var out []Migration
	for _, e := range entries {
		m := migrationName.FindStringSubmatch(e.Name())
		if m == nil {
			return nil, fmt.Errorf("pgstore: migration file %q is not named NNN_name.up.sql", e.Name())
		}
		v, _ := strconv.Atoi(m[1])
		sql, err := migrationFS.ReadFile("migrations/" + e.Name())
		if err != nil {
			return nil, err
		}
		out = append(out, Migration{Version: v, Name: m[2], SQL: string(sql)})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Version < out[j].Version })
	for i, m := range out {
		if m.Version != i+1 {
			return nil, fmt.Errorf("pgstore: migration versions must run 1, 2, 3, …; found %d at position %d", m.Version, i+1)
		}
	}
	return out, nil
}

// Migrate brings the schema up to date on conn: the numbered migrations
// (tables, indexes), then the routines (see applyRoutines). It is idempotent and safe to
// run from several processes at once: a session advisory lock serializes
// them, and each migration is applied and recorded in one transaction. It
// returns the versions it applied.
func Migrate(ctx context.Context, conn *pgx.Conn) (applied []int, err error) {
	return migrate(ctx, conn, LatestVersion(), true)
}

// migrate applies the numbered migrations up to version upto, each with
// its record, and then, withRoutines, the routines: all under the
// migration lock.
func migrate(ctx context.Context, conn *pgx.Conn, upto int, withRoutines bool) (applied []int, err error) {
	migrations, err := Migrations()
	if err != nil {
		return nil, err
	}
	if _, err := conn.Exec(ctx, "SELECT pg_advisory_lock($1)", int64(migrationLockKey)); err != nil {
		return nil, fmt.Errorf("pgstore: take migration lock: %w", err)
	}
	defer func() {
		// A failed unlock is harmless: the lock goes with the session.
		_, _ = conn.Exec(context.WithoutCancel(ctx), "SELECT pg_advisory_unlock($1)", int64(migrationLockKey))
	}()

	if _, err := conn.Exec(ctx, `
		CREATE SCHEMA IF NOT EXISTS queen;
		CREATE TABLE IF NOT EXISTS queen.migrations (
			version    integer PRIMARY KEY,
			name       text NOT NULL,
			checksum   text NOT NULL,
			applied_at timestamptz NOT NULL DEFAULT now()
		)`); err != nil {
		return nil, fmt.Errorf("pgstore: create migrations table: %w", err)
	}
	done := map[int]string{} // version -> checksum
	rows, err := conn.Query(ctx, "SELECT version, checksum FROM queen.migrations")
	if err != nil {
		return nil, fmt.Errorf("pgstore: read migrations: %w", err)
	}
	var (
		version  int32
		checksum string
	)
	if _, err := pgx.ForEachRow(rows, []any{&version, &checksum}, func() error {
		done[int(version)] = checksum
		return nil
	}); err != nil {
		return nil, fmt.Errorf("pgstore: read migrations: %w", err)
	}
	for v := range done {
		if v > len(migrations) {
			return nil, fmt.Errorf("pgstore: the database's schema is at version %d, newer than this build's %d: run a newer queengate", v, len(migrations))
		}
	}
	for _, m := range migrations[:min(upto, len(migrations))] {
		if sum, ok := done[m.Version]; ok {
			if sum != m.Checksum() && !slices.Contains(supersededChecksums[m.Version], sum) {
				return nil, fmt.Errorf("pgstore: migration %03d_%s was applied with different text (checksum %.12s, this binary has %.12s): the database's schema is not the one this build expects",
					m.Version, m.Name, sum, m.Checksum())
			}
			continue
		}
		err := pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
			if _, err := tx.Exec(ctx, m.SQL); err != nil {
				return err
			}
			_, err := tx.Exec(ctx, "INSERT INTO queen.migrations (version, name, checksum) VALUES ($1, $2, $3)",
				m.Version, m.Name, m.Checksum())
			return err
		})
		if err != nil {
			return applied, fmt.Errorf("pgstore: migration %03d_%s: %w", m.Version, m.Name, err)
		}
		applied = append(applied, m.Version)
	}
	if withRoutines {
		if err := applyRoutines(ctx, conn); err != nil {
			return applied, err
		}
	}
	return applied, nil
}

// SchemaVersion is the highest applied migration, 0 when none is.
func SchemaVersion(ctx context.Context, conn *pgx.Conn) (int, error) {
	return schemaVersion(ctx, conn)
}

// LatestVersion is the version Migrate brings the schema to.
func LatestVersion() int {
	m, err := Migrations()
	if err != nil || len(m) == 0 {
		return 0
	}
	return m[len(m)-1].Version
}

type queryRower interface {
	QueryRow(context.Context, string, ...any) pgx.Row
}

func schemaVersion(ctx context.Context, q queryRower) (int, error) {
	var exists bool
	if err := q.QueryRow(ctx, "SELECT to_regclass('queen.migrations') IS NOT NULL").Scan(&exists); err != nil {
		return 0, err
	}
	if !exists {
		return 0, nil
	}
	var v int
	err := q.QueryRow(ctx, "SELECT coalesce(max(version), 0) FROM queen.migrations").Scan(&v)
	return v, err
}
