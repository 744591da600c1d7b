package main

import (
	"io"
	"net/http"
	"regexp"
	"strconv"
	"testing"

	"github.com/queengate/queengate/internal/pgtest"
)

// TestMemoryLimitSizedByConfig: the limit the daemon gives the runtime is
// the dedup cache budget plus the headroom unless set, none with -1, and
// GOMEMLIMIT's when that is set and the flag is not.
func TestMemoryLimitSizedByConfig(t *testing.T) {
	cases := []struct {
		args       []string
		gomemlimit string
		wantMB     int64
	}{
		{nil, "", 512 + 32 + memoryHeadroomMB},
		{[]string{"--dedup-cache-mb", "64"}, "", 64 + 32 + memoryHeadroomMB},
		{[]string{"--dedup-cache-mb", "0", "--tail-mb", "0"}, "", memoryHeadroomMB},
		{[]string{"--tail-mb", "8"}, "", 512 + 8 + memoryHeadroomMB},
		{[]string{"--memory-limit-mb", "300"}, "", 300},
		{[]string{"--memory-limit-mb", "300"}, "1GiB", 300},
		{[]string{"--memory-limit-mb", "-1"}, "", 0},
		{nil, "1GiB", 0},
	}
	for _, c := range cases {
		cfg, err := parseConfig(append([]string{"--pg-url", "postgres://127.0.0.1:1/x"}, c.args...), io.Discard)
		if err != nil {
			t.Fatalf("%v: %v", c.args, err)
		}
		if got, source := cfg.memoryLimit(c.gomemlimit); got != c.wantMB<<20 {
			t.Errorf("args %v, GOMEMLIMIT %q: limit %d MiB (%s), want %d MiB", c.args, c.gomemlimit, got>>20, source, c.wantMB)
		}
	}
}

// TestMemoryLimitFromEnvironment: QUEEN_MEMORY_LIMIT_MB sets the limit,
// the flag wins over it.
func TestMemoryLimitFromEnvironment(t *testing.T) {
	t.Setenv("QUEEN_MEMORY_LIMIT_MB", "700")
	for args, wantMB := range map[string]int64{"": 700, "--memory-limit-mb=900": 900} {
		argv := []string{"--pg-url", "postgres://127.0.0.1:1/x"}
		if args != "" {
			argv = append(argv, args)
		}
		cfg, err := parseConfig(argv, io.Discard)
		if err != nil {
			t.Fatal(err)
		}
		if got, _ := cfg.memoryLimit(""); got != wantMB<<20 {
			t.Errorf("QUEEN_MEMORY_LIMIT_MB=700 %s: limit %d MiB, want %d", args, got>>20, wantMB)
		}
	}
}

// TestDaemonSetsMemoryLimit: the running daemon's runtime has the limit
// its configuration sizes, as its /metrics report it.
func TestDaemonSetsMemoryLimit(t *testing.T) {
	t.Parallel()
	d := startDaemon(t, "", "QUEEN_PG_URL="+pgtest.NewDB(t), "QUEEN_DEDUP_CACHE_MB=64", "GOMEMLIMIT=")
	resp, err := http.Get("http://" + d.httpAddr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	m := regexp.MustCompile(`(?m)^go_gc_gomemlimit_bytes (\S+)$`).FindSubmatch(body)
	if m == nil {
		t.Fatalf("/metrics has no go_gc_gomemlimit_bytes:\n%.3000s", body)
	}
	got, err := strconv.ParseFloat(string(m[1]), 64)
	if err != nil || int64(got) != (64+32+memoryHeadroomMB)<<20 {
		t.Errorf("go_gc_gomemlimit_bytes %s, want %d (64 MiB cache + 32 MiB tail + %d MiB)", m[1], (64+32+memoryHeadroomMB)<<20, memoryHeadroomMB)
	}
}
