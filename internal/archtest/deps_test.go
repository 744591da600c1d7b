// Package archtest keeps docs/design.md's map of the packages
// ("Packages") the map of the code (table.go reads it): every package
// has one row there and imports, of ours, exactly what its row says; the
// dependencies point one way (cmd -> {operator, consume} -> gateway ->
// ingest; everything below the daemon speaks model); nothing but pgstore
// (with its consumer and internal packages) and what wires it in links
// pgx; and README's layout names only packages of the map.
package archtest

import (
	"os/exec"
	"strings"
	"testing"
)

const module = "github.com/queengate/queengate"

// mayLinkPgx are the packages that may link pgx besides pgstore and its
// own (isStore), which implement the stores in model's terms: what wires
// pgstore into a gateway (server, queengatetest), and the making of
// throwaway databases and servers.
var mayLinkPgx = map[string]bool{"pgstore": true, "server": true, "queengatetest": true, "internal/pgadmin": true, "internal/pgcluster": true}

// tools are the commands that need the shard mapping but not the server:
// they import routing, never gateway (docs/design.md).
var tools = []string{"cmd/queenbench", "cmd/queenchaos"}

// root names the module's root package in docs/design.md's table.
const root = "queengate"

// ourPath is the import path of one of our packages.
func ourPath(pkg string) string {
	if pkg == root {
		return module
	}
	return module + "/" + pkg
}

// ourPackage names an import path of ours as docs/design.md's table does.
func ourPackage(path string) (string, bool) {
	if path == module {
		return root, true
	}
	return strings.CutPrefix(path, module+"/")
}

func goList(t *testing.T, args ...string) []string {
	t.Helper()
	out, err := exec.Command("go", append([]string{"list"}, args...)...).CombinedOutput()
	if err != nil {
		t.Fatalf("go list %v: %v\n%s", args, err, out)
	}
	return strings.Fields(string(out))
}

// TestDependencyDirection: every package imports, of ours, exactly what
// its row in docs/design.md's table says, and nothing but the store and
// what wires it in links pgx.
func TestDependencyDirection(t *testing.T) {
	t.Parallel()
	table := readPackageTable(t)
	for _, problem := range tableProblems(table, ourImports(t)) {
		t.Error(problem)
	}
	for pkg := range table {
		if isStore(pkg) || mayLinkPgx[pkg] || strings.HasPrefix(pkg, "internal/") || strings.HasPrefix(pkg, "cmd/") {
			continue // the store, what wires it in, harnesses, and tools that measure PostgreSQL directly
		}
		for _, dep := range goList(t, "-deps", ourPath(pkg)) {
			if strings.HasPrefix(dep, "github.com/jackc/pgx") {
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
