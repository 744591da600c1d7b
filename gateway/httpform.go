package gateway

import (
	"net/http"
	"net/url"
	"slices"
	"strings"

	"github.com/nats-io/nats.go"

	queengate "github.com/queengate/queengate"
	"github.com/queengate/queengate/internal/wire"
)

// An HTTPForm is an operation's route on the admin HTTP server
// (docs/admin-api.md), beside its NATS subject: one Endpoint carries
// both. The admin server authorizes every route with the admin token,
// bounds its body to MaxOperatorBody and answers errors in the API's JSON
// format.
type HTTPForm struct {
	// Route is the method and path pattern, as http.ServeMux takes them:
	// "GET /queues/{queue}".
	Route string
	// Op turns the path values, URL parameters and body into the
	// operation's input and carries it out, as Endpoint.Op does a NATS
	// request's subject and body.
	Op func(r *http.Request, body []byte) (any, *queengate.Error)
}

// A Table is an EndpointSet whose operations can be listed without
// serving them, so that the admin HTTP server mounts the HTTP forms of
// the very entries the gateway serves on NATS. The answers fit nc's max
// payload; prefix starts the verbs (unused on HTTP).
type Table interface {
	Operations(prefix string, nc *nats.Conn) []Endpoint
}

// PathForm is the HTTP form on route of an operation its path names
// whole: it takes no URL parameters (noParameters), and op reads the
// path values.
func PathForm(route string, op func(r *http.Request, body []byte) (any, *queengate.Error)) HTTPForm {
	return HTTPForm{Route: route, Op: func(r *http.Request, body []byte) (any, *queengate.Error) {
		if werr := noParameters(r); werr != nil {
			return nil, werr
		}
		return op(r, body)
	}}
}

// noParameters refuses a request with URL parameters: a path that takes
// none says so rather than ignoring a misspelt one.
func noParameters(r *http.Request) *queengate.Error {
	for name := range r.URL.Query() {
		return wire.BadInput("unknown parameter %q: %s takes no parameters", wire.Clip(name), r.Pattern[strings.IndexByte(r.Pattern, ' ')+1:])
	}
	return nil
}

// OnlyParameters refuses URL parameters other than those named, and any
// given twice.
func OnlyParameters(q url.Values, path string, names ...string) *queengate.Error {
	for name, vals := range q {
		switch {
		case !slices.Contains(names, name):
			return wire.BadInput("unknown parameter %q: %s takes %s", wire.Excerpt([]byte(name)), path, wire.JoinAnd(names))
		case len(vals) != 1:
			return wire.BadInput("%s is given %d times: give it once", wire.Excerpt([]byte(name)), len(vals))
		}
	}
	return nil
}
