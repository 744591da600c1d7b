package queengate_test

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	queengate "github.com/queengate/queengate"
)

// notCalledByOurClients are APIs no client of this repository calls, and
// why.
var notCalledByOurClients = map[string]string{
	queengate.APIJetStream.Verb: "JetStream client libraries publish there, as they would to a stream",
}

// TestEveryAPIHasAClientCall: for each API, the Client, queenctl or
// another tool of the repository builds its subject (through the
// Subjects method that fills its template), so none is served and
// documented without a way to call it.
func TestEveryAPIHasAClientCall(t *testing.T) {
	t.Parallel()
	called := map[string]bool{}
	for _, dir := range []string{".", "cmd/queenctl", "internal/ctl/admin", "internal/ctl/consume"} {
		for name := range selectorCalls(t, dir) {
			called[name] = true
		}
	}
	for _, p := range uncalledAPIs(queengate.APIs, called) {
		t.Error(p)
	}
	// A planted fault: without the calls of Read, its API is named.
	delete(called, "Read")
	if p := uncalledAPIs(queengate.APIs, called); len(p) != 1 || !strings.Contains(p[0], queengate.APIRead.Template(queengate.DefaultPrefix)) {
		t.Errorf("no call of Read: problems %q, want one naming the read API", p)
	}
}

// uncalledAPIs names the APIs whose Subjects method is not in called.
func uncalledAPIs(apis []queengate.API, called map[string]bool) []string {
	builders := subjectBuilders()
	var problems []string
	for _, a := range apis {
		if _, ok := notCalledByOurClients[a.Verb]; ok {
			continue
		}
		if !slices.ContainsFunc(builders[a.Verb], func(m string) bool { return called[m] }) {
			problems = append(problems, fmt.Sprintf("%s has no client call (Subjects methods %q)", a.Template(queengate.DefaultPrefix), builders[a.Verb]))
		}
	}
	return problems
}

// subjectBuilders maps each API's verb to the Subjects methods that
// build its subjects, found by calling every method that takes names.
func subjectBuilders() map[string][]string {
	s := queengate.Subjects{Prefix: "p"}
	v := reflect.ValueOf(s)
	out := map[string][]string{}
	for i := range v.NumMethod() {
		m := v.Type().Method(i)
		var args []reflect.Value
		var names []string
		for j := range m.Type.NumIn() - 1 {
			if m.Type.In(j+1).Kind() != reflect.String {
				args = nil
				break
			}
			names = append(names, fmt.Sprintf("n%d", j))
			args = append(args, reflect.ValueOf(names[j]))
		}
		if len(args) != m.Type.NumIn()-1 || m.Type.NumOut() != 1 {
			continue
		}
		built := v.Method(i).Call(args)[0].String()
		verb := ""
		for _, a := range queengate.APIs {
			if built == strings.Join(append([]string{s.Verb(a)}, names...), ".") && len(a.Verb) > len(verb) {
				verb = a.Verb
			}
		}
		if verb != "" {
			out[verb] = append(out[verb], m.Name)
		}
	}
	return out
}

// selectorCalls are the methods of a Subjects value named in dir's Go
// files (called, or taken as queengate.Subjects.Name), but for the tests
// and subjects.go itself: x.Name where x is queengate.Subjects, s, or
// ends in "subjects".
func selectorCalls(t *testing.T, dir string) map[string]bool {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, "*.go"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no Go files in %s: %v", dir, err)
	}
	calls := map[string]bool{}
	fset := token.NewFileSet()
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") || f == "subjects.go" {
			continue
		}
		src, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		file, err := parser.ParseFile(fset, f, src, 0)
		if err != nil {
			t.Fatal(err)
		}
		ast.Inspect(file, func(n ast.Node) bool {
			if sel, ok := n.(*ast.SelectorExpr); ok && subjectsValue(src, fset, sel.X) {
				calls[sel.Sel.Name] = true
			}
			return true
		})
	}
	return calls
}

// subjectsValue reports whether x reads as a Subjects value or type.
func subjectsValue(src []byte, fset *token.FileSet, x ast.Expr) bool {
	text := string(src[fset.Position(x.Pos()).Offset:fset.Position(x.End()).Offset])
	return text == "s" || text == "queengate.Subjects" || strings.HasSuffix(strings.ToLower(text), "subjects")
}
