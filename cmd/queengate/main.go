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
	"runtime"
	"runtime/debug"
	"strings"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nkeys"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/rs/zerolog"

	"github.com/queengate/queengate/dedup"
	"github.com/queengate/queengate/gateway"
	"github.com/queengate/queengate/ingest"
	"github.com/queengate/queengate/internal/pgcluster"
	"github.com/queengate/queengate/pgstore"
	"github.com/queengate/queengate/timers"
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
	if n := store.Pool().Config().MaxConns; n < 4 {
		return fmt.Errorf("pg-url: pool_max_conns=%d is too few: at least 4 (pushes, the timers' LISTEN, fires, retention)", n)
	}
	if err := migrate(ctx, store, log); err != nil {
		return err
	}

	natsURL := cfg.NATSURL
	var embedded *server.Server
	if natsURL == "" {
		ecfg := gateway.EmbeddedNATS{Host: cfg.NATSHost, Port: cfg.NATSPort,
			User: cfg.NATSUser, Password: cfg.NATSPassword, Token: cfg.NATSToken,
			TLSCert: cfg.NATSServerTLSCert, TLSKey: cfg.NATSServerTLSKey, TLSClientCA: cfg.NATSServerTLSClientCA}
		if cfg.RoutingShards > 0 {
			ecfg.Mappings = gateway.ShardMappings(cfg.Prefix, cfg.RoutingShards)
		}
		if cfg.NATSNKey != "" {
			if ecfg.NKey, err = nkeyPublic(cfg.NATSNKey); err != nil {
				return err
			}
		}
		embedded, err = gateway.StartEmbeddedNATS(ecfg)
		if err != nil {
			return err
		}
		defer embedded.Shutdown()
		natsURL = embedded.ClientURL()
		if cfg.NATSServerTLSCert != "" {
			natsURL = strings.Replace(natsURL, "nats://", "tls://", 1)
		}
		log.Info().Str("url", natsURL).Msg("embedded NATS server started")
	}
	nc, err := connectNATS(natsURL, cfg, log)
	if err != nil {
		return err
	}
	defer nc.Close()

	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		buildInfo(), store.Collector(), gateway.NewNATSCollector(nc))
	ing, err := ingest.New(store, ingest.Config{
		Shards: cfg.Shards, FlushSize: cfg.FlushSize, Linger: cfg.Linger, MaxBuffered: cfg.MaxBuffered,
		Cache:   dedup.Config{BudgetBytes: int64(cfg.DedupCacheMB) << 20},
		NoCache: cfg.DedupCacheMB == 0,
	}, log.With().Str("component", "ingest").Logger(), reg)
	if err != nil {
		return err
	}
	if err := ing.Start(ctx); err != nil {
		return err
	}
	defer ing.Stop()
	ops := gateway.NewOps(gateway.OpsConfig{Token: cfg.AdminToken, Version: version, WantSchema: pgstore.LatestVersion()},
		store, ing, nc)
	tsvc, err := timers.New(store, timers.Config{NoFire: cfg.NoTimerFire, OnFired: func(fired []pgstore.FiredTimer) {
		learnFires(ing, fired)
	}}, log.With().Str("component", "timers").Logger(), reg)
	if err != nil {
		return err
	}
	if err := tsvc.Start(ctx); err != nil {
		return err
	}
	defer tsvc.Stop()
	timerOps := gateway.NewTimerOps(tsvc, ops)
	gcfg := gateway.Config{Prefix: cfg.Prefix, MaxBatch: cfg.MaxBatch, Version: version, Ops: ops, Timers: timerOps}
	if cfg.RoutingShards > 0 {
		// A gateway that cannot reach PostgreSQL says so in its
		// heartbeats, and the ready ones take its shards.
		pgWatch := gateway.NewStoreWatch(store, time.Second)
		if err := pgWatch.Start(ctx); err != nil {
			return err
		}
		defer pgWatch.Stop()
		gcfg.Routing = &gateway.RoutingConfig{Shards: cfg.RoutingShards, Ready: pgWatch.Up}
	}
	gw, err := gateway.New(gcfg, nc, ing, log.With().Str("component", "gateway").Logger(), reg)
	if err != nil {
		return err
	}
	if cfg.RetentionInterval > 0 {
		ropts := pgstore.DefaultRetainOptions()
		ropts.Slack = cfg.RetentionSlack
		retention, err := gateway.NewRetention(store, cfg.RetentionInterval, ropts,
			log.With().Str("component", "retention").Logger(), reg)
		if err != nil {
			return err
		}
		if err := retention.Start(ctx); err != nil {
			return err
		}
		defer retention.Stop()
	}
	admin := gateway.NewAdmin(cfg.HTTPAddr, store, pgstore.LatestVersion(), nc, reg, log.With().Str("component", "admin").Logger())
	admin.Mount(ops)
	admin.MountTimers(timerOps)
	admin.AddReadiness("gateway", gw.Serving)
	if err := admin.Start(ctx); err != nil {
		return fmt.Errorf("admin http on %s: %w", cfg.HTTPAddr, err)
	}
	defer admin.Stop()
	if err := gw.Start(ctx); err != nil {
		return err
	}
	defer gw.Stop()
	log.Info().Str("version", version).Str("nats", natsURL).Str("prefix", cfg.Prefix).
		Str("http", admin.Addr()).Msg("queengate serving")

	<-ctx.Done()
	// A second signal now ends the process at once.
	stopSignals()
	log.Info().Msg("shutting down: refusing new requests, answering everything accepted")
	start := time.Now()
	gw.Stop() // answers are flushed to NATS before it returns
	log.Info().Dur("took_ms", time.Since(start)).Msg("stopped")
	return nil
}

func migrate(ctx context.Context, store *pgstore.Store, log zerolog.Logger) error {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	applied, err := store.Migrate(ctx)
	if err != nil {
		return err
	}
	log.Info().Ints("applied", applied).Int("schema_version", pgstore.LatestVersion()).Msg("schema migrated")
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
	if err := ensureDatabase(startCtx, cluster.URL("postgres"), "queengate"); err != nil {
		cluster.Stop()
		return nil, "", err
	}
	return cluster, cluster.URL("queengate"), nil
}

func ensureDatabase(ctx context.Context, adminURL, name string) error {
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
		_, err = conn.Exec(ctx, "CREATE DATABASE "+pgx.Identifier{name}.Sanitize())
	}
	return err
}

// learnFires tells the dedup cache what a timer fire committed: runs of
// consecutive offsets per partition (fired comes in partition, offset
// order).
func learnFires(ing *ingest.Ingester, fired []pgstore.FiredTimer) {
	for i := 0; i < len(fired); {
		j := i + 1
		for j < len(fired) && fired[j].PartitionID == fired[i].PartitionID && fired[j].Offset == fired[j-1].Offset+1 {
			j++
		}
		ids := make([]string, 0, j-i)
		for _, f := range fired[i:j] {
			ids = append(ids, f.TxnID)
		}
		ing.LearnCommitted(fired[i].PartitionID, fired[i].Offset, ids)
		i = j
	}
}

// buildInfo is the queengate_build_info gauge: 1, labelled with what was
// built.
func buildInfo() prometheus.Collector {
	revision := "unknown"
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, s := range bi.Settings {
			if s.Key == "vcs.revision" {
				revision = s.Value
			}
		}
	}
	g := prometheus.NewGauge(prometheus.GaugeOpts{
		Name:        "queengate_build_info",
		Help:        "Always 1; the labels say which build is running.",
		ConstLabels: prometheus.Labels{"version": version, "revision": revision, "goversion": runtime.Version()},
	})
	g.Set(1)
	return g
}

// nkeyPublic reads a seed file and returns the public key the embedded
// server must accept.
func nkeyPublic(seedFile string) (string, error) {
	seed, err := os.ReadFile(seedFile)
	if err != nil {
		return "", fmt.Errorf("nkey seed: %w", err)
	}
	kp, err := nkeys.ParseDecoratedNKey(seed)
	if err != nil {
		return "", fmt.Errorf("nkey seed %s: %w", seedFile, err)
	}
	defer kp.Wipe()
	return kp.PublicKey()
}

func connectNATS(url string, cfg config, log zerolog.Logger) (*nats.Conn, error) {
	opts := []nats.Option{
		nats.Name("queengate " + version),
		nats.MaxReconnects(-1),
		nats.ReconnectWait(250 * time.Millisecond),
		// Answers published while the connection is away wait here and are
		// sent on reconnect.
		nats.ReconnectBufSize(64 << 20),
		nats.DisconnectErrHandler(func(_ *nats.Conn, err error) {
			if err != nil { // nil: we closed it ourselves
				log.Warn().Err(err).Msg("NATS disconnected")
			}
		}),
		nats.ReconnectHandler(func(nc *nats.Conn) {
			log.Info().Str("url", nc.ConnectedUrlRedacted()).Msg("NATS reconnected")
		}),
		nats.ErrorHandler(func(_ *nats.Conn, sub *nats.Subscription, err error) {
			ev := log.Error().Err(err)
			if sub != nil {
				ev = ev.Str("subject", sub.Subject)
			}
			ev.Msg("NATS error")
		}),
	}
	if cfg.NATSUser != "" {
		opts = append(opts, nats.UserInfo(cfg.NATSUser, cfg.NATSPassword))
	}
	if cfg.NATSToken != "" {
		opts = append(opts, nats.Token(cfg.NATSToken))
	}
	if cfg.NATSCreds != "" {
		opts = append(opts, nats.UserCredentials(cfg.NATSCreds))
	}
	if cfg.NATSNKey != "" {
		opt, err := nats.NkeyOptionFromSeed(cfg.NATSNKey)
		if err != nil {
			return nil, fmt.Errorf("nkey seed %s: %w", cfg.NATSNKey, err)
		}
		opts = append(opts, opt)
	}
	if cfg.NATSTLSCA != "" {
		opts = append(opts, nats.RootCAs(cfg.NATSTLSCA))
	}
	if cfg.NATSTLSCert != "" || cfg.NATSTLSKey != "" {
		opts = append(opts, nats.ClientCert(cfg.NATSTLSCert, cfg.NATSTLSKey))
	}
	nc, err := nats.Connect(url, opts...)
	if err != nil {
		return nil, fmt.Errorf("connect to NATS at %s: %w", url, err)
	}
	return nc, nil
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
