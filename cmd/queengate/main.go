// Command queengate is the exactly-once ingestion gateway daemon.
//
// Until the NATS gateway lands it connects to PostgreSQL, applies the
// schema migrations and reports the schema version, then exits.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/rs/zerolog"

	"github.com/queengate/queengate/internal/pgcluster"
	"github.com/queengate/queengate/pgstore"
)

// version is set at build time with -ldflags "-X main.version=…".
var version = "dev"

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "queengate:", err)
		os.Exit(1)
	}
}

type config struct {
	// PGURL is the PostgreSQL URL (QUEEN_PG_URL). Empty: use LocalPGDir.
	PGURL string
	// LocalPGDir (QUEEN_LOCAL_PG_DIR), development only: when PGURL is
	// empty, start a PostgreSQL cluster kept in this folder.
	LocalPGDir string
	// ShowVersion prints the version and exits.
	ShowVersion bool
}

func envOr(name, def string) string {
	if v, ok := os.LookupEnv(name); ok {
		return v
	}
	return def
}

func parseConfig(args []string) (config, error) {
	var cfg config
	fs := flag.NewFlagSet("queengate", flag.ContinueOnError)
	fs.StringVar(&cfg.PGURL, "pg-url", envOr("QUEEN_PG_URL", ""), "PostgreSQL URL (env QUEEN_PG_URL)")
	fs.StringVar(&cfg.LocalPGDir, "local-pg-dir", envOr("QUEEN_LOCAL_PG_DIR", ""),
		"development only: when the PostgreSQL URL is empty, run a local cluster kept in this folder (env QUEEN_LOCAL_PG_DIR)")
	fs.BoolVar(&cfg.ShowVersion, "version", false, "print the version and exit")
	if err := fs.Parse(args); err != nil {
		return cfg, err
	}
	if cfg.PGURL == "" && cfg.LocalPGDir == "" && !cfg.ShowVersion {
		return cfg, errors.New("set QUEEN_PG_URL (or --pg-url), or QUEEN_LOCAL_PG_DIR for a local development cluster")
	}
	return cfg, nil
}

func run(args []string) error {
	cfg, err := parseConfig(args)
	if err != nil {
		return err
	}
	if cfg.ShowVersion {
		fmt.Println("queengate", version)
		return nil
	}
	log := newLogger()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	pgURL := cfg.PGURL
	if pgURL == "" {
		cluster, url, err := startLocalPG(ctx, cfg.LocalPGDir)
		if err != nil {
			return err
		}
		defer cluster.Stop()
		log.Info().Str("dir", cluster.Dir()).Str("url", url).Msg("local PostgreSQL started")
		pgURL = url
	}

	store, err := pgstore.Open(ctx, pgURL)
	if err != nil {
		return err
	}
	defer store.Close()
	applied, err := store.Migrate(ctx)
	if err != nil {
		return err
	}
	v, err := store.SchemaVersion(ctx)
	if err != nil {
		return err
	}
	log.Info().Ints("applied", applied).Int("schema_version", v).Msg("schema migrated")
	log.Warn().Msg("the NATS gateway is not built yet: nothing is served, exiting")
	return nil
}

// startLocalPG starts (initialising on first use) the development cluster
// and makes sure its "queengate" database exists.
func startLocalPG(ctx context.Context, dir string) (*pgcluster.Cluster, string, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, "", err
	}
	startCtx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	cluster, err := pgcluster.Start(startCtx, pgcluster.Options{Dir: abs})
	if err != nil {
		return nil, "", err
	}
	conn, err := pgx.Connect(startCtx, cluster.URL("postgres"))
	if err != nil {
		cluster.Stop()
		return nil, "", err
	}
	defer conn.Close(startCtx)
	var exists bool
	if err := conn.QueryRow(startCtx, "SELECT EXISTS (SELECT 1 FROM pg_database WHERE datname = 'queengate')").Scan(&exists); err != nil {
		cluster.Stop()
		return nil, "", err
	}
	if !exists {
		if _, err := conn.Exec(startCtx, "CREATE DATABASE queengate"); err != nil {
			cluster.Stop()
			return nil, "", err
		}
	}
	return cluster, cluster.URL("queengate"), nil
}

// newLogger logs JSON, or human-readable lines when stderr is a terminal.
func newLogger() zerolog.Logger {
	zerolog.TimeFieldFormat = time.RFC3339Nano
	if fi, err := os.Stderr.Stat(); err == nil && fi.Mode()&os.ModeCharDevice != 0 {
		return zerolog.New(zerolog.ConsoleWriter{Out: os.Stderr, TimeFormat: time.TimeOnly}).With().Timestamp().Logger()
	}
	return zerolog.New(os.Stderr).With().Timestamp().Logger()
}
