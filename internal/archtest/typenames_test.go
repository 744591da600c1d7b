package archtest

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestTheContractAndModelShareNoTypeName: a type of the root package
// (the wire's form of a thing) and one of model (what the store is asked
// and answers) never have the same name, so that "where is X defined"
// has one answer. Deprecated names are left out: they go in a release.
func TestTheContractAndModelShareNoTypeName(t *testing.T) {
	t.Parallel()
	root, model := typeNames(t, "../.."), typeNames(t, "../../model")
	if !slices.Contains(root, "Delivery") || !slices.Contains(model, "LeasedMessage") || slices.Contains(root, "Answer") {
		t.Fatalf("the type names read are not the packages': root %q, model %q", root, model)
	}
	for _, name := range sharedNames(root, model) {
		t.Errorf("type %s is both queengate.%[1]s and model.%[1]s: name the store's form for what it is (docs/design.md, Words)", name)
	}
	if got := sharedNames([]string{"Delivery", "Message"}, []string{"LeasedMessage", "Delivery"}); !slices.Equal(got, []string{"Delivery"}) {
		t.Errorf("a planted shared name: %q, want [Delivery]", got)
	}
}

func sharedNames(a, b []string) []string {
	var shared []string
	for _, n := range a {
		if slices.Contains(b, n) {
			shared = append(shared, n)
		}
	}
	return shared
}

// typeNames are the exported types declared in dir's non-test files,
// but for those documented as deprecated.
func typeNames(t *testing.T, dir string) []string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, "*.go"))
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	fset := token.NewFileSet()
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		file, err := parser.ParseFile(fset, f, nil, parser.ParseComments)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range file.Decls {
			gen, ok := d.(*ast.GenDecl)
			if !ok || gen.Tok != token.TYPE {
				continue
			}
			for _, spec := range gen.Specs {
				ts := spec.(*ast.TypeSpec)
				doc := ts.Doc
				if doc == nil {
					doc = gen.Doc
				}
				if ts.Name.IsExported() && !strings.Contains(doc.Text(), "Deprecated:") {
					names = append(names, ts.Name.Name)
				}
			}
		}
	}
	if len(names) == 0 {
		t.Fatalf("no types found in %s", dir)
	}
	return names
}
