package sidebyside

import (
	"bytes"
	"context"
	"maps"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/queengate/queengate/internal/bench"
)

// TestReadPathsAddUpOverGateways: the reads each path served are summed
// over the gateways' /metrics, other series ignored, and the report
// names the mode and every path.
func TestReadPathsAddUpOverGateways(t *testing.T) {
	t.Parallel()
	metrics := []string{
		"# TYPE queengate_pg_read_pool_reads_total counter\n" +
			`queengate_pg_read_pool_reads_total{path="standby"} 40` + "\n" +
			`queengate_pg_read_pool_reads_total{path="standby_after_wait"} 2` + "\n" +
			`queengate_pg_read_pool_reads_total{path="primary_standby_behind"} 1` + "\n" +
			`queengate_pushes_total{queue="q"} 7` + "\n",
		`queengate_pg_read_pool_reads_total{path="standby"} 5` + "\n" +
			`queengate_pg_read_pool_reads_total{path="primary_standby_failed"} 3` + "\n",
	}
	var addrs []string
	for _, body := range metrics {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { _, _ = w.Write([]byte(body)) }))
		t.Cleanup(srv.Close)
		addrs = append(addrs, strings.TrimPrefix(srv.URL, "http://"))
	}
	got, err := readPaths(context.Background(), addrs)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]int64{"standby": 45, "standby_after_wait": 2, "primary_standby_behind": 1, "primary_standby_failed": 3}
	if !maps.Equal(got, want) {
		t.Fatalf("readPaths = %v, want %v", got, want)
	}
	rep := &ReadReport{Replication: bench.ReplicationAsync, ReadPaths: want,
		ReadPathsBesidePushes: subtractPaths(map[string]int64{"standby": 50, "standby_after_wait": 2}, map[string]int64{"standby": 45})}
	var out bytes.Buffer
	writeReadBenchReport(&out, Options{W: bench.Workload{Replication: bench.ReplicationAsync}, Rounds: 1}, rep)
	for _, s := range []string{"--replication async", "read rounds standby 45, standby_after_wait 2, primary_standby_behind 1, primary_standby_failed 3",
		"reader beside the pushes standby 5, standby_after_wait 2, primary_standby_behind 0"} {
		if !strings.Contains(out.String(), s) {
			t.Errorf("report lacks %q:\n%s", s, out.String())
		}
	}
}
