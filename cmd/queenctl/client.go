package main

import (
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/nats-io/nats.go"

	queengate "github.com/queengate/queengate"
	"github.com/queengate/queengate/internal/ctl/admin"
	"github.com/queengate/queengate/internal/ctl/cli"
)

// dialNATS connects with the same credential options as the daemon; a
// permissions violation on the connection is given to refuse.
func dialNATS(ctx context.Context, g *globals, refuse context.CancelCauseFunc) (*admin.NATSClient, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	// A missing file is the operator's to fix, not an unreachable server.
	for _, f := range []struct{ flag, path string }{{"--nats-creds", g.natsCreds}, {"--nats-nkey", g.natsNKey}, {"--nats-tls-ca", g.natsTLSCA}} {
		if f.path == "" {
			continue
		}
		if _, err := os.Stat(f.path); err != nil {
			return nil, cli.Usagef("%s: %v", f.flag, err)
		}
	}
	opts := []nats.Option{
		nats.Name("queenctl"),
		nats.Timeout(g.timeout),
		// One short command: a broken connection is reported, not retried.
		nats.NoReconnect(),
		nats.ErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) {
			if errors.Is(err, nats.ErrPermissionViolation) && refuse != nil {
				refuse(admin.Refusal(err))
			}
		}),
	}
	auth := queengate.NATSAuth{User: g.natsUser, Password: g.natsPassword, Token: g.natsToken,
		CredsFile: g.natsCreds, NKeyFile: g.natsNKey, TLSCA: g.natsTLSCA}
	authOpts, err := auth.Options()
	if err != nil {
		return nil, cli.Usagef("--nats-nkey %s: %v", g.natsNKey, err)
	}
	opts = append(opts, authOpts...)
	nc, err := nats.Connect(g.natsURL, opts...)
	if err != nil {
		if errors.Is(err, nats.ErrAuthorization) || strings.Contains(strings.ToLower(err.Error()), "authorization") {
			return nil, &admin.UnreachableError{Msg: fmt.Sprintf("NATS at %s refused the connection: %v; check --nats-user/--nats-password, --nats-token, --nats-creds or --nats-nkey", g.natsURL, err)}
		}
		var uae x509.UnknownAuthorityError
		if errors.As(err, &uae) || strings.Contains(err.Error(), "x509:") {
			return nil, &admin.UnreachableError{Msg: fmt.Sprintf("NATS at %s: its TLS certificate is not trusted (%v): set --nats-tls-ca or QUEEN_NATS_TLS_CA to the CA that signed it", g.natsURL, err)}
		}
		return nil, &admin.UnreachableError{Msg: fmt.Sprintf("could not reach NATS at %s: %v; is it running? (set --nats or QUEENCTL_NATS_URL)", g.natsURL, err)}
	}
	return &admin.NATSClient{Conn: nc, Subjects: queengate.Subjects{Prefix: g.prefix}, Token: g.token, Timeout: g.timeout}, nil
}
