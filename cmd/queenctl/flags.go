package main

import (
	"context"
	"flag"
	"io"
	"net/url"
	"strings"
	"time"

	queengate "github.com/queengate/queengate"
	"github.com/queengate/queengate/internal/ctl/admin"
	"github.com/queengate/queengate/internal/ctl/cli"
)

// defaultHTTPURL is the gateway's admin address when neither --http nor
// --nats is given (QUEEN_HTTP_ADDR's default).
const defaultHTTPURL = "http://127.0.0.1:6632"

// globals are the flags every command takes. Each has an environment
// equivalent; the flag wins.
type globals struct {
	natsURL string // --nats, QUEENCTL_NATS_URL
	httpURL string // --http, QUEENCTL_HTTP_URL
	token   string // --token, QUEEN_ADMIN_TOKEN: the admin token
	prefix  string // --prefix, QUEEN_SUBJECT_PREFIX; default "queen"

	// NATS credentials and TLS, named as cmd/queengate names them.
	natsCreds, natsUser, natsPassword, natsToken, natsNKey, natsTLSCA string

	timeout time.Duration // --timeout: per request; default 10s
	output  string        // -o: table or json
}

// newGlobals fills the defaults from the environment.
func newGlobals(env func(string) (string, bool)) *globals {
	get := func(name, def string) string {
		if v, ok := env(name); ok {
			return v
		}
		return def
	}
	return &globals{
		natsURL:      get("QUEENCTL_NATS_URL", ""),
		httpURL:      get("QUEENCTL_HTTP_URL", ""),
		token:        get("QUEEN_ADMIN_TOKEN", ""),
		prefix:       get("QUEEN_SUBJECT_PREFIX", "queen"),
		natsCreds:    get("QUEEN_NATS_CREDS", ""),
		natsUser:     get("QUEEN_NATS_USER", ""),
		natsPassword: get("QUEEN_NATS_PASSWORD", ""),
		natsToken:    get("QUEEN_NATS_TOKEN", ""),
		natsNKey:     get("QUEEN_NATS_NKEY", ""),
		natsTLSCA:    get("QUEEN_NATS_TLS_CA", ""),
		timeout:      10 * time.Second,
		output:       "table",
	}
}

// register adds the global flags to fs. The current values are the
// defaults, so flags given before the command survive a second
// registration on the command's own flag set. Usage strings name the
// documented default, never the current value (it may be a secret).
func (g *globals) register(fs *flag.FlagSet) {
	fs.StringVar(&g.natsURL, "nats", g.natsURL, "NATS `URL` of the gateway's NATS, e.g. nats://127.0.0.1:4222 (env QUEENCTL_NATS_URL)")
	fs.StringVar(&g.httpURL, "http", g.httpURL, "admin HTTP `URL` of a gateway (env QUEENCTL_HTTP_URL; default "+defaultHTTPURL+" when --nats is not given either)")
	fs.StringVar(&g.token, "token", g.token, "admin `token`, sent as Authorization: Bearer (env QUEEN_ADMIN_TOKEN)")
	fs.StringVar(&g.prefix, "prefix", g.prefix, "subject `prefix` of the gateway (env QUEEN_SUBJECT_PREFIX; default queen)")
	fs.StringVar(&g.natsCreds, "nats-creds", g.natsCreds, "NATS credentials `file` (JWT + seed) (env QUEEN_NATS_CREDS)")
	fs.StringVar(&g.natsUser, "nats-user", g.natsUser, "NATS `user` (env QUEEN_NATS_USER)")
	fs.StringVar(&g.natsPassword, "nats-password", g.natsPassword, "NATS `password` (env QUEEN_NATS_PASSWORD)")
	fs.StringVar(&g.natsToken, "nats-token", g.natsToken, "NATS `token` (env QUEEN_NATS_TOKEN)")
	fs.StringVar(&g.natsNKey, "nats-nkey", g.natsNKey, "`file` with the NATS nkey seed (env QUEEN_NATS_NKEY)")
	fs.StringVar(&g.natsTLSCA, "nats-tls-ca", g.natsTLSCA, "CA `file` to verify the NATS server (env QUEEN_NATS_TLS_CA)")
	fs.DurationVar(&g.timeout, "timeout", g.timeout, "how long to wait for each answer (default 10s)")
	fs.StringVar(&g.output, "o", g.output, "output `format`: table or json (default table)")
	fs.StringVar(&g.output, "output", g.output, "same as -o `format`")
}

// validate checks the global flags once they are all parsed.
func (g *globals) validate() error {
	if g.output != "table" && g.output != "json" {
		return cli.Usagef("-o %q: use table or json", g.output)
	}
	if g.timeout <= 0 {
		return cli.Usagef("--timeout %v: must be positive, e.g. 10s", g.timeout)
	}
	for _, tok := range strings.Split(g.prefix, ".") {
		if !queengate.ValidName(tok) {
			return cli.Usagef("--prefix %q: each dot-separated token must be %s (as the gateway's QUEEN_SUBJECT_PREFIX)", g.prefix, queengate.NameRule)
		}
	}
	if g.httpURL != "" {
		u, err := normalizeHTTPURL(g.httpURL)
		if err != nil {
			return err
		}
		g.httpURL = u
	}
	return nil
}

// normalizeHTTPURL accepts host:port as well as a full URL.
func normalizeHTTPURL(s string) (string, error) {
	if !strings.Contains(s, "://") {
		s = "http://" + s
	}
	u, err := url.Parse(s)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return "", cli.Usagef("--http %q: want an address like %s", s, defaultHTTPURL)
	}
	return strings.TrimRight(u.String(), "/"), nil
}

func checkName(what, s string) error {
	if !queengate.ValidName(s) {
		return cli.Usagef("bad %s name %q: use %s", what, s, queengate.NameRule)
	}
	return nil
}

// session is one command's run: the parsed global flags, the I/O, and the
// connections opened so far (closed at the end).
type session struct {
	g      *globals
	stdin  io.Reader
	stdout io.Writer
	stderr io.Writer

	httpc *admin.HTTPClient
	natsc *admin.NATSClient
	// refuse ends the run with NATS's refusal of a subject.
	refuse context.CancelCauseFunc
}

// admin picks the transport for admin operations: HTTP when --http is
// given (or neither is), else NATS.
func (s *session) admin(ctx context.Context) (admin.Client, error) {
	if s.g.httpURL == "" && s.g.natsURL != "" {
		return s.nats(ctx)
	}
	if s.httpc == nil {
		u := s.g.httpURL
		if u == "" {
			u = defaultHTTPURL
		}
		s.httpc = admin.NewHTTPClient(u, s.g.token, s.g.timeout)
	}
	return s.httpc, nil
}

// nats connects to NATS once per run.
func (s *session) nats(ctx context.Context) (*admin.NATSClient, error) {
	if s.natsc != nil {
		return s.natsc, nil
	}
	if s.g.natsURL == "" {
		return nil, cli.Usagef("this needs NATS: set --nats or QUEENCTL_NATS_URL (e.g. --nats nats://127.0.0.1:4222)")
	}
	c, err := dialNATS(ctx, s.g, s.refuse)
	if err != nil {
		return nil, err
	}
	s.natsc = c
	return c, nil
}

func (s *session) close() {
	if s.natsc != nil {
		s.natsc.Close()
	}
}
