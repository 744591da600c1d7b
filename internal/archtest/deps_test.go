// Package archtest keeps the dependency direction of docs/design.md
// ("Packages") honest: cmd -> {operator, consume} -> gateway -> ingest;
// operator -> timers; ingest -> {dedup, tail}; consume -> tail; everything below the daemon speaks
// model; pgstore implements the stores in model's terms; and nothing but
// pgstore (with its consumer and internal packages) links pgx.
package archtest

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

const module = "github.com/queengate/queengate"

// arrows lists, per package, the packages of ours it may import directly:
// docs/design.md draws the same arrows. internal/startstop,
// internal/promreg and internal/wire are the internal packages production
// code may use (and server, internal/natsembed and internal/storewatch);
// internal/pgadmin, internal/pgcluster and internal/pgtest serve
// queengatetest; internal/ctl/... are queenctl's parts, which speak only
// the wire; the rest of internal/ is test harnesses and queenchaos's.
var arrows = map[string][]string{
	".":                       {}, // the wire contract and client, package queengate
	"consumer":                {"."},
	"model":                   {},
	"dedup":                   {},
	"tail":                    {"model"},
	"internal/promreg":        {},
	"pgstore":                 {"model", "pgstore/consumer", "pgstore/internal/pgwire", "pgstore/internal/readpool"},
	"pgstore/consumer":        {"model", "pgstore/internal/pgwire", "pgstore/internal/readpool"},
	"pgstore/internal/pgwire": {"model"},
	"ingest":                  {"dedup", "tail", "model", "internal/startstop", "internal/promreg"},
	"timers":                  {"model", "internal/startstop", "internal/promreg"},
	"retention":               {"model", "internal/startstop", "internal/promreg"},
	"routing":                 {".", "internal/promreg"},
	"internal/wire":           {".", "ingest", "model"},
	"gateway":                 {".", "ingest", "model", "routing", "internal/wire", "internal/promreg"},
	"consume":                 {".", "gateway", "tail", "model", "internal/wire", "internal/startstop", "internal/promreg"},
	"operator":                {".", "gateway", "ingest", "timers", "model", "internal/wire", "internal/startstop"},

	// Reads on standbys, and their freshness.
	"pgstore/internal/readpool": {"model"},

	// The gateway run in-process, and for users' tests.
	"internal/natsembed":  {},
	"internal/storewatch": {"internal/startstop"},
	"internal/pgadmin":    {},
	"server": {".", "gateway", "consume", "operator", "routing", "ingest", "timers", "retention", "model", "pgstore",
		"internal/startstop", "internal/natsembed", "internal/storewatch"},
	"queengatetest": {".", "server", "internal/pgadmin", "internal/pgcluster", "internal/pgtest"},
	// A private PostgreSQL, on a port found free.
	"internal/pgcluster": {"internal/freeport"},
	"internal/freeport":  {},

	// cmd/queenbench's packages: below the command, one way.
	"internal/bench":            {"dedup", "model"},
	"internal/bench/report":     {"internal/bench"},
	"internal/bench/proc":       {"internal/bench", "routing", "internal/freeport", "internal/pgadmin", "internal/pgcluster"},
	"internal/bench/target":     {".", "internal/bench", "internal/bench/proc", "model"},
	"internal/bench/sidebyside": {".", "consumer", "internal/bench", "internal/bench/proc", "internal/bench/report", "internal/bench/target"},

	// queenctl's parts.
	"internal/ctl/output":   {},
	"internal/ctl/duration": {},
	"internal/ctl/queueopt": {".", "internal/ctl/duration", "internal/ctl/output"},
	"internal/ctl/manifest": {".", "internal/ctl/output", "internal/ctl/queueopt"},
	"internal/ctl/admin":    {".", "internal/ctl/output", "internal/ctl/queueopt"},
	"internal/ctl/tables":   {".", "internal/ctl/admin", "internal/ctl/duration", "internal/ctl/output", "internal/ctl/queueopt"},
	"internal/ctl/consume":  {".", "consumer", "internal/ctl/admin", "internal/ctl/output"},
	"internal/ctl/batch":    {"."},
	"internal/ctl/cli":      {},
}

// mayLinkPgx are the packages that may link pgx besides pgstore and its
// own (isStore), which implement the stores in model's terms: what wires
// pgstore into a gateway (server, queengatetest), and the making of
// throwaway databases and servers.
var mayLinkPgx = map[string]bool{"pgstore": true, "server": true, "queengatetest": true, "internal/pgadmin": true, "internal/pgcluster": true}

// tools are the commands that need the shard mapping but not the server:
// they import routing, never gateway (docs/design.md).
var tools = []string{"cmd/queenbench", "cmd/queenchaos"}

// ourPath is the import path of one of our packages ("." the module's
// root).
func ourPath(pkg string) string {
	if pkg == "." {
		return module
	}
	return module + "/" + pkg
}

// ourPackage names an import path of ours as arrows does.
func ourPackage(path string) (string, bool) {
	if path == module {
		return ".", true
	}
	return strings.CutPrefix(path, module+"/")
}

// reachable is pkg's arrows followed to the end.
func reachable(pkg string) map[string]bool {
	seen := map[string]bool{pkg: true}
	for todo := []string{pkg}; len(todo) > 0; todo = todo[1:] {
		for _, next := range arrows[todo[0]] {
			if !seen[next] {
				seen[next] = true
				todo = append(todo, next)
			}
		}
	}
	return seen
}

func goList(t *testing.T, args ...string) []string {
	t.Helper()
	out, err := exec.Command("go", append([]string{"list"}, args...)...).CombinedOutput()
	if err != nil {
		t.Fatalf("go list %v: %v\n%s", args, err, out)
	}
	return strings.Fields(string(out))
}

func TestDependencyDirection(t *testing.T) {
	t.Parallel()
	for pkg, ok := range arrows {
		if _, err := os.Stat(filepath.Join("..", "..", pkg)); errors.Is(err, os.ErrNotExist) {
			continue // not written yet
		}
		path := ourPath(pkg)
		for _, imp := range goList(t, "-f", `{{join .Imports " "}}`, path) {
			if rest, ours := ourPackage(imp); ours && !slices.Contains(ok, rest) {
				t.Errorf("%s imports %s; docs/design.md draws only %v", pkg, rest, ok)
			}
		}
		within := reachable(pkg)
		for _, dep := range goList(t, "-deps", path) {
			if rest, ours := ourPackage(dep); ours && !within[rest] {
				t.Errorf("%s depends on %s, which its arrows do not reach", pkg, rest)
			}
			// The benchmark's packages measure PostgreSQL directly, as cmd/ tools may.
			if !isStore(pkg) && !mayLinkPgx[pkg] && !strings.HasPrefix(pkg, "internal/bench") && strings.HasPrefix(dep, "github.com/jackc/pgx") {
				t.Errorf("%s links %s: only pgstore may (it implements the stores in model's terms), and what wires it in", pkg, dep)
			}
		}
	}
}

// isStore says whether pkg is pgstore or one of its packages, the only
// library packages that may link pgx.
func isStore(pkg string) bool { return pkg == "pgstore" || strings.HasPrefix(pkg, "pgstore/") }

func TestOnlyPgstoreImportsPgx(t *testing.T) {
	t.Parallel()
	out, err := exec.Command("go", "list", "-f", `{{.ImportPath}} {{join .Imports " "}}`, module+"/...").CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		fields := strings.Fields(line)
		pkg := strings.TrimPrefix(fields[0], module+"/")
		if isStore(pkg) || strings.HasPrefix(pkg, "internal/") || strings.HasPrefix(pkg, "cmd/") {
			continue // the store, test harnesses, and tools that measure PostgreSQL directly
		}
		for _, imp := range fields[1:] {
			if strings.HasPrefix(imp, "github.com/jackc/pgx") {
				t.Errorf("%s imports %s: only pgstore may", pkg, imp)
			}
		}
	}
}

func TestToolsDoNotLinkTheGateway(t *testing.T) {
	t.Parallel()
	for _, tool := range tools {
		for _, dep := range goList(t, "-deps", ourPath(tool)) {
			if dep == ourPath("gateway") {
				t.Errorf("%s links gateway: the shard mapping is in routing", tool)
			}
		}
	}
}
