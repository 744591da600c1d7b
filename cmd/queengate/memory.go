package main

import (
	"fmt"
	"runtime/debug"

	"github.com/rs/zerolog"
)

// memoryHeadroomMB is what the derived memory limit allows beyond the
// dedup cache's and the tail's budgets: the rest of the live heap (ingest buffers,
// partition state, pgx and NATS buffers), goroutine stacks and the
// runtime's own, with room for the heap the collector finds dead.
const memoryHeadroomMB = 112

// memoryLimit is the soft memory limit the daemon gives Go's runtime, in
// bytes (0: leave the runtime's own, GOMEMLIMIT or none), and what sized
// it. gomemlimit is the GOMEMLIMIT environment variable. Without a limit
// the collector lets the heap grow to twice what it found live (GOGC=100),
// and what it finds live varies from one cycle to the next with the
// garbage allocated while it marks: the peak then varied by 150 MiB
// between runs of the same load (docs/operations.md, "Process memory").
func (c config) memoryLimit(gomemlimit string) (int64, string) {
	switch {
	case c.MemoryLimitMB > 0:
		return int64(c.MemoryLimitMB) << 20, "memory-limit-mb"
	case c.MemoryLimitMB < 0:
		return 0, "none (memory-limit-mb -1)"
	case gomemlimit != "":
		return 0, "GOMEMLIMIT"
	default:
		return int64(c.DedupCacheMB+c.TailMB+memoryHeadroomMB) << 20,
			fmt.Sprintf("dedup-cache-mb + tail-mb + %d MiB", memoryHeadroomMB)
	}
}

// setMemoryLimit applies the configured memory limit and logs it.
func setMemoryLimit(c config, gomemlimit string, log zerolog.Logger) {
	limit, source := c.memoryLimit(gomemlimit)
	if limit > 0 {
		debug.SetMemoryLimit(limit)
	}
	// SetMemoryLimit with a negative value reads the limit in force.
	log.Info().Int64("memory_limit_mb", debug.SetMemoryLimit(-1)>>20).Str("sized_by", source).Msg("memory limit")
}
