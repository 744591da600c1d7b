// Command queengate is the exactly-once ingestion gateway daemon: NATS in
// front, PostgreSQL behind. Configuration comes from flags, each with a
// QUEEN_* environment equivalent (the flag wins); see --help.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"github.com/rs/zerolog"

	"github.com/queengate/queengate/internal/pgadmin"
	"github.com/queengate/queengate/internal/pgcluster"
	"github.com/queengate/queengate/server"
)

// stopSignals restores default signal handling; main sets it.
var stopSignals = func() {}

// version is set at build time with -ldflags "-X main.version=…" (semver).
var version = "0.1.0-dev"

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	stopSignals = stop
	defer stop()
	if err := run(ctx, os.Args[1:], os.Stdout, os.Stderr); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return
		}
		fmt.Fprintln(os.Stderr, "queengate:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	cfg, err := parseConfig(args, stderr)
	if err != nil {
		return err
	}
	if cfg.ShowVersion {
		fmt.Fprintln(stdout, "queengate", version)
		return nil
	}
	log, err := newLogger(stderr, cfg.LogLevel)
	if err != nil {
		return err
	}
	setMemoryLimit(cfg, os.Getenv("GOMEMLIMIT"), log)
	scfg := cfg.server(log)
	if scfg.PGURL == "" {
		cluster, url, err := startLocalPG(ctx, cfg.LocalPGDir)
		if err != nil {
			return err
		}
		defer cluster.Stop()
		log.Info().Str("dir", cluster.Dir()).Str("url", url).Msg("local PostgreSQL started")
		scfg.PGURL = url
	}
	srv, err := server.Start(ctx, scfg)
	if err != nil {
		if ctx.Err() != nil {
			return nil // stopped before it could serve
		}
		return err
	}
	<-ctx.Done()
	// A second signal now ends the process at once.
	stopSignals()
	log.Info().Msg("shutting down: refusing new requests, answering everything accepted")
	start := time.Now()
	_ = srv.Stop(context.Background()) // the gateway's answers are flushed to NATS before it returns
	log.Info().Dur("took_ms", time.Since(start)).Msg("stopped")
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
	if err := pgadmin.EnsureDatabase(startCtx, cluster.URL("postgres"), "queengate"); err != nil {
		cluster.Stop()
		return nil, "", err
	}
	return cluster, cluster.URL("queengate"), nil
}

// newLogger logs JSON, or human-readable lines when w is a terminal.
func newLogger(w io.Writer, level string) (zerolog.Logger, error) {
	lvl, err := zerolog.ParseLevel(level)
	if err != nil {
		return zerolog.Logger{}, fmt.Errorf("log level %q: %w", level, err)
	}
	zerolog.TimeFieldFormat = time.RFC3339Nano
	if f, ok := w.(*os.File); ok {
		if fi, err := f.Stat(); err == nil && fi.Mode()&os.ModeCharDevice != 0 {
			w = zerolog.ConsoleWriter{Out: f, TimeFormat: time.TimeOnly}
		}
	}
	return zerolog.New(w).Level(lvl).With().Timestamp().Logger(), nil
}
