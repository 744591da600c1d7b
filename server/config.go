package server

import (
	"cmp"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"

	queengate "github.com/queengate/queengate"
	"github.com/queengate/queengate/gateway"
	"github.com/queengate/queengate/ingest"
	"github.com/queengate/queengate/model"
	"github.com/queengate/queengate/pgstore"
)

// DefaultAdminAddr is where the admin HTTP server listens unless told.
const DefaultAdminAddr = "127.0.0.1:6632"

// Config is a gateway's configuration: what cmd/queengate's flags set.
// The zero value of every field but PGURL is a working default.
type Config struct {
	// PGURL is the PostgreSQL database (required); Start migrates it. Its
	// pool needs pool_max_conns of at least 4.
	PGURL string
	// PGReadURL, when set, is a second pool for reads, explain, message
	// gets and listings: usually standbys (multi-host,
	// target_session_attrs=standby or prefer-standby). Pops, acks,
	// leases and writes stay on PGURL (pgstore.ReadURL).
	PGReadURL string
	// PGReadWait is the longest a read waits for a lagging standby
	// before it reads on PGURL; 0: DefaultPGReadWait, negative: no wait.
	PGReadWait time.Duration

	// NATSURL is the NATS server or cluster, URLs comma-separated. Empty:
	// an embedded nats-server, configured by EmbeddedNATS.
	NATSURL string
	// NATSAuth is how the gateway connects to NATS; an embedded server
	// requires the same credentials (user/password, token or nkey).
	NATSAuth queengate.NATSAuth
	// EmbeddedNATS configures the embedded server (NATSURL empty).
	EmbeddedNATS EmbeddedNATS

	// Prefix starts every subject; default queengate.DefaultPrefix.
	Prefix string
	// AdminAddr is where the admin HTTP server listens (/metrics,
	// /healthz, /readyz, the operator API); default DefaultAdminAddr, port
	// 0 picks a free one.
	AdminAddr string
	// AdminToken, when set, is the bearer token the operator requests
	// require (docs/security.md).
	AdminToken string
	// MaxBatch is the most messages in one push request; default
	// queengate.DefaultMaxBatch.
	MaxBatch int
	// Ingest tunes the ingest shards and the dedup cache (ingest's
	// defaults for zero fields).
	Ingest ingest.Config
	// RetentionInterval is the time between retention passes; 0 runs no
	// retention in this gateway.
	RetentionInterval time.Duration
	// RetentionSlack is kept beyond each queue's window before its
	// transactionIds are retired; default model.DefaultRetainOptions().Slack.
	RetentionSlack time.Duration
	// RoutingShards are the deployment's routing shards (the same in
	// every gateway and in the NATS mapping); 0 turns routing off: any
	// gateway takes any push.
	RoutingShards int
	// NoTimerFire schedules and cancels timers here but leaves firing to
	// other gateways.
	NoTimerFire bool

	// Version is the build reported in the micro service, the status and
	// queengate_build_info; default gateway.DefaultVersion.
	Version string
	// Logger receives the gateway's logs; the zero value logs nothing.
	Logger zerolog.Logger
	// Registry receives the gateway's metrics, served on /metrics; one
	// gateway per registry (their names would collide). Nil: a registry
	// of its own, with the Go and process collectors.
	Registry *prometheus.Registry
}

// DefaultPGReadWait is Config.PGReadWait's default.
const DefaultPGReadWait = pgstore.DefaultReadWait

// EmbeddedNATS configures the in-process nats-server.
type EmbeddedNATS struct {
	// Host and Port to listen on; default 127.0.0.1:4222. Port -1 picks
	// a free port (ClientURL says which).
	Host string
	Port int
	// ConfigFile is a nats-server configuration file, e.g. the
	// authorization block of docs/security.md; the gateway then connects
	// as one of its users.
	ConfigFile string
	// TLSCert and TLSKey are the server's certificate; with TLSClientCA,
	// clients must present a certificate it signed.
	TLSCert, TLSKey, TLSClientCA string
}

func (c Config) withDefaults() Config {
	c.Prefix = cmp.Or(c.Prefix, queengate.DefaultPrefix)
	c.AdminAddr = cmp.Or(c.AdminAddr, DefaultAdminAddr)
	c.MaxBatch = cmp.Or(c.MaxBatch, queengate.DefaultMaxBatch)
	c.RetentionSlack = cmp.Or(c.RetentionSlack, model.DefaultRetainOptions().Slack)
	c.Version = cmp.Or(c.Version, gateway.DefaultVersion)
	return c
}
