package gateway

import (
	"fmt"
	"time"

	"github.com/nats-io/nats-server/v2/server"
)

// EmbeddedNATS configures the in-process nats-server used when no NATS URL
// is given.
type EmbeddedNATS struct {
	// Host to listen on; default 127.0.0.1.
	Host string
	// Port to listen on; default 4222. -1 picks a free port.
	Port int
	// MaxPayload is the largest message the server accepts; default 1 MiB.
	MaxPayload int32
	// Debug logs the server's own messages to stderr.
	Debug bool

	// Client authentication the server requires; at most one kind. Empty:
	// none (the default listens on loopback).
	User, Password string
	Token          string
	NKey           string // a user's public nkey (U...)
	// TLS: the server's certificate and key; with ClientCA, clients must
	// present a certificate it signed.
	TLSCert, TLSKey, TLSClientCA string
}

// StartEmbeddedNATS starts an in-process nats-server (JetStream off) and
// waits until it accepts connections. Shut it down with Shutdown.
func StartEmbeddedNATS(cfg EmbeddedNATS) (*server.Server, error) {
	opts := &server.Options{
		ServerName: "queengate-embedded",
		Host:       cfg.Host,
		Port:       cfg.Port,
		MaxPayload: cfg.MaxPayload,
		NoSigs:     true,
		NoLog:      !cfg.Debug,
	}
	if opts.Host == "" {
		opts.Host = "127.0.0.1"
	}
	if opts.Port == 0 {
		opts.Port = 4222
	}
	if opts.MaxPayload == 0 {
		opts.MaxPayload = 1 << 20
	}
	switch {
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
	ns, err := server.NewServer(opts)
	if err != nil {
		return nil, fmt.Errorf("gateway: embedded nats-server: %w", err)
	}
	if cfg.Debug {
		ns.ConfigureLogger()
	}
	go ns.Start()
	if !ns.ReadyForConnections(10 * time.Second) {
		ns.Shutdown()
		return nil, fmt.Errorf("gateway: embedded nats-server did not start listening on %s:%d", opts.Host, opts.Port)
	}
	return ns, nil
}
