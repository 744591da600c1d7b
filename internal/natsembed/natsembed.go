// Package natsembed runs the in-process nats-server a gateway uses when
// it is given no NATS URL (and that tests use everywhere): listening,
// authentication, TLS and the routing shards' subject mappings.
package natsembed

import (
	"cmp"
	"fmt"
	"net"
	"strconv"
	"sync"
	"time"

	"github.com/nats-io/nats-server/v2/server"
)

// Config configures the in-process nats-server used when no NATS URL
// is given.
type Config struct {
	// Host to listen on; default 127.0.0.1.
	Host string
	// Port to listen on; default 4222. -1 picks a free port.
	Port int
	// MaxPayload is the largest message the server accepts; default 1 MiB.
	MaxPayload int32
	// Debug logs the server's own messages to stderr.
	Debug bool
	// Mappings are subject mappings of the server's account (source ->
	// destination), e.g. routing.ShardMappings.
	Mappings map[string]string

	// ConfigFile, when set, is a nats-server configuration file loaded
	// first: its authorization block (users and their permissions,
	// docs/security.md), limits and the rest. Host, Port, Mappings and TLS
	// here are applied over it; MaxPayload only when the file sets none;
	// the credentials below only when it sets no authorization of its own
	// (with one, the gateway connects as one of its users). Mappings go to
	// the global account: the file's users belong there (no accounts).
	ConfigFile string

	// Client authentication the server requires; at most one kind. Empty:
	// none (the default listens on loopback).
	User, Password string
	Token          string
	NKey           string // a user's public nkey (U...)
	// TLS: the server's certificate and key; with ClientCA, clients must
	// present a certificate it signed.
	TLSCert, TLSKey, TLSClientCA string
}

// Start starts an in-process nats-server (JetStream off) and
// waits until it accepts connections. Shut it down with Shutdown.
func Start(cfg Config) (*server.Server, error) {
	opts := &server.Options{}
	if cfg.ConfigFile != "" {
		var err error
		if opts, err = server.ProcessConfigFile(cfg.ConfigFile); err != nil {
			return nil, fmt.Errorf("gateway: embedded nats-server config: %w", err)
		}
	}
	opts.Host, opts.Port = cmp.Or(cfg.Host, "127.0.0.1"), cmp.Or(cfg.Port, 4222)
	opts.MaxPayload = cmp.Or(cfg.MaxPayload, opts.MaxPayload, 1<<20)
	opts.ServerName = cmp.Or(opts.ServerName, "queengate-embedded")
	opts.NoSigs, opts.NoLog = true, !cfg.Debug
	ownAuth := opts.Username != "" || opts.Authorization != "" || len(opts.Users) > 0 || len(opts.Nkeys) > 0
	switch {
	case ownAuth:
	case cfg.User != "":
		opts.Username, opts.Password = cfg.User, cfg.Password
	case cfg.Token != "":
		opts.Authorization = cfg.Token
	case cfg.NKey != "":
		opts.Nkeys = []*server.NkeyUser{{Nkey: cfg.NKey}}
	}
	if cfg.TLSCert != "" || cfg.TLSKey != "" {
		tc, err := server.GenTLSConfig(&server.TLSConfigOpts{CertFile: cfg.TLSCert, KeyFile: cfg.TLSKey,
			CaFile: cfg.TLSClientCA, Verify: cfg.TLSClientCA != ""})
		if err != nil {
			return nil, fmt.Errorf("gateway: embedded nats-server TLS: %w", err)
		}
		opts.TLSConfig, opts.TLS, opts.TLSVerify = tc, true, cfg.TLSClientCA != ""
		opts.TLSTimeout = 2
	}
	if opts.Port != server.RANDOM_PORT {
		// The server logs a failed listen and then never becomes ready:
		// try the address first, so a busy port fails at once and says so.
		ln, err := net.Listen("tcp", net.JoinHostPort(opts.Host, strconv.Itoa(opts.Port)))
		if err != nil {
			return nil, fmt.Errorf("gateway: embedded nats-server: %w (set QUEEN_NATS_PORT, or QUEEN_NATS_URL for an external server)", err)
		}
		ln.Close()
	}
	ns, err := server.NewServer(opts)
	if err != nil {
		return nil, fmt.Errorf("gateway: embedded nats-server: %w", err)
	}
	for src, dest := range cfg.Mappings {
		if err := ns.GlobalAccount().AddMapping(src, dest); err != nil {
			return nil, fmt.Errorf("gateway: embedded nats-server: map %s: %w", src, err)
		}
	}
	fatal := &fatalLog{}
	if cfg.Debug {
		ns.ConfigureLogger()
	} else {
		ns.SetLoggerV2(fatal, false, false, false)
	}
	go ns.Start()
	if !ns.ReadyForConnections(10 * time.Second) {
		ns.Shutdown()
		return nil, fmt.Errorf("gateway: embedded nats-server did not start listening on %s:%d: %s", opts.Host, opts.Port, fatal.last())
	}
	return ns, nil
}

// fatalLog keeps the server's last fatal or error message, to say why it
// did not start; everything else is dropped (NoLog's behaviour).
type fatalLog struct {
	mu  sync.Mutex
	msg string
}

func (l *fatalLog) keep(format string, v ...any) {
	l.mu.Lock()
	l.msg = fmt.Sprintf(format, v...)
	l.mu.Unlock()
}

func (l *fatalLog) last() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.msg == "" {
		return "no error logged"
	}
	return l.msg
}

func (l *fatalLog) Noticef(string, ...any)         {}
func (l *fatalLog) Warnf(string, ...any)           {}
func (l *fatalLog) Debugf(string, ...any)          {}
func (l *fatalLog) Tracef(string, ...any)          {}
func (l *fatalLog) Fatalf(format string, v ...any) { l.keep(format, v...) }
func (l *fatalLog) Errorf(format string, v ...any) { l.keep(format, v...) }
