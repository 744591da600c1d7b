package main

import (
	"cmp"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strconv"
	"time"

	"github.com/rs/zerolog"

	queengate "github.com/queengate/queengate"
	"github.com/queengate/queengate/dedup"
	"github.com/queengate/queengate/ingest"
	"github.com/queengate/queengate/model"
	"github.com/queengate/queengate/routing"
	"github.com/queengate/queengate/server"
	"github.com/queengate/queengate/tail"
)

// config is the daemon's configuration. Each field names its flag and
// environment variable, default and special values.
type config struct {
	// PGURL (--pg-url, QUEEN_PG_URL): PostgreSQL URL. Empty: LocalPGDir.
	PGURL string
	// PGReadURL (--pg-read-url, QUEEN_PG_READ_URL): PostgreSQL URL for
	// reads (standbys). Empty: reads use PGURL.
	PGReadURL string
	// PGReadWait (--pg-read-wait, QUEEN_PG_READ_WAIT): longest a read
	// waits for a lagging standby; 0: none.
	PGReadWait time.Duration
	// LocalPGDir (--local-pg-dir, QUEEN_LOCAL_PG_DIR), development only:
	// with no PGURL, run a PostgreSQL cluster kept in this folder.
	LocalPGDir string

	// NATSURL (--nats-url, QUEEN_NATS_URL): NATS server or cluster URLs,
	// comma-separated. Empty: run an embedded nats-server.
	NATSURL string
	// NATSHost and NATSPort (QUEEN_NATS_HOST, QUEEN_NATS_PORT): where the
	// embedded server listens; default 127.0.0.1:4222.
	NATSHost string
	NATSPort int
	// Credentials and TLS for the NATS connection (all optional).
	NATSUser, NATSPassword, NATSToken, NATSNKey, NATSCreds string
	NATSTLSCA, NATSTLSCert, NATSTLSKey                     string

	// Prefix (--subject-prefix, QUEEN_SUBJECT_PREFIX) starts every
	// subject; default "queen".
	Prefix string
	// HTTPAddr (--http-addr, QUEEN_HTTP_ADDR): admin HTTP; default
	// 127.0.0.1:6632.
	HTTPAddr string
	// MaxBatch (--max-batch, QUEEN_MAX_BATCH): messages per request;
	// default 1000.
	MaxBatch int
	// Shards (--shards, QUEEN_SHARDS): ingest shards; 0 means one per CPU.
	Shards int
	// FlushSize (--flush-size, QUEEN_FLUSH_SIZE): messages that flush a
	// partition's buffer; default 1000.
	FlushSize int
	// PushTimeout (--push-timeout, QUEEN_PUSH_TIMEOUT): longest one push
	// to PostgreSQL may take before its messages are answered failed.
	PushTimeout time.Duration
	// Linger (--flush-linger, QUEEN_FLUSH_LINGER): longest wait before a
	// buffer is flushed; default 1ms.
	Linger time.Duration
	// MaxBuffered (--max-buffered, QUEEN_MAX_BUFFERED): messages a shard
	// holds before answering 503; default 100000.
	MaxBuffered int
	// FailoverJournal (--failover-journal, QUEEN_FAILOVER_JOURNAL): the
	// last acknowledged messages checked against a changed PostgreSQL
	// for what it lost; default 262144 (40 bytes each).
	FailoverJournal int
	// DedupCacheMB (--dedup-cache-mb, QUEEN_DEDUP_CACHE_MB): the dedup
	// cache's budget; default 512. 0 turns the cache off (every push
	// probes in SQL; for measuring).
	DedupCacheMB int
	// TailMB (--tail-mb, QUEEN_TAIL_MB): the budget of the tail, the
	// messages this gateway committed kept to serve consumers' usual
	// cycle from memory; default 32. 0 turns it off.
	TailMB int
	// MemoryLimitMB (--memory-limit-mb, QUEEN_MEMORY_LIMIT_MB): the Go
	// runtime's soft memory limit in MiB. 0 (default): the dedup cache
	// and tail budgets plus memoryHeadroomMB, unless GOMEMLIMIT is set;
	// -1: none.
	MemoryLimitMB int
	// LogLevel (--log-level, QUEEN_LOG_LEVEL): default info.
	LogLevel string

	// AdminToken (--admin-token, QUEEN_ADMIN_TOKEN): when set, the
	// operator requests require it as a bearer token: every admin HTTP
	// path but /healthz, /readyz and /metrics, and the NATS subjects that
	// span queues (docs/security.md). Empty: none.
	AdminToken string
	// RetentionInterval (--retention-interval, QUEEN_RETENTION_INTERVAL):
	// time between retention passes; default 1m, 0 turns retention off in
	// this gateway.
	RetentionInterval time.Duration
	// RetentionSlack (--retention-slack, QUEEN_RETENTION_SLACK): kept
	// beyond each queue's window before its transactionIds are retired; default 1m.
	RetentionSlack time.Duration
	// NATSServerTLSCert/Key/ClientCA (QUEEN_NATS_SERVER_TLS_*): TLS for the
	// embedded nats-server. Its client authentication is the gateway's own
	// credentials (user/password, token or nkey): it requires what the
	// gateway connects with.
	NATSServerTLSCert, NATSServerTLSKey, NATSServerTLSClientCA string
	// NATSConfig (--nats-config, QUEEN_NATS_CONFIG): a nats-server
	// configuration file for the embedded server, e.g. the authorization
	// block of docs/security.md; the gateway then connects as one of its
	// users (nats-user/nats-password, or nats-nkey). Empty: none.
	NATSConfig string
	// RoutingShards (--routing-shards, QUEEN_ROUTING_SHARDS): routing
	// shards of the deployment, the same in every gateway and in the NATS
	// mapping; default 64. 0 turns routing off (any gateway takes any push).
	RoutingShards int
	// NoTimerFire (--no-timer-fire, QUEEN_NO_TIMER_FIRE): schedule and
	// cancel timers here but leave firing to other gateways.
	NoTimerFire bool

	ShowVersion bool
}

type envFlags struct {
	fs  *flag.FlagSet
	err error
}

func (e *envFlags) str(p *string, name, env, def, usage string) {
	if v, ok := os.LookupEnv(env); ok {
		def = v
	}
	e.fs.StringVar(p, name, def, usage+" (env "+env+")")
}

func (e *envFlags) int(p *int, name, env string, def int, usage string) {
	if v, ok := os.LookupEnv(env); ok {
		n, err := strconv.Atoi(v)
		if err != nil {
			e.err = errors.Join(e.err, fmt.Errorf("%s=%q: not an integer", env, v))
		}
		def = n
	}
	e.fs.IntVar(p, name, def, usage+" (env "+env+")")
}

func (e *envFlags) bool(p *bool, name, env string, def bool, usage string) {
	if v, ok := os.LookupEnv(env); ok {
		b, err := strconv.ParseBool(v)
		if err != nil {
			e.err = errors.Join(e.err, fmt.Errorf("%s=%q: not a boolean (true or false)", env, v))
		}
		def = b
	}
	e.fs.BoolVar(p, name, def, usage+" (env "+env+")")
}

func (e *envFlags) dur(p *time.Duration, name, env string, def time.Duration, usage string) {
	if v, ok := os.LookupEnv(env); ok {
		d, err := time.ParseDuration(v)
		if err != nil {
			e.err = errors.Join(e.err, fmt.Errorf("%s=%q: not a duration (e.g. 1ms)", env, v))
		}
		def = d
	}
	e.fs.DurationVar(p, name, def, usage+" (env "+env+")")
}

// usageHead opens the help, before the flags.
const usageHead = `queengate is an exactly-once ingestion gateway: producers push messages
over NATS (queen.push.<queue>.<partition>); it commits them into a
partitioned log in PostgreSQL, where a transactionId already stored within
the queue's deduplication window writes nothing and is answered duplicate.

Usage:
  queengate [flags]

Every flag has a QUEEN_* environment equivalent (given after its text); the
flag wins. Flags:
`

// parseConfig reads the flags and their QUEEN_* environment, the flags
// winning, and checks what they say together.
func parseConfig(args []string, stderr io.Writer) (config, error) {
	var cfg config
	fs := flag.NewFlagSet("queengate", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), usageHead)
		fs.PrintDefaults()
	}
	e := &envFlags{fs: fs}
	// Defaults are the packages' own, so that a flag and the code it
	// configures cannot disagree.
	e.storeFlags(&cfg)
	e.natsFlags(&cfg)
	e.ingestFlags(&cfg)
	e.operatorFlags(&cfg)
	e.fleetFlags(&cfg)
	fs.BoolVar(&cfg.ShowVersion, "version", false, "print the version and exit")
	if e.err != nil {
		return cfg, e.err
	}
	if err := fs.Parse(args); err != nil {
		return cfg, err
	}
	if fs.NArg() > 0 {
		return cfg, fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	return cfg, cfg.validate()
}

// storeFlags are where PostgreSQL is.
func (e *envFlags) storeFlags(cfg *config) {
	e.str(&cfg.PGURL, "pg-url", "QUEEN_PG_URL", "", "PostgreSQL URL; empty: run a local cluster in --local-pg-dir")
	e.str(&cfg.PGReadURL, "pg-read-url", "QUEEN_PG_READ_URL", "", "PostgreSQL URL for reads, explain, message gets and listings: standbys (host=a,b target_session_attrs=standby or prefer-standby); pops, acks and writes stay on --pg-url; empty: --pg-url")
	e.dur(&cfg.PGReadWait, "pg-read-wait", "QUEEN_PG_READ_WAIT", server.DefaultPGReadWait, "longest a read waits for a standby behind what the primary stored before it reads on --pg-url; 0: none")
	e.str(&cfg.LocalPGDir, "local-pg-dir", "QUEEN_LOCAL_PG_DIR", "", "development only: folder of a local PostgreSQL cluster used when --pg-url is empty")
}

// natsFlags are the NATS connection, or the embedded server and how it is secured.
func (e *envFlags) natsFlags(cfg *config) {
	e.str(&cfg.NATSURL, "nats-url", "QUEEN_NATS_URL", "", "NATS URL(s), comma-separated; empty: run an embedded nats-server")
	e.str(&cfg.NATSHost, "nats-host", "QUEEN_NATS_HOST", "127.0.0.1", "embedded nats-server: host to listen on")
	e.int(&cfg.NATSPort, "nats-port", "QUEEN_NATS_PORT", 4222, "embedded nats-server: port to listen on (-1: any free port)")
	e.str(&cfg.NATSUser, "nats-user", "QUEEN_NATS_USER", "", "NATS user")
	e.str(&cfg.NATSPassword, "nats-password", "QUEEN_NATS_PASSWORD", "", "NATS password")
	e.str(&cfg.NATSToken, "nats-token", "QUEEN_NATS_TOKEN", "", "NATS token")
	e.str(&cfg.NATSNKey, "nats-nkey", "QUEEN_NATS_NKEY", "", "file with the NATS nkey seed")
	e.str(&cfg.NATSCreds, "nats-creds", "QUEEN_NATS_CREDS", "", "NATS credentials file (JWT + seed)")
	e.str(&cfg.NATSTLSCA, "nats-tls-ca", "QUEEN_NATS_TLS_CA", "", "CA file to verify the NATS server")
	e.str(&cfg.NATSTLSCert, "nats-tls-cert", "QUEEN_NATS_TLS_CERT", "", "client certificate for NATS")
	e.str(&cfg.NATSTLSKey, "nats-tls-key", "QUEEN_NATS_TLS_KEY", "", "client key for NATS")
	e.str(&cfg.NATSConfig, "nats-config", "QUEEN_NATS_CONFIG", "", "embedded nats-server: configuration file (authorization block: users and permissions, docs/security.md); the gateway connects as one of its users")
	e.str(&cfg.NATSServerTLSCert, "nats-server-tls-cert", "QUEEN_NATS_SERVER_TLS_CERT", "", "embedded nats-server: TLS certificate")
	e.str(&cfg.NATSServerTLSKey, "nats-server-tls-key", "QUEEN_NATS_SERVER_TLS_KEY", "", "embedded nats-server: TLS key")
	e.str(&cfg.NATSServerTLSClientCA, "nats-server-tls-client-ca", "QUEEN_NATS_SERVER_TLS_CLIENT_CA", "", "embedded nats-server: require client certificates signed by this CA")
}

// ingestFlags size the push path: batches, shards, buffers, the cache, the tail and memory.
func (e *envFlags) ingestFlags(cfg *config) {
	ingestDefaults := ingest.DefaultConfig()
	e.str(&cfg.Prefix, "subject-prefix", "QUEEN_SUBJECT_PREFIX", queengate.DefaultPrefix, "first token(s) of every subject")
	e.str(&cfg.HTTPAddr, "http-addr", "QUEEN_HTTP_ADDR", server.DefaultAdminAddr, "admin HTTP address: /metrics, /healthz, /readyz and the operator API (/configure, /queues, /status, /timers)")
	e.int(&cfg.MaxBatch, "max-batch", "QUEEN_MAX_BATCH", queengate.DefaultMaxBatch, "most messages in one push request")
	e.int(&cfg.Shards, "shards", "QUEEN_SHARDS", 0, "ingest shards; 0: one per CPU")
	e.int(&cfg.FlushSize, "flush-size", "QUEEN_FLUSH_SIZE", ingestDefaults.FlushSize, "messages that flush a partition's buffer")
	e.dur(&cfg.Linger, "flush-linger", "QUEEN_FLUSH_LINGER", ingestDefaults.Linger, "longest a buffered message waits for its flush")
	e.dur(&cfg.PushTimeout, "push-timeout", "QUEEN_PUSH_TIMEOUT", ingestDefaults.PushTimeout, "longest one push to PostgreSQL may take before its messages are answered failed; keep it under producers' request timeouts")
	e.int(&cfg.MaxBuffered, "max-buffered", "QUEEN_MAX_BUFFERED", ingestDefaults.MaxBuffered, "messages a shard holds before answering 503")
	e.int(&cfg.FailoverJournal, "failover-journal", "QUEEN_FAILOVER_JOURNAL", ingestDefaults.Journal, "last acknowledged messages a changed PostgreSQL (a failover) is asked about, for the lost report; 40 bytes each")
	e.int(&cfg.DedupCacheMB, "dedup-cache-mb", "QUEEN_DEDUP_CACHE_MB", dedup.DefaultBudgetBytes>>20, "dedup cache budget in MiB; 0 turns the cache off")
	e.int(&cfg.TailMB, "tail-mb", "QUEEN_TAIL_MB", tail.DefaultBudgetBytes>>20,
		"budget in MiB of the messages this gateway committed, kept to serve consumers' usual pop-and-ack from memory; 0 turns it off")
	e.int(&cfg.MemoryLimitMB, "memory-limit-mb", "QUEEN_MEMORY_LIMIT_MB", 0,
		fmt.Sprintf("soft memory limit of the Go runtime in MiB: the collector works harder near it (docs/operations.md); 0: dedup-cache-mb + tail-mb + %d, or GOMEMLIMIT when set; -1: none", memoryHeadroomMB))
}

// operatorFlags are logging, the admin token and retention.
func (e *envFlags) operatorFlags(cfg *config) {
	e.str(&cfg.LogLevel, "log-level", "QUEEN_LOG_LEVEL", "info", "debug, info, warn or error")
	e.str(&cfg.AdminToken, "admin-token", "QUEEN_ADMIN_TOKEN", "", "bearer token the operator requests require (admin HTTP but /healthz, /readyz, /metrics; NATS configure, queues, status, message.get, timer.list); empty: none")
	e.dur(&cfg.RetentionInterval, "retention-interval", "QUEEN_RETENTION_INTERVAL", time.Minute, "time between retention passes; 0: no retention in this gateway")
	e.dur(&cfg.RetentionSlack, "retention-slack", "QUEEN_RETENTION_SLACK", model.DefaultRetainOptions().Slack, "kept beyond each queue's window before its transactionIds are retired")
}

// fleetFlags are what a gateway shares with the others of its fleet.
func (e *envFlags) fleetFlags(cfg *config) {
	e.int(&cfg.RoutingShards, "routing-shards", "QUEEN_ROUTING_SHARDS", routing.DefaultShards,
		"routing shards: NATS maps pushes onto them and each gateway serves a share (the same in every gateway and in the NATS mapping); 0: off, any gateway takes any push")
	e.bool(&cfg.NoTimerFire, "no-timer-fire", "QUEEN_NO_TIMER_FIRE", false, "do not run the timer fire loop in this gateway (others fire)")
}

func (c config) validate() error {
	if c.ShowVersion {
		return nil
	}
	var errs []error
	if c.PGURL == "" && c.LocalPGDir == "" {
		errs = append(errs, errors.New("pg-url: set QUEEN_PG_URL (or --pg-url), or QUEEN_LOCAL_PG_DIR for a local development cluster"))
	}
	if c.PGReadURL != "" && c.PGURL == "" {
		errs = append(errs, errors.New("pg-read-url: reads from standbys need --pg-url, their primary (not a local development cluster)"))
	}
	if c.PGReadWait < 0 {
		errs = append(errs, fmt.Errorf("pg-read-wait: %v, must be 0 (none) or positive", c.PGReadWait))
	}
	if c.MaxBatch < 1 {
		errs = append(errs, fmt.Errorf("max-batch: %d, must be at least 1", c.MaxBatch))
	}
	if c.Shards < 0 {
		errs = append(errs, fmt.Errorf("shards: %d, must be 0 (one per CPU) or more", c.Shards))
	}
	if c.RoutingShards < 0 || c.RoutingShards > routing.MaxShards {
		errs = append(errs, fmt.Errorf("routing-shards: %d, must be 0 (off) to %d", c.RoutingShards, routing.MaxShards))
	}
	if c.FlushSize < 1 {
		errs = append(errs, fmt.Errorf("flush-size: %d, must be at least 1", c.FlushSize))
	}
	if c.Linger <= 0 {
		errs = append(errs, fmt.Errorf("flush-linger: %v, must be positive", c.Linger))
	}
	if c.FailoverJournal < 1 {
		errs = append(errs, fmt.Errorf("failover-journal: %d, must be at least 1", c.FailoverJournal))
	}
	if c.MaxBuffered < c.MaxBatch {
		errs = append(errs, fmt.Errorf("max-buffered: %d, must be at least max-batch (%d)", c.MaxBuffered, c.MaxBatch))
	}
	if c.DedupCacheMB < 0 {
		errs = append(errs, fmt.Errorf("dedup-cache-mb: %d, must be 0 (off) or more", c.DedupCacheMB))
	}
	if c.TailMB < 0 {
		errs = append(errs, fmt.Errorf("tail-mb: %d, must be 0 (off) or more", c.TailMB))
	}
	if c.MemoryLimitMB < -1 {
		errs = append(errs, fmt.Errorf("memory-limit-mb: %d, must be -1 (none), 0 (dedup-cache-mb + tail-mb + %d) or a size in MiB", c.MemoryLimitMB, memoryHeadroomMB))
	}
	if err := queengate.ValidPrefix(c.Prefix); err != nil {
		errs = append(errs, err)
	}
	if c.RetentionInterval < 0 {
		errs = append(errs, fmt.Errorf("retention-interval: %v, must be 0 (off) or positive", c.RetentionInterval))
	}
	if c.RetentionSlack < model.ClockSkewSlack {
		errs = append(errs, fmt.Errorf("retention-slack: %v, must be at least %v (the cache's clock-skew slack)", c.RetentionSlack, model.ClockSkewSlack))
	}
	errs = append(errs, c.natsErrors()...)
	return errors.Join(errs...)
}

// natsErrors are the mistakes in the NATS settings: the embedded
// server's, or settings for it given with an external one.
func (c config) natsErrors() []error {
	var errs []error
	if c.NATSURL == "" {
		kinds := 0
		for _, set := range []bool{c.NATSUser != "", c.NATSToken != "", c.NATSNKey != ""} {
			if set {
				kinds++
			}
		}
		if kinds > 1 {
			errs = append(errs, errors.New("embedded nats-server: give one of nats-user, nats-token, nats-nkey: it requires exactly what the gateway connects with"))
		}
		if c.NATSCreds != "" {
			errs = append(errs, errors.New("nats-creds: a creds file (JWT) needs a NATS server run with an operator; the embedded server takes nats-user/nats-password, nats-token or nats-nkey"))
		}
		if (c.NATSServerTLSCert == "") != (c.NATSServerTLSKey == "") {
			errs = append(errs, errors.New("nats-server-tls-cert and nats-server-tls-key: give both"))
		}
	} else if c.NATSServerTLSCert != "" || c.NATSServerTLSKey != "" || c.NATSServerTLSClientCA != "" || c.NATSConfig != "" {
		errs = append(errs, errors.New("nats-config and nats-server-tls-*: these configure the embedded server; with nats-url set there is none"))
	}
	if c.NATSPort < -1 || c.NATSPort > 65535 {
		errs = append(errs, fmt.Errorf("nats-port: %d is not a port", c.NATSPort))
	}
	return errs
}

// server is the gateway's configuration; PGURL is empty for a local
// development cluster.
func (c config) server(log zerolog.Logger) server.Config {
	return server.Config{
		PGURL:      c.PGURL,
		PGReadURL:  c.PGReadURL,
		PGReadWait: cmp.Or(c.PGReadWait, -1), // server: 0 is its default, negative none
		NATSURL:    c.NATSURL,
		NATSAuth: queengate.NATSAuth{User: c.NATSUser, Password: c.NATSPassword, Token: c.NATSToken,
			NKeyFile: c.NATSNKey, CredsFile: c.NATSCreds, TLSCA: c.NATSTLSCA, TLSCert: c.NATSTLSCert, TLSKey: c.NATSTLSKey},
		EmbeddedNATS: server.EmbeddedNATS{Host: c.NATSHost, Port: c.NATSPort, ConfigFile: c.NATSConfig,
			TLSCert: c.NATSServerTLSCert, TLSKey: c.NATSServerTLSKey, TLSClientCA: c.NATSServerTLSClientCA},
		Prefix:     c.Prefix,
		AdminAddr:  c.HTTPAddr,
		AdminToken: c.AdminToken,
		MaxBatch:   c.MaxBatch,
		Ingest: ingest.Config{
			Shards: c.Shards, FlushSize: c.FlushSize, Linger: c.Linger, MaxBuffered: c.MaxBuffered, PushTimeout: c.PushTimeout,
			Journal:   c.FailoverJournal,
			Cache:     dedup.Config{BudgetBytes: int64(c.DedupCacheMB) << 20},
			NoCache:   c.DedupCacheMB == 0,
			TailBytes: int64(c.TailMB) << 20,
			NoTail:    c.TailMB == 0,
		},
		RetentionInterval: c.RetentionInterval,
		RetentionSlack:    c.RetentionSlack,
		RoutingShards:     c.RoutingShards,
		NoTimerFire:       c.NoTimerFire,
		Version:           version,
		Logger:            log,
	}
}
