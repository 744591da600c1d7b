package server_test

import (
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"

	queengate "github.com/queengate/queengate"
	"github.com/queengate/queengate/consume"
	"github.com/queengate/queengate/gateway"
	"github.com/queengate/queengate/operator"
	"github.com/queengate/queengate/timers"
)

// servedByTheGateway are the APIs the gateway serves itself (the push
// endpoint) or publishes to (push answers), outside the endpoint sets.
var servedByTheGateway = []queengate.API{queengate.APIPush, queengate.APIPushAnswer, queengate.APIJetStream}

// endpointSets are the endpoints every gateway serves, as the sets give
// them under prefix.
func endpointSets(prefix string) []gateway.Endpoint {
	ops := operator.NewOps(operator.OpsConfig{}, nil, nil, nil)
	return slices.Concat(ops.Operations(prefix, nil), consume.New(nil).Operations(prefix, nil),
		timers.NewOps(nil, ops.AnswerBudget).Operations(prefix, nil))
}

// TestEveryAPIHasOneEndpointAndARow: each API a client calls is served by
// exactly one endpoint, every endpoint serves an API of subjects.go
// (none spells its subject by hand) on the HTTP routes subjects.go gives
// it, and each is documented under its template in docs/protocol.md or
// docs/admin-api.md.
func TestEveryAPIHasOneEndpointAndARow(t *testing.T) {
	t.Parallel()
	var docs strings.Builder
	for _, f := range []string{"../docs/protocol.md", "../docs/admin-api.md"} {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		docs.Write(b)
	}
	for _, p := range apiTableProblems(queengate.APIs, endpointSets(queengate.DefaultPrefix), docs.String()) {
		t.Error(p)
	}
}

// TestTheAPITableCheckCatchesPlantedFaults: an API without an endpoint,
// one with two, an endpoint spelling its subject by hand and an API
// without a row are each found.
func TestTheAPITableCheckCatchesPlantedFaults(t *testing.T) {
	t.Parallel()
	read, explain := queengate.APIRead, queengate.APIExplain
	docs := read.Template("queen") + " " + explain.Template("queen")
	s := queengate.Subjects{Prefix: "queen"}
	one := func(a queengate.API) gateway.Endpoint {
		e := gateway.Endpoint{Name: a.Verb, API: a}
		for _, r := range a.HTTP() {
			e.HTTP = append(e.HTTP, gateway.HTTPForm{Route: r})
		}
		return e
	}
	agree := gateway.WithSubjects(s, []gateway.Endpoint{one(read), one(explain)})
	if p := apiTableProblems([]queengate.API{read, explain}, agree, docs); len(p) != 0 {
		t.Fatalf("an agreeing table: %v", p)
	}
	for _, c := range []struct {
		name string
		eps  []gateway.Endpoint
		docs string
		want string
	}{
		{"no endpoint", gateway.WithSubjects(s, []gateway.Endpoint{one(read)}), docs, "queen.explain.<queue>.<partition> is served by 0"},
		{"two endpoints", gateway.WithSubjects(s, []gateway.Endpoint{one(read), one(explain), one(explain)}), docs, "served by 2"},
		{"a hand-spelt subject", append(slices.Clone(agree), gateway.Endpoint{Name: "x", Verb: "queen.x"}), docs, "by hand"},
		{"no row", agree, read.Template("queen"), "queen.explain.<queue>.<partition> has no row"},
		{"a route of another API", gateway.WithSubjects(s, []gateway.Endpoint{one(read),
			{Name: "explain", API: explain, HTTP: []gateway.HTTPForm{{Route: queengate.APIStatus.Route()}}}}), docs, "serves the HTTP routes"},
	} {
		if p := apiTableProblems([]queengate.API{read, explain}, c.eps, c.docs); !slices.ContainsFunc(p, func(s string) bool { return strings.Contains(s, c.want) }) {
			t.Errorf("%s: problems %q, want one saying %q", c.name, p, c.want)
		}
	}
}

// apiTableProblems checks apis against the endpoints serving them and
// the documents' text.
func apiTableProblems(apis []queengate.API, eps []gateway.Endpoint, docs string) []string {
	var problems []string
	for _, a := range apis {
		if !strings.Contains(docs, a.Template(queengate.DefaultPrefix)) {
			problems = append(problems, a.Template(queengate.DefaultPrefix)+" has no row in docs/protocol.md or docs/admin-api.md")
		}
		if slices.ContainsFunc(servedByTheGateway, a.Equal) {
			continue
		}
		if n := len(slices.DeleteFunc(slices.Clone(eps), func(e gateway.Endpoint) bool { return !e.API.Equal(a) })); n != 1 {
			problems = append(problems, fmt.Sprintf("%s is served by %d endpoints, want one", a.Template(queengate.DefaultPrefix), n))
		}
	}
	for _, e := range eps {
		if !slices.ContainsFunc(apis, e.API.Equal) || e.Verb != queengate.DefaultPrefix+"."+e.API.Verb {
			problems = append(problems, fmt.Sprintf("endpoint %s spells its subject %s by hand: give it its API from subjects.go", e.Name, e.Verb))
		}
		var routes []string
		for _, f := range e.HTTP {
			routes = append(routes, f.Route)
		}
		slices.Sort(routes)
		if !slices.Equal(routes, slices.Sorted(slices.Values(e.API.HTTP()))) {
			problems = append(problems, fmt.Sprintf("endpoint %s serves the HTTP routes %q; subjects.go gives its API %q", e.Name, routes, e.API.HTTP()))
		}
	}
	return problems
}

// TestEachPackageServesItsOwnSubjects: consume serves the consume.*
// subjects, timers the timer.* ones, and operator the operator API (all
// the rest), so that where a subject is served follows from its verb.
func TestEachPackageServesItsOwnSubjects(t *testing.T) {
	t.Parallel()
	ops := operator.NewOps(operator.OpsConfig{}, nil, nil, nil)
	sets := map[string][]gateway.Endpoint{"operator": ops.Operations(queengate.DefaultPrefix, nil),
		"consume": consume.New(nil).Operations(queengate.DefaultPrefix, nil),
		"timers":  timers.NewOps(nil, ops.AnswerBudget).Operations(queengate.DefaultPrefix, nil)}
	for _, p := range servingProblems(sets) {
		t.Error(p)
	}
	planted := map[string][]gateway.Endpoint{"operator": {{Name: "seek", API: queengate.APIGroupSeek}}}
	if p := servingProblems(planted); len(p) != 1 || !strings.Contains(p[0], "package consume") {
		t.Errorf("an operator endpoint serving a consume subject: problems %q, want one naming package consume", p)
	}
}

// servingProblems names each endpoint served by another package than its
// verb's.
func servingProblems(sets map[string][]gateway.Endpoint) []string {
	var problems []string
	for pkg, eps := range sets {
		for _, e := range eps {
			if owner := ownerOf(e.API); owner != pkg {
				problems = append(problems, fmt.Sprintf("package %s serves %s, a subject of package %s", pkg, e.API.Template(queengate.DefaultPrefix), owner))
			}
		}
	}
	return problems
}

func ownerOf(a queengate.API) string {
	switch {
	case strings.HasPrefix(a.Verb, "consume."):
		return "consume"
	case a.Verb == "timer" || strings.HasPrefix(a.Verb, "timer."):
		return "timers"
	}
	return "operator"
}
