package main

import (
	"time"

	"github.com/queengate/queengate/internal/bench"
)

// scenario is a named preset workload.
type scenario struct {
	name string
	w    bench.Workload
}

// scenarios are the named presets, in the order the help text lists them;
// flags given explicitly override them. The main ones send 1.5M messages:
// on the reference machine a run of 300,000 took about a second, mostly
// ramp-up, so it measured how fast a target starts rather than how fast it
// runs.
var scenarios = []scenario{
	{"unique", bench.Workload{Producers: 64, PerRequest: 100, Total: 1_500_000, Queues: 1, Partitions: 100, WindowSeconds: 3600}},
	{"retries", bench.Workload{Producers: 64, PerRequest: 100, Total: 1_500_000, Queues: 1, Partitions: 100, WindowSeconds: 3600, RetryShare: 0.2, CrossShare: 0.5}},
	{"hot", bench.Workload{Producers: 64, PerRequest: 100, Total: 1_500_000, Queues: 1, Partitions: 1, WindowSeconds: 3600}},
	{"wide", bench.Workload{Producers: 64, PerRequest: 100, Total: 300_000, Queues: 1, Partitions: 10_000, WindowSeconds: 3600}},
	{"window", bench.Workload{Producers: 64, PerRequest: 100, Total: 300_000, Queues: 1, Partitions: 100, WindowSeconds: 300, Prefill: 1_000_000}},
	{"twogateways", bench.Workload{Producers: 64, PerRequest: 100, Total: 1_500_000, Queues: 1, Partitions: 100, WindowSeconds: 3600, Gateways: 2}},
	// failover kills one of three gateways (SIGKILL) halfway; producers
	// resend what failed or timed out, with the same ids, until answered.
	{"failover", bench.Workload{Producers: 64, PerRequest: 100, Total: 1_500_000, Queues: 1, Partitions: 100, WindowSeconds: 3600, Gateways: 3,
		KillAt: 0.5, RetryFailed: true, RequestTimeout: time.Second}},
	// read stores the messages in queengate and in JetStream, then reads
	// them back (internal/bench/sidebyside): a scenario of its own, with --self.
	{"read", bench.Workload{Producers: 8, PerRequest: 1000, Total: 1_000_000, Queues: 1, Partitions: 8, WindowSeconds: 3600}},
	{"consume", bench.Workload{Producers: 8, PerRequest: 1000, Total: 500_000, Queues: 1, Partitions: 8, WindowSeconds: 3600}},
	// Many partitions: one ordered lane per entity (a session, a
	// customer), few messages per request. sessions meets most
	// partitions for the first time in the run; sessions-warm first
	// sends ten messages to every partition; sessions1m touches about
	// 420k of a million partitions with requests of 1 to 10 messages and
	// checks the cache keeps to its budget.
	{"sessions", bench.Workload{Producers: 256, PerRequest: 10, Total: 500_000, Queues: 1, Partitions: 100_000, WindowSeconds: 3600}},
	{"sessions-warm", bench.Workload{Producers: 256, PerRequest: 10, Total: 500_000, Queues: 1, Partitions: 100_000, WindowSeconds: 3600, Prefill: 1_000_000}},
	{"sessions1m", bench.Workload{Producers: 256, PerRequest: 10, MinPerRequest: 1, Total: 3_000_000, Queues: 1, Partitions: 1_000_000,
		WindowSeconds: 3600, BudgetChecks: true}},
}

// scenarioNames are the presets' names, in order.
func scenarioNames() []string {
	names := make([]string, len(scenarios))
	for i, s := range scenarios {
		names[i] = s.name
	}
	return names
}

// findScenario is the preset named name.
func findScenario(name string) (bench.Workload, bool) {
	for _, s := range scenarios {
		if s.name == name {
			return s.w, true
		}
	}
	return bench.Workload{}, false
}
