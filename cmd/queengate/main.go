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

// version is set at build time with -ldflags "-X main.version=…" (semver).
var version = "0.1.0-dev"

func main() {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	watchSignals(cancel)
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
	log.Info().Msg("shutting down: refusing new requests, answering everything accepted")
	start := time.Now()
	_ = srv.Stop(context.Background()) // the gateway's answers are flushed to NATS before it returns
	log.Info().Dur("took_ms", time.Since(start)).Msg("stopped")
	return nil
}

// repeatWindow is how soon after the first a signal is a copy of it: a
// terminal's Ctrl-C reaches both the gateway and `go tool task`, which
// passes it on, and a supervisor may signal every process of the group.
const repeatWindow = time.Second

// watchSignals calls stop on the first SIGINT or SIGTERM; a signal past
// repeatWindow after it ends the process at once (the default action).
func watchSignals(stop func()) {
	ch := make(chan os.Signal, 8)
	signal.Notify(ch, os.Interrupt, syscall.SIGTERM)
	go func() {
		<-ch
		stop()
		first := time.Now()
		for sig := range ch {
			if time.Since(first) > repeatWindow {
				signal.Reset()
				_ = syscall.Kill(os.Getpid(), sig.(syscall.Signal))
			}
		}
	}()
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
	var inUse *pgcluster.InUseError
	if errors.As(err, &inUse) {
		return nil, "", fmt.Errorf("local PostgreSQL: %s is in use by another gateway (its PostgreSQL runs, pid %d): "+
			"stop that gateway, or give this one a folder of its own (QUEEN_LOCAL_PG_DIR) or a server (QUEEN_PG_URL)", dir, inUse.PID)
	}
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
