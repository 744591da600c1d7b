package server_test

import (
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/queengate/queengate/internal/docwords"
	"github.com/queengate/queengate/internal/pgtest"
	"github.com/queengate/queengate/server"
)

// descFields reads a metric's name and help out of its Desc's String(),
// the one way client_golang shows them.
var descFields = regexp.MustCompile(`^Desc\{fqName: ("(?:[^"\\]|\\.)*"), help: ("(?:[^"\\]|\\.)*")`)

// TestMetricsUseTheProjectsWords: no metric a gateway registers has a
// word docs/design.md's Words retire in its name or its help.
func TestMetricsUseTheProjectsWords(t *testing.T) {
	t.Parallel()
	doc, err := os.ReadFile("../docs/design.md")
	if err != nil {
		t.Fatal(err)
	}
	retired, err := docwords.Retired(string(doc))
	if err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	start(t, server.Config{PGURL: pgtest.NewDB(t), EmbeddedNATS: server.EmbeddedNATS{Port: -1},
		AdminAddr: "127.0.0.1:0", Registry: reg})
	descs := make(chan *prometheus.Desc)
	go func() {
		reg.Describe(descs)
		close(descs)
	}()
	n := 0
	for d := range descs {
		m := descFields.FindStringSubmatch(d.String())
		if m == nil {
			t.Fatalf("cannot read %s", d)
		}
		name, _ := strconv.Unquote(m[1])
		help, _ := strconv.Unquote(m[2])
		if used := docwords.Used(strings.ReplaceAll(name, "_", " "), retired); len(used) > 0 {
			t.Errorf("metric %s is named with %v (docs/design.md, Words)", name, used)
		}
		if used := docwords.Used(help, retired); len(used) > 0 {
			t.Errorf("metric %s's help %q uses %v (docs/design.md, Words)", name, help, used)
		}
		n++
	}
	if n < 50 {
		t.Errorf("%d metrics described: the gateway registers more", n)
	}
}
