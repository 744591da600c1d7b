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

	queengate "github.com/queengate/queengate"
	"github.com/queengate/queengate/dedup"
	"github.com/queengate/queengate/gateway"
	"github.com/queengate/queengate/ingest"
	"github.com/queengate/queengate/internal/pgcluster"
	"github.com/queengate/queengate/internal/startstop"
	"github.com/queengate/queengate/model"
	"github.com/queengate/queengate/pgstore"
	"github.com/queengate/queengate/retention"
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
	store, closeStore, err := openStore(ctx, cfg, log)
	if err != nil {
		return err
	}
	defer closeStore()
	nc, natsURL, closeNATS, err := openNATS(cfg, log)
	if err != nil {
		return err
	}
	defer closeNATS()
	store.SetMaxData(func() int64 { return queengate.MaxDataBytes(nc.MaxPayload()) }) // dead letters as deliverable as pushes
	d, err := assemble(cfg, store, nc, log)
	if err != nil {
		return err
	}
	// The admin server first: while PostgreSQL or NATS is out of reach,
	// /healthz answers and /readyz says what the gateway waits for.
	if err := d.admin.Start(context.WithoutCancel(ctx)); err != nil {
		return err
	}
	defer d.admin.Stop()
	log.Info().Str("http", d.admin.Addr()).Msg("admin HTTP listening")
	if err := awaitDependencies(ctx, store, nc, log); err != nil {
		if ctx.Err() != nil {
			return nil // stopped before it could serve
		}
		return err
	}
	// Services stop in order when the signal comes, not all at once: the
	// gateway first, so that ingest answers everything it accepted.
	stopAll, err := startstop.StartAll(context.WithoutCancel(ctx), d.services...)
	if err != nil {
		return err
	}
	defer stopAll()
	log.Info().Str("version", version).Str("nats", natsURL).Str("prefix", cfg.Prefix).
		Str("http", d.admin.Addr()).Msg("queengate serving")

	<-ctx.Done()
	// A second signal now ends the process at once.
	stopSignals()
	log.Info().Msg("shutting down: refusing new requests, answering everything accepted")
	start := time.Now()
	stopAll() // the gateway's answers are flushed to NATS before it returns
	log.Info().Dur("took_ms", time.Since(start)).Msg("stopped")
	return nil
}

// openStore opens PostgreSQL (a local development cluster when no URL is
// given) and migrates it; closeStore releases both.
func openStore(ctx context.Context, cfg config, log zerolog.Logger) (store *pgstore.Store, closeStore func(), err error) {
	var closers []func()
	closeStore = func() {
		for i := len(closers) - 1; i >= 0; i-- {
			closers[i]()
		}
	}
	defer func() {
		if err != nil {
			closeStore()
		}
	}()
	pgURL := cfg.PGURL
	if pgURL == "" {
		cluster, url, err := startLocalPG(ctx, cfg.LocalPGDir)
		if err != nil {
			return nil, closeStore, err
		}
		closers = append(closers, cluster.Stop)
		log.Info().Str("dir", cluster.Dir()).Str("url", url).Msg("local PostgreSQL started")
		pgURL = url
	}
	if store, err = pgstore.Open(ctx, pgURL); err != nil {
		return nil, closeStore, err
	}
	closers = append(closers, store.Close)
	if n := store.Pool().Config().MaxConns; n < 4 {
		return nil, closeStore, fmt.Errorf("pg-url: pool_max_conns=%d is too few: at least 4 (pushes, the timers' LISTEN, fires, retention)", n)
	}
	return store, closeStore, nil
}

// awaitDependencies waits until PostgreSQL is migrated (under the
// migration lock, as ever) and NATS is connected, trying again with a
// capped backoff and logging why: a gateway started while either is down
// (a deploy racing a database's crash recovery) needs no supervisor to
// start it again. An error that waiting cannot cure (a refused password,
// a schema newer than this build) ends it.
func awaitDependencies(ctx context.Context, store *pgstore.Store, nc *nats.Conn, log zerolog.Logger) error {
	err := retry(ctx, log, "PostgreSQL", func() error {
		err := migrate(ctx, store, log)
		if err != nil && !pgstore.Unreachable(err) {
			return permanent{err}
		}
		return err
	})
	if err != nil {
		return err
	}
	return retry(ctx, log, "NATS", func() error {
		if nc.IsConnected() {
			return nil
		}
		if err := nc.LastError(); err != nil {
			return fmt.Errorf("%s: %w", nc.Status(), err)
		}
		return errors.New(nc.Status().String())
	})
}

// openNATS connects to NATS, starting the embedded server (with the
// routing shards' mapping) when no URL is given.
func openNATS(cfg config, log zerolog.Logger) (nc *nats.Conn, url string, closeNATS func(), err error) {
	url = cfg.NATSURL
	closeNATS = func() {}
	if url == "" {
		var embedded *server.Server
		if embedded, url, err = startEmbeddedNATS(cfg); err != nil {
			return nil, "", closeNATS, err
		}
		closeNATS = embedded.Shutdown
		log.Info().Str("url", url).Msg("embedded NATS server started")
	}
	if nc, err = connectNATS(url, cfg, log); err != nil {
		closeNATS()
		return nil, "", func() {}, err
	}
	shutdown := closeNATS
	return nc, url, func() { nc.Close(); shutdown() }, nil
}

func startEmbeddedNATS(cfg config) (*server.Server, string, error) {
	ecfg := gateway.EmbeddedNATS{Host: cfg.NATSHost, Port: cfg.NATSPort, ConfigFile: cfg.NATSConfig,
		User: cfg.NATSUser, Password: cfg.NATSPassword, Token: cfg.NATSToken,
		TLSCert: cfg.NATSServerTLSCert, TLSKey: cfg.NATSServerTLSKey, TLSClientCA: cfg.NATSServerTLSClientCA}
	if cfg.RoutingShards > 0 {
		ecfg.Mappings = gateway.ShardMappings(cfg.Prefix, cfg.RoutingShards)
	}
	if cfg.NATSNKey != "" {
		var err error
		if ecfg.NKey, err = nkeyPublic(cfg.NATSNKey); err != nil {
			return nil, "", err
		}
	}
	embedded, err := gateway.StartEmbeddedNATS(ecfg)
	if err != nil {
		return nil, "", err
	}
	url := embedded.ClientURL()
	if cfg.NATSServerTLSCert != "" {
		url = strings.Replace(url, "nats://", "tls://", 1)
	}
	return embedded, url, nil
}

// assembly is the daemon put together: its services, in start order.
type assembly struct {
	services []startstop.Service
	admin    *gateway.Admin
}

// assemble builds every service and wires them together; nothing runs yet.
func assemble(cfg config, store *pgstore.Store, nc *nats.Conn, log zerolog.Logger) (*assembly, error) {
	component := func(name string) zerolog.Logger { return log.With().Str("component", name).Logger() }
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		buildInfo(), store.Collector(), gateway.NewNATSCollector(nc))
	ing, err := ingest.New(store, ingest.Config{
		Shards: cfg.Shards, FlushSize: cfg.FlushSize, Linger: cfg.Linger, MaxBuffered: cfg.MaxBuffered, PushTimeout: cfg.PushTimeout,
		Cache:   dedup.Config{BudgetBytes: int64(cfg.DedupCacheMB) << 20},
		NoCache: cfg.DedupCacheMB == 0,
	}, component("ingest"), reg)
	if err != nil {
		return nil, err
	}
	tsvc, err := timers.New(store, timers.Config{NoFire: cfg.NoTimerFire, OnFired: ing.LearnFired}, component("timers"), reg)
	if err != nil {
		return nil, err
	}
	// A gateway cut off from PostgreSQL answers pushes at once (503, or
	// failed for what it held) instead of letting them wait out the push
	// timeout, and says so in its routing heartbeats: ready gateways take
	// its shards until it is back.
	pgWatch := gateway.NewStoreWatch(store, gateway.StoreWatchConfig{OnChange: ing.SetStoreReachable, LastCommit: ing.LastCommit})
	reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "queengate_postgres_reachable",
		Help: "1 while this gateway's heartbeat to PostgreSQL is answered, 0 after two in a row were not (pushes are then refused with 503).",
	}, func() float64 {
		if pgWatch.Up() {
			return 1
		}
		return 0
	}))
	d := &assembly{services: []startstop.Service{pgWatch, ing, tsvc}}
	ops := gateway.NewOps(gateway.OpsConfig{Token: cfg.AdminToken, Version: version, WantSchema: pgstore.LatestVersion()},
		store, ing, nc)
	timerOps := gateway.NewTimerOps(tsvc, ops)
	consumers := gateway.NewConsumers(store)
	gcfg := gateway.Config{Prefix: cfg.Prefix, MaxBatch: cfg.MaxBatch, Version: version,
		Endpoints: []gateway.EndpointSet{ops, timerOps, consumers}}
	if cfg.RoutingShards > 0 {
		gcfg.Routing = &gateway.RoutingConfig{Shards: cfg.RoutingShards, Ready: pgWatch.Up}
	}
	gw, err := gateway.New(gcfg, nc, ing, component("gateway"), reg)
	if err != nil {
		return nil, err
	}
	ing.OnCommit(gw.PublishCommitted)
	if cfg.RetentionInterval > 0 {
		opts := model.DefaultRetainOptions()
		opts.Slack = cfg.RetentionSlack
		r, err := retention.NewRunner(store, cfg.RetentionInterval, opts, component("retention"), reg)
		if err != nil {
			return nil, err
		}
		d.services = append(d.services, r)
	}
	d.admin = gateway.NewAdmin(cfg.HTTPAddr, store, pgstore.LatestVersion(), nc, reg, component("admin"))
	d.admin.Mount(ops)
	d.admin.MountTimers(timerOps)
	d.admin.MountGroups(consumers)
	d.admin.AddReadiness("gateway", gw.Serving)
	// The gateway last: it takes requests once everything behind it runs.
	d.services = append(d.services, gw)
	return d, nil
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
		// A server not up yet is waited for like one that went away.
		nats.RetryOnFailedConnect(true),
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
