package operator_test

import (
	"context"
	"fmt"
	"net"
	"net/url"
	"strconv"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"

	queengate "github.com/queengate/queengate"
	"github.com/queengate/queengate/ingest"
	"github.com/queengate/queengate/internal/gatewaytest"
	"github.com/queengate/queengate/internal/obstest"
	"github.com/queengate/queengate/internal/pgtest"
	"github.com/queengate/queengate/operator"
	"github.com/queengate/queengate/pgstore"
)

// TestPostgresProblemsCarryNoConnectionDetails: /gatewaytest.Readyz (open to anyone)
// and the status answer say what is wrong with PostgreSQL in a clean
// reason class, never the driver's text with its address, port, user
// and database; the gateway's log has that detail.
func TestPostgresProblemsCarryNoConnectionDetails(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closedPort := strconv.Itoa(ln.Addr().(*net.TCPAddr).Port)
	ln.Close()
	noDB, err := url.Parse(e.PGURL)
	if err != nil {
		t.Fatal(err)
	}
	noDB.Path = "/nosuchdb_pgproblem"
	ing, err := ingest.New(e.Store, ingest.Config{}, zerolog.Nop(), nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ name, url, want, detail string }{
		{"closed port", "postgres://postgres@127.0.0.1:" + closedPort + "/queengate", "unreachable: connection refused", closedPort},
		{"no such database", noDB.String(), "unreachable: no such database", "nosuchdb_pgproblem"},
	} {
		store := pgtest.Store(t, c.url)
		logged := &obstest.LogBuffer{}
		admin := operator.NewAdmin("127.0.0.1:0", store, pgstore.LatestVersion(), e.Client, prometheus.NewRegistry(), zerolog.New(logged))
		if err := admin.Start(context.Background()); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(admin.Stop)
		code, body := gatewaytest.Readyz(t, admin.Addr())
		if code != 503 || body["postgres"] != c.want {
			t.Errorf("%s: /gatewaytest.Readyz = %d %v, want 503 with postgres %q", c.name, code, body, c.want)
		}
		if logs := logged.Lines(t, "PostgreSQL: unreachable"); len(logs) == 0 || !strings.Contains(fmt.Sprint(logs[0]["error"]), c.detail) {
			t.Errorf("%s: the log lacks the detail %q: %v", c.name, c.detail, logs)
		}
		ops := operator.NewOps(operator.OpsConfig{WantSchema: pgstore.LatestVersion()}, store, ing, e.Client)
		st, werr := ops.Status(context.Background())
		if werr != nil || st.(queengate.StatusAnswer).Postgres != c.want {
			t.Errorf("%s: status = %+v %v, want postgres %q", c.name, st, werr, c.want)
		}
	}
}
