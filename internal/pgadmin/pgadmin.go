// Package pgadmin creates and drops whole databases on a PostgreSQL
// server, given a URL with the right to: the local development cluster's
// database (cmd/queengate), the throwaway databases of queengatetest and
// internal/pgtest, and queenbench's --self database.
package pgadmin

import (
	"context"
	"fmt"
	"net/url"

	"github.com/jackc/pgx/v5"
)

// EnsureDatabase creates database name unless it exists.
func EnsureDatabase(ctx context.Context, adminURL, name string) error {
	conn, err := pgx.Connect(ctx, adminURL)
	if err != nil {
		return err
	}
	defer conn.Close(ctx)
	var exists bool
	if err := conn.QueryRow(ctx, "SELECT EXISTS (SELECT 1 FROM pg_database WHERE datname = $1)", name).Scan(&exists); err != nil {
		return err
	}
	if !exists {
		_, err = conn.Exec(ctx, createSQL(name, ""))
	}
	return err
}

// CreateDatabase creates database name, a copy of database template unless
// template is empty; it fails if name exists.
func CreateDatabase(ctx context.Context, adminURL, name, template string) error {
	conn, err := pgx.Connect(ctx, adminURL)
	if err != nil {
		return err
	}
	defer conn.Close(ctx)
	_, err = conn.Exec(ctx, createSQL(name, template))
	return err
}

func createSQL(name, template string) string {
	sql := "CREATE DATABASE " + pgx.Identifier{name}.Sanitize()
	if template != "" {
		sql += " TEMPLATE " + pgx.Identifier{template}.Sanitize()
	}
	return sql
}

// DropDatabase drops database name, cutting its open connections.
func DropDatabase(ctx context.Context, adminURL, name string) error {
	conn, err := pgx.Connect(ctx, adminURL)
	if err != nil {
		return err
	}
	defer conn.Close(ctx)
	_, err = conn.Exec(ctx, "DROP DATABASE IF EXISTS "+pgx.Identifier{name}.Sanitize()+" WITH (FORCE)")
	return err
}

// DatabaseURL is adminURL (postgres://…) naming database name instead;
// its user, host and parameters are kept.
func DatabaseURL(adminURL, name string) (string, error) {
	u, err := url.Parse(adminURL)
	if err != nil || (u.Scheme != "postgres" && u.Scheme != "postgresql") {
		return "", fmt.Errorf("pgadmin: %q is not a postgres:// URL", redacted(adminURL, u))
	}
	u.Path = "/" + name
	return u.String(), nil
}

func redacted(raw string, u *url.URL) string {
	if u == nil {
		return "(unparsable)"
	}
	return u.Redacted()
}
