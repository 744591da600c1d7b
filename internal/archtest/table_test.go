package archtest

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/queengate/queengate/internal/docwords"
)

// The map is docs/design.md's package table: a row per package, its
// name in the first cell, and in the last the packages of ours it
// imports, each in backquotes and separated by commas, or "nothing".
// The root package is `queengate`.
const (
	designDoc   = "../../docs/design.md"
	readme      = "../../README.md"
	tableHeader = "| package | owns | imports, of ours |"
)

// readPackageTable reads the map: each package's imports by its row.
func readPackageTable(t *testing.T) map[string][]string {
	t.Helper()
	text, err := os.ReadFile(designDoc)
	if err != nil {
		t.Fatal(err)
	}
	table, err := parsePackageTable(string(text))
	if err != nil {
		t.Fatalf("docs/design.md: %v", err)
	}
	return table
}

var (
	firstName = regexp.MustCompile("^`([^`]+)`")
	importRe  = regexp.MustCompile("^`([^`]+)`$")
)

// parsePackageTable parses the table under tableHeader; a row it cannot
// read is an error naming it, so that the map is never read loosely.
func parsePackageTable(doc string) (map[string][]string, error) {
	_, after, ok := strings.Cut(doc, tableHeader+"\n")
	if !ok {
		return nil, fmt.Errorf("no package table (a table headed %q)", tableHeader)
	}
	table := map[string][]string{}
	for i, line := range strings.Split(after, "\n") {
		if !strings.HasPrefix(line, "|") {
			break
		}
		if i == 0 {
			continue // the header's rule
		}
		name, imports, err := parseRow(line)
		if err != nil {
			return nil, err
		}
		if _, twice := table[name]; twice {
			return nil, fmt.Errorf("package %s has two rows", name)
		}
		table[name] = imports
	}
	return table, nil
}

// parseRow reads one row of the package table.
func parseRow(line string) (name string, imports []string, err error) {
	cells := strings.Split(strings.Trim(line, "| "), " | ")
	m := firstName.FindStringSubmatch(cells[0])
	if len(cells) < 3 || m == nil {
		return "", nil, fmt.Errorf("row %q: want | `package` | owns | imports |", line)
	}
	last := cells[len(cells)-1]
	if last == "nothing" {
		return m[1], []string{}, nil
	}
	for _, item := range strings.Split(last, ", ") {
		im := importRe.FindStringSubmatch(item)
		if im == nil {
			return "", nil, fmt.Errorf("row of %s: imports cell %q: want `package`, `package`, … or nothing", m[1], last)
		}
		imports = append(imports, im[1])
	}
	return m[1], imports, nil
}

// ourImports are every package's direct imports of ours, tests aside.
func ourImports(t *testing.T) map[string][]string {
	t.Helper()
	actual := map[string][]string{}
	out, err := exec.Command("go", "list", "-f", `{{.ImportPath}} {{join .Imports " "}}`, module+"/...").CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		fields := strings.Fields(line)
		pkg, _ := ourPackage(fields[0])
		actual[pkg] = []string{}
		for _, imp := range fields[1:] {
			if ours, ok := ourPackage(imp); ok {
				actual[pkg] = append(actual[pkg], ours)
			}
		}
	}
	return actual
}

// tableProblems compares the map with the code's imports, both ways.
func tableProblems(table, actual map[string][]string) []string {
	var problems []string
	for _, pkg := range sortedKeys(actual) {
		row, ok := table[pkg]
		if !ok {
			problems = append(problems, fmt.Sprintf("package %s has no row in docs/design.md's package table", pkg))
			continue
		}
		for _, imp := range actual[pkg] {
			if !slices.Contains(row, imp) {
				problems = append(problems, fmt.Sprintf("%s imports %s; its row in docs/design.md does not say so", pkg, imp))
			}
		}
		for _, imp := range row {
			if !slices.Contains(actual[pkg], imp) {
				problems = append(problems, fmt.Sprintf("%s's row in docs/design.md says it imports %s; it does not", pkg, imp))
			}
		}
	}
	for _, pkg := range sortedKeys(table) {
		if _, ok := actual[pkg]; !ok {
			problems = append(problems, fmt.Sprintf("docs/design.md's package table has a row for %s, which is no package", pkg))
		}
	}
	return problems
}

func sortedKeys(m map[string][]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// readLayout reads the paths of README's Layout table.
func readLayout(t *testing.T) []string {
	t.Helper()
	text, err := os.ReadFile(readme)
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(text), "\n## Layout\n")
	if !ok {
		t.Fatal("README.md has no Layout section")
	}
	var paths []string
	for _, line := range strings.Split(section, "\n") {
		if strings.HasPrefix(line, "## ") {
			break
		}
		if m := firstName.FindStringSubmatch(strings.TrimPrefix(line, "| ")); m != nil {
			paths = append(paths, m[1])
		}
	}
	return paths
}

// layoutProblems checks README's layout against the map: a directory it
// names that holds Go code is a package of the map or the parent of
// some; every package outside internal/ is under a path it names (the
// root package is its "*.go").
func layoutProblems(layout []string, table map[string][]string, holdsGo func(dir string) bool) []string {
	var problems []string
	var dirs []string
	for _, path := range layout {
		dir, isDir := strings.CutSuffix(path, "/")
		switch {
		case path == "*.go":
			dirs = append(dirs, root)
		case !isDir:
		case table[dir] != nil || hasPackageUnder(table, dir):
			dirs = append(dirs, dir)
		case holdsGo(dir):
			problems = append(problems, fmt.Sprintf("README's layout names %s, which is no package of docs/design.md's table", path))
		}
	}
	for _, pkg := range sortedKeys(table) {
		if strings.HasPrefix(pkg, "internal/") {
			continue
		}
		if !slices.ContainsFunc(dirs, func(d string) bool { return pkg == d || strings.HasPrefix(pkg, d+"/") }) {
			problems = append(problems, fmt.Sprintf("package %s is in docs/design.md's table but under no path of README's layout", pkg))
		}
	}
	return problems
}

func hasPackageUnder(table map[string][]string, dir string) bool {
	for pkg := range table {
		if strings.HasPrefix(pkg, dir+"/") {
			return true
		}
	}
	return false
}

// holdsGo says the directory dir of the module holds Go files.
func holdsGo(dir string) bool {
	matches, _ := filepath.Glob(filepath.Join("..", "..", dir, "*.go"))
	return len(matches) > 0
}

func TestREADMELayoutFollowsTheMap(t *testing.T) {
	t.Parallel()
	for _, problem := range layoutProblems(readLayout(t), readPackageTable(t), holdsGo) {
		t.Error(problem)
	}
}

// TestTheMapChecksCatchPlantedFaults: each check fails on a fault planted
// in a map and a code base of three packages that otherwise agree.
func TestTheMapChecksCatchPlantedFaults(t *testing.T) {
	t.Parallel()
	doc := "intro\n\n" + tableHeader + "\n|---|---|---|\n" +
		"| `queengate` (the module's root) | the contract | nothing |\n" +
		"| `gateway` | the face | `ingest`, `queengate` |\n" +
		"| `ingest` | shards | nothing |\n\nafter\n"
	table, err := parsePackageTable(doc)
	if err != nil {
		t.Fatal(err)
	}
	agree := map[string][]string{"queengate": {}, "gateway": {"queengate", "ingest"}, "ingest": {}}
	if p := tableProblems(table, agree); len(p) != 0 {
		t.Fatalf("an agreeing map: %v", p)
	}
	planted := []struct {
		name   string
		actual map[string][]string
		want   string
	}{
		{"an import the row leaves out", map[string][]string{"queengate": {}, "gateway": {"queengate", "ingest"}, "ingest": {"gateway"}}, "ingest imports gateway"},
		{"an import the row gives but the code has not", map[string][]string{"queengate": {}, "gateway": {"queengate"}, "ingest": {}}, "says it imports ingest"},
		{"a package without a row", map[string][]string{"queengate": {}, "gateway": {"queengate", "ingest"}, "ingest": {}, "tail": {}}, "tail has no row"},
		{"a row without a package", map[string][]string{"queengate": {}, "gateway": {"queengate"}}, "a row for ingest"},
	}
	for _, c := range planted {
		if p := tableProblems(table, c.actual); !slices.ContainsFunc(p, func(s string) bool { return strings.Contains(s, c.want) }) {
			t.Errorf("%s: problems %q, want one saying %q", c.name, p, c.want)
		}
	}
	for _, bad := range []string{
		tableHeader + "\n|---|---|---|\n| `gateway` | the face | the root package |\n",
		tableHeader + "\n|---|---|---|\n| `gateway` | the face | nothing |\n| `gateway` | again | nothing |\n",
	} {
		if _, err := parsePackageTable(bad); err == nil {
			t.Errorf("a table read loosely: %q", bad)
		}
	}
	noGo := func(string) bool { return false }
	someGo := func(dir string) bool { return dir == "stale" }
	if p := layoutProblems([]string{"*.go", "gateway/", "ingest/"}, table, noGo); len(p) != 0 {
		t.Errorf("an agreeing layout: %v", p)
	}
	if p := layoutProblems([]string{"*.go", "gateway/", "ingest/", "stale/"}, table, someGo); len(p) != 1 || !strings.Contains(p[0], "stale/") {
		t.Errorf("a layout row of no package: %v", p)
	}
	if p := layoutProblems([]string{"*.go", "gateway/"}, table, noGo); len(p) != 1 || !strings.Contains(p[0], "package ingest") {
		t.Errorf("a package the layout leaves out: %v", p)
	}
}

// TestPackageNamesUseTheProjectsWords: no package is named with a word
// docs/design.md's Words retire.
func TestPackageNamesUseTheProjectsWords(t *testing.T) {
	t.Parallel()
	doc, err := os.ReadFile(designDoc)
	if err != nil {
		t.Fatal(err)
	}
	retired, err := docwords.Retired(string(doc))
	if err != nil {
		t.Fatal(err)
	}
	for _, pkg := range sortedKeys(readPackageTable(t)) {
		if used := docwords.Used(strings.NewReplacer("/", " ", "_", " ").Replace(pkg), retired); len(used) > 0 {
			t.Errorf("package %s is named with %v (docs/design.md, Words)", pkg, used)
		}
	}
}

// jsonTagExceptions are the JSON names of formats not ours: JetStream's
// error answer, and the log fields a verifier reads (zerolog's style).
var jsonTagExceptions = []string{"err_code", "message_ids"}

// TestJSONNamesAreCamelCase: every JSON name our structs give (the wire,
// and the tools' reports) is camelCase, as docs/protocol.md's are.
func TestJSONNamesAreCamelCase(t *testing.T) {
	t.Parallel()
	tag := regexp.MustCompile("json:\"([^\",]+)")
	err := filepath.WalkDir("../..", func(path string, d os.DirEntry, err error) error {
		switch {
		case err != nil:
			return err
		case d.IsDir() && (d.Name() == "node_modules" || strings.HasPrefix(d.Name(), ".")) && path != "../..":
			return filepath.SkipDir
		case d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go"):
			return nil
		}
		src, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		for _, m := range tag.FindAllStringSubmatch(string(src), -1) {
			if strings.Contains(m[1], "_") && !slices.Contains(jsonTagExceptions, m[1]) {
				t.Errorf("%s: JSON name %q: write it camelCase", path, m[1])
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
