package operator

import (
	"context"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/pprof"
	"path"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/rs/zerolog"

	queengate "github.com/queengate/queengate"
	"github.com/queengate/queengate/gateway"
	"github.com/queengate/queengate/internal/startstop"
	"github.com/queengate/queengate/internal/wire"
)

// StoreHealth is what readiness asks of the store.
type StoreHealth interface {
	Ping(ctx context.Context) error
	SchemaVersion(ctx context.Context) (int, error)
}

// Admin is the admin HTTP server: /metrics, /healthz, /readyz, and the
// HTTP forms of the tables mounted on it.
type Admin struct {
	startstop.Base
	addr          string
	store         StoreHealth
	schemaVersion int
	nc            *nats.Conn
	gatherer      prometheus.Gatherer
	log           zerolog.Logger
	mux           *http.ServeMux
	// guard, once the operator API is mounted with a token, is what
	// protected routes other than the API's own (profiles) must pass.
	guard func(*http.Request) *queengate.Error
	// readiness are further checks /readyz runs, by name.
	readiness map[string]func() error
	// ops is the operator API Mount serves: its token guards every route.
	ops *Ops

	ln net.Listener
}

// NewAdmin builds the admin server for addr (host:port; port 0 picks one).
// wantSchema is the migration version /readyz requires.
func NewAdmin(addr string, store StoreHealth, wantSchema int, nc *nats.Conn, gatherer prometheus.Gatherer, log zerolog.Logger) *Admin {
	a := &Admin{addr: addr, store: store, schemaVersion: wantSchema, nc: nc, gatherer: gatherer, log: log,
		mux: http.NewServeMux()}
	a.mux.Handle("GET /metrics", promhttp.HandlerFor(gatherer, promhttp.HandlerOpts{}))
	a.mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
	})
	a.mux.HandleFunc("GET /readyz", a.readyz)
	// Profiles, for measuring the daemon under load. The admin address is
	// loopback unless the operator chooses otherwise.
	a.mux.HandleFunc("GET /debug/pprof/", a.guarded(pprof.Index))
	a.mux.HandleFunc("GET /debug/pprof/profile", a.guarded(pprof.Profile))
	a.mux.HandleFunc("GET /debug/pprof/trace", a.guarded(pprof.Trace))
	return a
}

// AddReadiness adds a check /readyz runs: nil is ready, an error says why
// not. Call before Start.
func (a *Admin) AddReadiness(name string, check func() error) {
	if a.readiness == nil {
		a.readiness = map[string]func() error{}
	}
	a.readiness[name] = check
}

// Handle adds a route (for the configuration API and others).
func (a *Admin) Handle(pattern string, h http.Handler) { a.mux.Handle(pattern, h) }

// Start listens and serves in the background until Stop (or until ctx
// ends), which shuts the server down, waiting up to 5 s for requests in
// progress.
func (a *Admin) Start(ctx context.Context) error {
	run, done, err := a.StartInit(ctx)
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", a.addr)
	if err != nil {
		done()
		return fmt.Errorf("admin http on %s: %w", a.addr, err)
	}
	a.ln = ln
	if a.ops != nil {
		go a.ops.rates.run(run) // the overview's history, while the status page may ask
	}
	srv := &http.Server{Handler: a, ReadHeaderTimeout: 10 * time.Second}
	served := make(chan struct{})
	go func() {
		defer close(served)
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			a.log.Error().Err(err).Msg("admin http server")
		}
	}()
	go func() {
		defer done()
		<-run.Done()
		shutdown, cancel := context.WithTimeout(context.WithoutCancel(run), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(shutdown)
		<-served
	}()
	return nil
}

// Addr is the listening address (after Start).
func (a *Admin) Addr() string { return a.ln.Addr().String() }

func (a *Admin) readyz(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithTimeout(r.Context(), 2*time.Second)
	defer cancel()
	checks := map[string]string{}
	ready := true
	if err := a.store.Ping(ctx); err != nil {
		checks["postgres"], ready = postgresProblem(&a.log, "unreachable", err), false
	} else if v, err := a.store.SchemaVersion(ctx); err != nil {
		checks["postgres"], ready = postgresProblem(&a.log, "schema version unreadable", err), false
	} else if v != a.schemaVersion {
		checks["postgres"], ready = "schema not migrated", false
	} else {
		checks["postgres"] = "ok"
	}
	if a.nc.IsConnected() {
		checks["nats"] = "ok"
	} else {
		checks["nats"], ready = "not connected: "+a.nc.Status().String(), false
	}
	for name, check := range a.readiness {
		if err := check(); err != nil {
			checks[name], ready = err.Error(), false
		} else {
			checks[name] = "ok"
		}
	}
	if a.ops != nil && a.ops.durability != nil {
		checks["durability"] = durabilityLine(a.ops.durability())
	}
	status := http.StatusOK
	checks["status"] = "ready"
	if !ready {
		status, checks["status"] = http.StatusServiceUnavailable, "not ready"
	}
	writeJSON(w, status, checks)
}

// durabilityLine says on /readyz what an acknowledgement means, with the
// warning if any. It never makes the gateway unready: the server is every
// gateway's, so a 503 would take the whole fleet out of its load
// balancer at once, reads and status included, and help nothing; commits
// waiting for a synchronous standby are what the operator configured,
// and the line says so.
func durabilityLine(d *queengate.DurabilityStat) string {
	switch {
	case d == nil:
		return "not read yet"
	case d.Warning != "":
		return d.Level + ": " + d.Warning
	}
	return d.Level
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	if raw, ok := v.(wire.RawAnswer); ok {
		w.WriteHeader(status)
		_, _ = w.Write(append(raw, '\n'))
		return
	}
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

// guarded serves h only to requests the guard admits (all, before Mount
// or without a token): profiles expose the process's memory and must not
// be open when the operator API is not.
func (a *Admin) guarded(h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if a.guard != nil {
			if werr := a.guard(r); werr != nil {
				w.Header().Set("WWW-Authenticate", `Bearer realm="queengate"`)
				writeError(w, werr)
				return
			}
		}
		h(w, r)
	}
}

// Mount serves the operator API (docs/admin-api.md) on the admin HTTP
// address: the HTTP forms of its operations, and the status page; its
// token guards every route. Call it before Start.
func (a *Admin) Mount(o *Ops) {
	a.ops = o
	a.guard = func(r *http.Request) *queengate.Error { return o.Authorize(r.Header.Get("Authorization")) }
	a.MountTable(o)
	// The status page: static (no data in it), so it needs no token; its
	// requests to the API above carry the one typed into it.
	a.mux.HandleFunc("GET /{$}", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		w.Header().Set("Content-Security-Policy", "default-src 'self'; script-src 'unsafe-inline'; style-src 'unsafe-inline'")
		_, _ = w.Write(statusPage)
	})
}

// MountTable serves the HTTP forms of t's operations, the same entries
// the gateway serves on NATS (the operator API's, the consuming set's
// groups with their creation, seeks and deletes, the timer list), each guarded
// by the operator API's token. Call it after Mount and before Start.
func (a *Admin) MountTable(t gateway.Table) {
	for _, e := range t.Operations("", a.nc) {
		for _, form := range e.HTTP {
			a.mux.HandleFunc(form.Route, a.opsHandler(a.ops, form.Op))
		}
	}
}

// ServeHTTP serves the mux, and answers what it matches no route for (an
// unknown path: 404; a known path with another method: 405 with Allow) in
// the API's JSON error format rather than the mux's plain text.
// A path the mux would redirect (to its cleaned form, or to the same
// path with a slash added) is answered too: its redirect has an HTML
// body, and every answer here is JSON.
func (a *Admin) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	escaped := r.URL.EscapedPath()
	if cleanPath(escaped) != escaped {
		writeError(w, wire.BadInput("bad path %q: an empty, \".\" or \"..\" segment names nothing (a name is %s; a transactionId of dots goes escaped, %%2E)", wire.Clip(escaped), queengate.NameRule))
		return
	}
	h, pattern := a.mux.Handler(r)
	if i := strings.IndexByte(pattern, '/'); i >= 0 && pattern[i:] == escaped+"/" { // the mux's redirect to the subtree
		writeError(w, &queengate.Error{Code: queengate.CodeNotFound, Text: fmt.Sprintf("no such path: %s %s (did you mean %s/?)", wire.Clip(r.Method), wire.Clip(escaped), wire.Clip(escaped))})
		return
	}
	if pattern != "" {
		a.mux.ServeHTTP(w, r) // which sets the path values h would lack
		return
	}
	probe := &statusProbe{header: http.Header{}}
	h.ServeHTTP(probe, r)
	if allow := probe.header.Get("Allow"); probe.code == http.StatusMethodNotAllowed && allow != "" {
		w.Header().Set("Allow", allow)
		writeError(w, &queengate.Error{Code: queengate.CodeMethodNotAllowed, Text: fmt.Sprintf("%s %s: use %s", wire.Clip(r.Method), wire.Clip(r.URL.Path), allow)})
		return
	}
	writeError(w, &queengate.Error{Code: queengate.CodeNotFound, Text: fmt.Sprintf("no such path: %s %s (docs/admin-api.md lists the paths)", wire.Clip(r.Method), wire.Clip(r.URL.Path))})
}

// cleanPath is the path http.ServeMux serves for p (it redirects p
// there): p with "." and ".." segments resolved and repeated slashes
// joined, its trailing slash kept.
func cleanPath(p string) string {
	if p == "" || p[0] != '/' {
		p = "/" + p
	}
	clean := path.Clean(p)
	if strings.HasSuffix(p, "/") && clean != "/" {
		clean += "/"
	}
	return clean
}

// statusProbe keeps the status and headers the mux's own not-found or
// method-not-allowed handler would send, and drops its plain-text body.
type statusProbe struct {
	header http.Header
	code   int
}

func (p *statusProbe) Header() http.Header         { return p.header }
func (p *statusProbe) Write(b []byte) (int, error) { return len(b), nil }
func (p *statusProbe) WriteHeader(code int)        { p.code = code }

func (a *Admin) opsHandler(o *Ops, op func(*http.Request, []byte) (any, *queengate.Error)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if werr := o.Authorize(r.Header.Get("Authorization")); werr != nil {
			w.Header().Set("WWW-Authenticate", `Bearer realm="queengate"`)
			writeError(w, werr)
			return
		}
		body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, gateway.MaxOperatorBody))
		if err != nil {
			writeError(w, gateway.BodyTooLarge())
			return
		}
		v, werr := op(r, body)
		if werr != nil {
			if werr.Code >= 500 {
				a.log.Warn().Str("path", r.URL.Path).Str("error", werr.Text).Msg("operator request failed")
			}
			writeError(w, werr)
			return
		}
		writeJSON(w, http.StatusOK, v)
	}
}

// maxErrorMessage bounds a whole error message on the HTTP face.
const maxErrorMessage = 1024

//go:embed statuspage.html
var statusPage []byte

// writeError answers werr; its message is bounded, whatever input it
// quotes.
func writeError(w http.ResponseWriter, werr *queengate.Error) {
	if len(werr.Text) > maxErrorMessage {
		werr = &queengate.Error{Code: werr.Code, Text: wire.ClipTo(werr.Text, maxErrorMessage)}
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(werr.Code)
	_, _ = w.Write(append(wire.ErrorBody(werr), '\n'))
}

// MountTimers serves the timer operations' HTTP form, GET /timers, and
// refuses the other methods there: schedule and cancel are NATS only.
func (a *Admin) MountTimers(t gateway.Table) {
	a.MountTable(t)
	a.mux.HandleFunc("/timers", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Allow", "GET")
		writeError(w, &queengate.Error{Code: queengate.CodeMethodNotAllowed, Text: r.Method + " /timers: use GET (schedule and cancel go over NATS)"})
	})
}
