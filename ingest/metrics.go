package ingest

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/queengate/queengate/dedup"
	"github.com/queengate/queengate/internal/promreg"
	"github.com/queengate/queengate/model"
	"github.com/queengate/queengate/tail"
)

type metrics struct {
	messages    map[model.Status]prometheus.Counter
	flushSize   prometheus.Histogram
	flushTime   prometheus.Histogram
	frames      prometheus.Histogram
	flushErrors prometheus.Counter
	probes      map[model.Probe]prometheus.Counter
	unrolled    prometheus.Counter
	fullWindow  prometheus.Counter
	bufferDepth prometheus.Gauge
	cacheHits   prometheus.Counter
	conflicts   map[model.ConflictMode]prometheus.Counter
	// storeChanges counts the store epochs this ingester moved to (a
	// failover, a restart, a restored backup, a log found shorter), each
	// a dedup cache dropped and rehydrated; lost counts the acknowledged
	// messages the store then lacked, unchecked those older than the
	// journal, which were not asked about.
	storeChanges prometheus.Counter
	lost         prometheus.Counter
	unchecked    prometheus.Counter
}

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	messages := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "queengate_messages_total",
		Help: "Messages answered, by status (queued, duplicate, failed).",
	}, []string{"status"})
	probes := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "queengate_probes_total",
		Help: "Frames pushed, by what the SQL duplicate probe did: skipped (the cache vouched for everything stored), narrowed (only the slots the cache named and the rows above its watermark), full (the whole window), off (window 0).",
	}, []string{"probe"})
	conflicts := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "queengate_payload_conflicts_total",
		Help: "Duplicates whose data differed from their original's, by the queue's onConflict (flag: answered duplicate and flagged; reject: answered failed).",
	}, []string{"on_conflict"})
	m := &metrics{
		conflicts: map[model.ConflictMode]prometheus.Counter{
			model.ConflictFlag:   conflicts.WithLabelValues("flag"),
			model.ConflictReject: conflicts.WithLabelValues("reject"),
		},
		messages: map[model.Status]prometheus.Counter{
			model.StatusQueued:    messages.WithLabelValues("queued"),
			model.StatusDuplicate: messages.WithLabelValues("duplicate"),
			model.StatusFailed:    messages.WithLabelValues("failed"),
		},
		flushSize: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "queengate_flush_messages",
			Help:    "Messages sent to PostgreSQL per bundle.",
			Buckets: prometheus.ExponentialBuckets(1, 4, 9),
		}),
		flushTime: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "queengate_flush_duration_seconds",
			Help:    "Round trip of one bundle (resolve partitions, push, commit).",
			Buckets: prometheus.ExponentialBuckets(0.0002, 2, 16),
		}),
		frames: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "queengate_flush_frames",
			Help:    "Frames (one a partition) per bundle.",
			Buckets: prometheus.ExponentialBuckets(1, 4, 8),
		}),
		flushErrors: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "queengate_flush_errors_total",
			Help: "Bundles that failed; their messages were answered failed.",
		}),
		probes: map[model.Probe]prometheus.Counter{
			model.ProbeOff:      probes.WithLabelValues("off"),
			model.ProbeSkipped:  probes.WithLabelValues("skipped"),
			model.ProbeNarrowed: probes.WithLabelValues("narrowed"),
			model.ProbeFull:     probes.WithLabelValues("full"),
		},
		unrolled: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "queengate_probe_unrolled_hashes_total",
			Help: "Stored hashes the SQL probes compared (narrowed probes: the named slots and the rows above the watermark).",
		}),
		fullWindow: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "queengate_probe_window_hashes_total",
			Help: "Stored hashes full probes of the same frames would have compared (the cache's estimate of each window), for the unrolled share.",
		}),
		bufferDepth: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "queengate_fusion_buffered_messages",
			Help: "Messages accepted and not yet answered (buffered or in flight).",
		}),
	}
	m.storeChanges, m.lost, m.unchecked = failoverCounters()
	if err := promreg.RegisterAll(reg, messages, probes, conflicts, m.unrolled, m.fullWindow, m.flushSize, m.flushTime, m.frames, m.flushErrors, m.bufferDepth,
		m.storeChanges, m.lost, m.unchecked); err != nil {
		return nil, err
	}
	return m, nil
}

// failoverCounters count what PostgreSQL changing cost (failover.go).
func failoverCounters() (storeChanges, lost, unchecked prometheus.Counter) {
	return prometheus.NewCounter(prometheus.CounterOpts{
			Name: "queengate_store_changes_total",
			Help: "Times PostgreSQL was found changed (a failover, a restart, a restored backup, or a log shorter than this gateway had written): each time the dedup cache was dropped and partitions rehydrated.",
		}), prometheus.NewCounter(prometheus.CounterOpts{
			Name: "queengate_failover_lost_messages_total",
			Help: "Messages this gateway had answered stored (queued or duplicate) that PostgreSQL lacked after it changed: what asynchronous replication lost. Each is logged with its messageId.",
		}), prometheus.NewCounter(prometheus.CounterOpts{
			Name: "queengate_failover_unchecked_messages_total",
			Help: "Acknowledged messages older than the journal (the last 262,144 by default) when PostgreSQL changed: not checked, so not in queengate_failover_lost_messages_total. Logged as an error when the oldest checked were lost too.",
		})
}

func (m *metrics) observeFlush(frames, messages int, took time.Duration, err error) {
	m.frames.Observe(float64(frames))
	m.flushSize.Observe(float64(messages))
	m.flushTime.Observe(took.Seconds())
	if err != nil {
		m.flushErrors.Inc()
	}
}

// observeProbe counts a frame's probe, what it unrolled, and what a
// full probe would have (its own count when it was one, else the cache's
// estimate of the window).
func (m *metrics) observeProbe(r *model.FrameResult, window int) {
	m.probes[r.Probe].Inc()
	m.unrolled.Add(float64(r.Unrolled))
	switch r.Probe {
	case model.ProbeFull:
		m.fullWindow.Add(float64(r.Unrolled))
	case model.ProbeSkipped, model.ProbeNarrowed:
		m.fullWindow.Add(float64(window))
	}
}

// registerCache exports the dedup cache's figures, read when scraped.
func (m *metrics) registerCache(reg prometheus.Registerer, c *dedup.Cache) error {
	m.cacheHits = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "queengate_dedup_local_hits_total",
		Help: "Frames with a hash already in the cache, routed to the full SQL probe.",
	})
	gauge := func(name, help string, f func(dedup.Stats) float64) prometheus.Collector {
		return prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: name, Help: help},
			func() float64 { return f(c.Stats()) })
	}
	counter := func(name, help string, f func(dedup.Stats) float64) prometheus.Collector {
		return prometheus.NewCounterFunc(prometheus.CounterOpts{Name: name, Help: help},
			func() float64 { return f(c.Stats()) })
	}
	return promreg.RegisterAll(reg,
		m.cacheHits,
		counter("queengate_dedup_hydrations_total", "Full-window hydrations of cache entries read from PostgreSQL.",
			func(s dedup.Stats) float64 { return float64(s.Hydrations) }),
		counter("queengate_dedup_births_total", "Cache entries born empty, without a read, for partitions a flush created.",
			func(s dedup.Stats) float64 { return float64(s.Births) }),
		gauge("queengate_dedup_cache_budget_bytes", "The cache's budget in force: the configured one less what it yields to the rest of the process under the memory limit.",
			func(s dedup.Stats) float64 { return float64(s.BudgetBytes) }),
		gauge("queengate_dedup_cache_resident_bytes", "Bytes of resident cache entries.",
			func(s dedup.Stats) float64 { return float64(s.ResidentBytes) }),
		gauge("queengate_dedup_cache_resident_hashes", "Hashes resident in the cache.",
			func(s dedup.Stats) float64 { return float64(s.ResidentHashes) }),
		gauge("queengate_dedup_cache_entries", "Partitions with a resident cache entry.",
			func(s dedup.Stats) float64 { return float64(s.Entries) }),
		gauge("queengate_dedup_suppressed_partitions", "Partitions suppressed by the cache's admission gate.",
			func(s dedup.Stats) float64 { return float64(s.Suppressed) }),
		counter("queengate_dedup_bloom_misses_total", "Lookups the bloom front answered as definitely absent (in a small entry, which has no front, lookups that found nothing).",
			func(s dedup.Stats) float64 { return float64(s.BloomMisses) }),
		counter("queengate_dedup_bloom_maybes_total", "Lookups the bloom front passed to the exact ring (in a small entry, lookups that found the hash).",
			func(s dedup.Stats) float64 { return float64(s.BloomMaybes) }),
		counter("queengate_dedup_bloom_false_positives_total", "Bloom maybes the exact ring found absent.",
			func(s dedup.Stats) float64 { return float64(s.BloomFalsePositives) }),
		counter("queengate_dedup_gaps_total", "Interleave gaps: another writer wrote between our pushes.",
			func(s dedup.Stats) float64 { return float64(s.Gaps) }),
		counter("queengate_dedup_rebuilds_total", "Entries marked for a full rebuild (overlap, window change).",
			func(s dedup.Stats) float64 { return float64(s.Rebuilds) }),
		counter("queengate_dedup_evictions_total", "Entries evicted to stay within the budget.",
			func(s dedup.Stats) float64 { return float64(s.Evictions) }),
		counter("queengate_dedup_hydrated_bytes_total", "Bytes of hashes read by hydrations (16 per hash).",
			func(s dedup.Stats) float64 { return float64(s.HydratedBytes) }),
		counter("queengate_dedup_fills_total", "Gaps healed by reading only the rows another writer committed above the entry's watermark.",
			func(s dedup.Stats) float64 { return float64(s.Fills) }),
		counter("queengate_dedup_filled_bytes_total", "Bytes of hashes read by fills (16 per hash).",
			func(s dedup.Stats) float64 { return float64(s.FilledBytes) }),
	)
}

// registerTail registers the tail's gauges and the counts of the cycles
// consumers served from it.
func (m *metrics) registerTail(reg prometheus.Registerer, t *tail.Tail) error {
	count := func(pick func(tail.CycleCounts) int64) func() float64 {
		return func() float64 { return float64(pick(t.Counts())) }
	}
	return promreg.RegisterAll(reg,
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "queengate_tail_bytes",
			Help: "Bytes of committed messages this gateway keeps in its tail (within --tail-mb)."},
			func() float64 { return float64(t.Bytes()) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "queengate_tail_cycles_served_total",
			Help: "Pops carrying the ack of their whole previous lease answered from the tail, in one plain statement."},
			count(func(c tail.CycleCounts) int64 { return c.Served })),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "queengate_tail_cycles_missed_total",
			Help: "Pops carrying an ack that the tail could not serve (lease not remembered or not acked whole, next messages not in the tail, or not fitting): answered the usual way."},
			count(func(c tail.CycleCounts) int64 { return c.Missed })),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "queengate_tail_cycles_acked_total",
			Help: "Cycles planned from the tail whose statement settled the ack alone (another partition's turn to be leased): the pop made the usual way."},
			count(func(c tail.CycleCounts) int64 { return c.Acked })),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "queengate_tail_cycles_refused_total",
			Help: "Cycles planned from the tail that PostgreSQL refused (the cursor, partition or queue not as remembered): answered the usual way."},
			count(func(c tail.CycleCounts) int64 { return c.Refused })),
	)
}
