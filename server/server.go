package server

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/rs/zerolog"

	queengate "github.com/queengate/queengate"
	"github.com/queengate/queengate/internal/startstop"
	"github.com/queengate/queengate/operator"
	"github.com/queengate/queengate/pgstore"
)

// Server is a running gateway.
type Server struct {
	cfg     Config
	log     zerolog.Logger
	store   *pgstore.Store
	nc      *nats.Conn
	natsURL string
	admin   *operator.Admin
	// closers release what Start opened, in reverse.
	closers  []func()
	stopOnce sync.Once
}

// Start opens PostgreSQL and NATS (starting the embedded server when
// cfg.NATSURL is empty), starts the admin HTTP server, waits until
// PostgreSQL is migrated and NATS connected (trying again, and logging
// why, while either is out of reach), then starts every service and
// returns the serving gateway. ctx bounds the start only: once Start has
// returned, the gateway runs until Stop. An error that waiting cannot cure
// (a refused password, a schema or routines newer than this build) ends
// the wait; everything opened is closed again.
func Start(ctx context.Context, cfg Config) (_ *Server, err error) {
	if cfg.PGURL == "" {
		return nil, errors.New("server: Config.PGURL is empty")
	}
	s := &Server{cfg: cfg.withDefaults(), log: cfg.Logger}
	defer func() {
		if err != nil {
			s.close()
		}
	}()
	if err := s.openStore(ctx); err != nil {
		return nil, err
	}
	if err := s.openNATS(); err != nil {
		return nil, err
	}
	nc := s.nc
	s.store.SetMaxData(func() int64 { return queengate.MaxDataBytes(nc.MaxPayload()) }) // dead letters as deliverable as pushes
	d, err := assemble(s.cfg, s.store, nc)
	if err != nil {
		return nil, err
	}
	// The admin server first: while PostgreSQL or NATS is out of reach,
	// /healthz answers and /readyz says what the gateway waits for.
	if err := d.admin.Start(context.WithoutCancel(ctx)); err != nil {
		return nil, err
	}
	s.closers = append(s.closers, d.admin.Stop)
	s.admin = d.admin
	s.log.Info().Str("http", d.admin.Addr()).Msg("admin HTTP listening")
	if err := awaitDependencies(ctx, s.store, nc, s.log); err != nil {
		return nil, err
	}
	// Services stop in order, not all at once: the gateway first, so that
	// ingest answers everything it accepted.
	stopAll, err := startstop.StartAll(context.WithoutCancel(ctx), d.services...)
	if err != nil {
		return nil, err
	}
	s.closers = append(s.closers, stopAll)
	s.log.Info().Str("version", s.cfg.Version).Str("nats", s.natsURL).Str("prefix", s.cfg.Prefix).
		Str("http", d.admin.Addr()).Msg("queengate serving")
	return s, nil
}

// Stop refuses new requests, answers everything accepted (flushed to
// NATS), then stops the admin server and closes NATS and PostgreSQL. When
// ctx ends first, Stop returns its error and the stop goes on in the
// background. Calling it again waits for the first.
func (s *Server) Stop(ctx context.Context) error {
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		s.stopOnce.Do(s.close)
	}()
	select {
	case <-stopped:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (s *Server) close() {
	for i := len(s.closers) - 1; i >= 0; i-- {
		s.closers[i]()
	}
	s.closers = nil
}

// ClientURL is the NATS URL the gateway is connected to: the embedded
// server's (tls:// when it requires TLS), or Config.NATSURL.
func (s *Server) ClientURL() string { return s.natsURL }

// AdminAddr is the admin HTTP server's listening address (host:port).
func (s *Server) AdminAddr() string { return s.admin.Addr() }

// openStore opens PostgreSQL; it is migrated once reachable
// (awaitDependencies).
func (s *Server) openStore(ctx context.Context) error {
	store, err := pgstore.Open(ctx, s.cfg.PGURL, s.readOptions()...)
	if err != nil {
		return err
	}
	s.store = store
	s.closers = append(s.closers, store.Close)
	if n := store.Pool().Config().MaxConns; n < 4 {
		return fmt.Errorf("pg-url: pool_max_conns=%d is too few: at least 4 (pushes, the timers' LISTEN, fires, retention)", n)
	}
	return nil
}

// readOptions are the store's options for the read pool.
func (s *Server) readOptions() []pgstore.Option {
	if s.cfg.PGReadURL == "" {
		return nil
	}
	opts := []pgstore.Option{pgstore.ReadURL(s.cfg.PGReadURL)}
	switch {
	case s.cfg.PGReadWait < 0:
		opts = append(opts, pgstore.ReadWait(0))
	case s.cfg.PGReadWait > 0:
		opts = append(opts, pgstore.ReadWait(s.cfg.PGReadWait))
	}
	return opts
}

// awaitDependencies waits until PostgreSQL is migrated (under the
// migration lock, as ever) and NATS is connected, trying again with a
// capped backoff and logging why: a gateway started while either is down
// (a deploy racing a database's crash recovery) needs no supervisor to
// start it again. An error that waiting cannot cure (a refused password,
// a schema or routines newer than this build) ends it.
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

func migrate(ctx context.Context, store *pgstore.Store, log zerolog.Logger) error {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	applied, err := store.Migrate(ctx)
	if err != nil {
		return err
	}
	log.Info().Ints("applied", applied).Int("schema_version", pgstore.LatestVersion()).
		Int("routines_version", pgstore.RoutinesVersion).Msg("schema migrated")
	return nil
}
