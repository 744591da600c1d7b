package server

import (
	"fmt"
	"maps"
	"os"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nkeys"
	"github.com/rs/zerolog"

	"github.com/queengate/queengate/internal/natsembed"
	"github.com/queengate/queengate/routing"
)

// openNATS connects to NATS, starting the embedded server (with the
// routing shards' mapping) when no URL is given.
func (s *Server) openNATS() error {
	s.natsURL = s.cfg.NATSURL
	if s.natsURL == "" {
		embedded, url, err := startEmbeddedNATS(s.cfg)
		if err != nil {
			return err
		}
		s.closers = append(s.closers, embedded.Shutdown)
		s.natsURL = url
		s.log.Info().Str("url", url).Msg("embedded NATS server started")
	}
	nc, err := connectNATS(s.natsURL, s.cfg, s.log)
	if err != nil {
		return err
	}
	s.nc = nc
	s.closers = append(s.closers, nc.Close)
	return nil
}

func startEmbeddedNATS(cfg Config) (interface{ Shutdown() }, string, error) {
	e := cfg.EmbeddedNATS
	ecfg := natsembed.Config{Host: e.Host, Port: e.Port, ConfigFile: e.ConfigFile,
		User: cfg.NATSAuth.User, Password: cfg.NATSAuth.Password, Token: cfg.NATSAuth.Token,
		TLSCert: e.TLSCert, TLSKey: e.TLSKey, TLSClientCA: e.TLSClientCA}
	if cfg.RoutingShards > 0 {
		ecfg.Mappings = routing.ShardMappings(cfg.Prefix, cfg.RoutingShards)
		if e.ConfigFile == "" {
			// Named pops to their partition's gateway too. Not under a
			// configuration file's users: NATS checks a publish against
			// the subject it is mapped onto, which their permissions may
			// not allow (docs/security.md).
			maps.Copy(ecfg.Mappings, routing.PopMappings(cfg.Prefix, cfg.RoutingShards))
		}
	}
	if cfg.NATSAuth.NKeyFile != "" {
		var err error
		if ecfg.NKey, err = nkeyPublic(cfg.NATSAuth.NKeyFile); err != nil {
			return nil, "", err
		}
	}
	embedded, err := natsembed.Start(ecfg)
	if err != nil {
		return nil, "", err
	}
	url := embedded.ClientURL()
	if e.TLSCert != "" {
		url = strings.Replace(url, "nats://", "tls://", 1)
	}
	return embedded, url, nil
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

func connectNATS(url string, cfg Config, log zerolog.Logger) (*nats.Conn, error) {
	opts := []nats.Option{
		nats.Name("queengate " + cfg.Version),
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
	auth, err := cfg.NATSAuth.Options()
	if err != nil {
		return nil, fmt.Errorf("nkey seed %s: %w", cfg.NATSAuth.NKeyFile, err)
	}
	nc, err := nats.Connect(url, append(opts, auth...)...)
	if err != nil {
		return nil, fmt.Errorf("connect to NATS at %s: %w", url, err)
	}
	return nc, nil
}
