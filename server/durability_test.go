package server_test

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"

	queengate "github.com/queengate/queengate"
	"github.com/queengate/queengate/internal/gatewaytest"
	"github.com/queengate/queengate/internal/obstest"
	"github.com/queengate/queengate/internal/pgcluster"
	"github.com/queengate/queengate/internal/pgtest"
	"github.com/queengate/queengate/server"
)

// durabilityView is what a gateway says an acknowledgement means: its
// /status over NATS, its /readyz, its level gauges and its log.
type durabilityView struct {
	status     *queengate.DurabilityStat
	readyCode  int
	readyLine  string
	levelGauge map[string]float64
	logged     []map[string]any
}

// startAndView starts a gateway on pgURL and reads what it says.
func startAndView(t *testing.T, pgURL string) durabilityView {
	t.Helper()
	var logs obstest.LogBuffer
	reg := prometheus.NewRegistry()
	srv := start(t, server.Config{PGURL: pgURL, EmbeddedNATS: server.EmbeddedNATS{Port: -1},
		AdminAddr: "127.0.0.1:0", Registry: reg, Logger: zerolog.New(&logs)})
	t.Cleanup(func() { _ = srv.Stop(context.Background()) })
	nc, err := nats.Connect(srv.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	client, err := queengate.NewClient(nc, queengate.WithTimeout(10*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	st, err := client.Status(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	v := durabilityView{status: st.Durability, levelGauge: map[string]float64{}, logged: logs.Lines(t, "what an acknowledged push survives")}
	code, checks := gatewaytest.Readyz(t, srv.AdminAddr())
	v.readyCode, v.readyLine = code, checks["durability"]
	for _, level := range []string{"none", "local-disk", "standby-written", "standby-disk", "standby-applied"} {
		v.levelGauge[level] = obstest.MetricValue(t, reg, "queengate_durability_level", map[string]string{"level": level})
	}
	return v
}

// TestGatewaySaysAcknowledgementsCanBeLost: on a server with fsync off
// (the test server), /status says level none with the warning, /readyz
// says so and stays ready, the gauge of none is 1 and the start's log
// line is a warning.
func TestGatewaySaysAcknowledgementsCanBeLost(t *testing.T) {
	t.Parallel()
	v := startAndView(t, pgtest.NewDB(t))
	if v.status == nil || v.status.Level != "none" || v.status.Fsync || !strings.Contains(v.status.Warning, "fsync is off") {
		t.Errorf("/status durability %+v; want level none, fsync off, a warning", v.status)
	}
	if v.readyCode != http.StatusOK || !strings.HasPrefix(v.readyLine, "none: fsync is off") {
		t.Errorf("/readyz %d, durability %q; want 200 and level none with the warning", v.readyCode, v.readyLine)
	}
	if v.levelGauge["none"] != 1 || v.levelGauge["local-disk"] != 0 {
		t.Errorf("queengate_durability_level %v; want 1 for none only", v.levelGauge)
	}
	if len(v.logged) != 1 || v.logged[0]["level"] != "warn" || v.logged[0]["warning"] == nil || v.logged[0]["durability"] != "none" {
		t.Errorf("logged %v; want one warning", v.logged)
	}
}

// TestGatewaySaysAcknowledgementsAreOnAStandby: with a synchronous
// standby and remote_apply, /status says standby-applied and names the
// standby, /readyz says the level alone, its gauge is 1 and the start's
// log line is no warning.
func TestGatewaySaysAcknowledgementsAreOnAStandby(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	primary := pgtest.DurablePrimary(ctx, t, "primary")
	standby, err := pgcluster.StartStandby(ctx, primary, pgcluster.StandbyOptions{Dir: pgtest.ServerDir(t), Name: "standby1",
		Sync: true, Commit: "remote_apply"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(standby.Stop)

	v := startAndView(t, primary.URL("postgres"))
	want := []queengate.StandbyStat{{Name: "standby1", SyncState: "sync"}}
	if s := v.status; s == nil || s.Level != "standby-applied" || s.SynchronousCommit != "remote_apply" || !s.Fsync ||
		len(s.Standbys) != 1 || s.Standbys[0] != want[0] || s.CommitsWait == nil || *s.CommitsWait || s.Warning != "" {
		t.Errorf("/status durability %+v; want standby-applied with %v, commits not waiting, no warning", s, want)
	}
	if v.readyCode != http.StatusOK || v.readyLine != "standby-applied" {
		t.Errorf("/readyz %d, durability %q; want 200, standby-applied", v.readyCode, v.readyLine)
	}
	if v.levelGauge["standby-applied"] != 1 || v.levelGauge["none"] != 0 {
		t.Errorf("queengate_durability_level %v; want 1 for standby-applied only", v.levelGauge)
	}
	if len(v.logged) != 1 || v.logged[0]["level"] != "info" || v.logged[0]["durability"] != "standby-applied" {
		t.Errorf("logged %v; want one info line", v.logged)
	}
}
