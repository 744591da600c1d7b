// Package archtest keeps the dependency direction of docs/design.md
// ("Packages") honest: cmd -> gateway -> ingest -> {dedup, pgstore}, and the leaves import
// nothing of ours.
package archtest

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

const module = "github.com/queengate/queengate"

// allowed lists, per package, the packages of ours it may depend on
// (directly or not). internal/ helpers are test-only and never allowed in
// production packages.
var allowed = map[string][]string{
	"pgstore": {},
	"dedup":   {},
	"ingest":  {"dedup", "pgstore"},
	"timers":  {"pgstore"},
	"gateway": {"ingest", "dedup", "pgstore", "timers"},
}

func TestDependencyDirection(t *testing.T) {
	t.Parallel()
	for pkg, ok := range allowed {
		path := module + "/" + pkg
		if _, err := os.Stat(filepath.Join("..", "..", pkg)); errors.Is(err, os.ErrNotExist) {
			continue // not written yet
		}
		out, err := exec.Command("go", "list", "-deps", path).CombinedOutput()
		if err != nil {
			t.Fatalf("go list -deps %s: %v\n%s", path, err, out)
		}
		permitted := map[string]bool{path: true}
		for _, p := range ok {
			permitted[module+"/"+p] = true
		}
		for _, dep := range strings.Fields(string(out)) {
			if strings.HasPrefix(dep, module+"/") && !permitted[dep] {
				t.Errorf("%s depends on %s; docs/design.md allows only %v", pkg, strings.TrimPrefix(dep, module+"/"), ok)
			}
		}
	}
}

func TestOnlyPgstoreImportsPgx(t *testing.T) {
	t.Parallel()
	out, err := exec.Command("go", "list", "-f", `{{.ImportPath}} {{join .Imports " "}}`, module+"/...").CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		fields := strings.Fields(line)
		pkg := strings.TrimPrefix(fields[0], module+"/")
		if pkg == "pgstore" || strings.HasPrefix(pkg, "internal/") || strings.HasPrefix(pkg, "cmd/") {
			continue // the store, test harnesses, and tools that measure PostgreSQL directly
		}
		for _, imp := range fields[1:] {
			if strings.HasPrefix(imp, "github.com/jackc/pgx") {
				t.Errorf("%s imports %s: only pgstore may", pkg, imp)
			}
		}
	}
}
