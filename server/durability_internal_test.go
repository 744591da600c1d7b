package server

import (
	"context"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"

	"github.com/queengate/queengate/internal/checkfor"
	"github.com/queengate/queengate/internal/obstest"
	"github.com/queengate/queengate/internal/pgtest"
)

// TestDurabilityWatchLogsEachChange: a reading that says what the last
// one said logs nothing; a change (synchronous_commit switched off on
// the server, read on Refresh as after a reconnection) logs a warning
// and moves the gauge.
func TestDurabilityWatchLogsEachChange(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	primary := pgtest.DurablePrimary(ctx, t, "primary")
	var logs obstest.LogBuffer
	reg := prometheus.NewRegistry()
	w := newDurabilityWatch(pgtest.Store(t, primary.URL("postgres")), zerolog.New(&logs), reg)
	if err := w.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(w.Stop)
	first := w.Current()
	if first == nil || first.Level != "local-disk" || first.Warning != "" {
		t.Fatalf("first reading %+v; want local-disk, no warning", first)
	}
	w.Refresh()
	checkfor.Check(t, time.Minute, checkfor.Cond("a second reading", func() bool { return w.Current() != first }))
	if lines := logs.Lines(t, durabilityMessage); len(lines) != 1 {
		t.Errorf("logged %v for two equal readings; want one line", lines)
	}

	if err := primary.SetSync(ctx, "off"); err != nil {
		t.Fatal(err)
	}
	checkfor.Check(t, time.Minute, checkfor.Cond("the reading of synchronous_commit off", func() bool {
		w.Refresh()
		return w.Current().Level == "none"
	}))
	lines := logs.Lines(t, durabilityMessage)
	if len(lines) != 2 || lines[1]["level"] != "warn" || lines[1]["durability"] != "none" || lines[1]["warning"] == nil {
		t.Errorf("logged %v; want the first line and a warning for level none", lines)
	}
	if obstest.MetricValue(t, reg, "queengate_durability_level", map[string]string{"level": "none"}) != 1 ||
		obstest.MetricValue(t, reg, "queengate_durability_level", map[string]string{"level": "local-disk"}) != 0 {
		t.Error("queengate_durability_level does not say none")
	}
}
