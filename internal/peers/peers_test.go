package peers_test

import (
	"os"
	"strings"
	"testing"

	queengate "github.com/queengate/queengate"
	"github.com/queengate/queengate/internal/peers"
)

// TestEverySubjectIsDocumented: docs/protocol.md writes each subject for
// the operators who grant NATS permissions, and none is also a client's.
func TestEverySubjectIsDocumented(t *testing.T) {
	t.Parallel()
	doc, err := os.ReadFile("../../docs/protocol.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range peers.APIs {
		template := a.Template(queengate.DefaultPrefix)
		if !strings.Contains(string(doc), "`"+template+"`") {
			t.Errorf("docs/protocol.md does not write `%s`", template)
		}
		for _, c := range queengate.APIs {
			if c.Equal(a) {
				t.Errorf("%s is both a client's API and between gateways", template)
			}
		}
	}
}

// TestSubjectFillsTheTemplate: a subject is its template with the names
// filled in, in order.
func TestSubjectFillsTheTemplate(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		a     queengate.API
		names []string
	}{
		{peers.Committed, []string{"orders"}},
		{peers.GroupDeleted, []string{"orders", "billing"}},
		{peers.Shard, []string{"7", "orders", "eu"}},
		{peers.Heartbeat, nil},
	} {
		want := c.a.Template("acme.queen")
		for i, n := range c.a.Names {
			want = strings.Replace(want, n, c.names[i], 1)
		}
		if got := peers.Subject("acme.queen", c.a, c.names...); got != want {
			t.Errorf("%s: %s, want %s", c.a.Verb, got, want)
		}
	}
}
