// Package storemetrics exports what the PostgreSQL store knows, read
// when scraped: its connection pools' statistics, the groups' counts and
// lag, and the dead letters. pgstore.Store.Collector builds it.
package storemetrics

import (
	"cmp"
	"context"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/queengate/queengate/model"
	"github.com/queengate/queengate/pgstore/internal/readpool"
)

// poolCollector exports the connection pools' statistics, read when
// scraped.
type poolCollector struct {
	s Sources
	// pool is the primary's pool; readPool the read pool's (--pg-read-url),
	// nil without one.
	pool, readPool                 *poolDescs
	unconfirmed, deletedUnconsumed *prometheus.Desc
	groupLag, deadLetters, delayed *prometheus.Desc
}

// Sources are what the collector reads.
type Sources struct {
	Pool  *pgxpool.Pool
	Reads *readpool.Router
	// Figures reads every queue's figures (pgstore.Store.QueueFigures).
	Figures func(ctx context.Context) ([]model.QueueFigures, error)
	// Undeliverable is the store's NewUndeliverableCounter.
	Undeliverable *prometheus.CounterVec
}

// New exports the pools' statistics under queengate_pg_pool_* (and
// queengate_pg_read_pool_* with a read pool), which path the reads
// meant for the read pool took (queengate_pg_read_pool_reads_total), and
// the groups' and dead letters' figures.
func New(s Sources) prometheus.Collector {
	c := &poolCollector{s: s, pool: newPoolDescs("queengate_pg_pool_", "primary"),
		unconfirmed: prometheus.NewDesc("queengate_group_unconfirmed_deliveries_total",
			"Deliveries taken back because their lease ran out with nothing heard from its consumer, per queue and group.",
			[]string{"queue", "group"}, nil),
		deletedUnconsumed: prometheus.NewDesc("queengate_group_deleted_unconsumed_total",
			"Messages retention deleted before the group consumed them, per queue and group.",
			[]string{"queue", "group"}, nil),
		groupLag: prometheus.NewDesc("queengate_group_lag",
			"Messages a consumer group has not consumed yet, over every partition of its queue; read when scraped, for the groups with the most lag (at most 1000 series).",
			[]string{"queue", "group"}, nil),
		delayed: prometheus.NewDesc("queengate_group_delayed_messages",
			"Messages a delay holds back from a consumer group (its lag on the partitions where it waits for a failure's delay); read when scraped, for the groups with the most (at most 1000 series).",
			[]string{"queue", "group"}, nil),
		deadLetters: prometheus.NewDesc("queengate_dead_letters",
			"Dead letters of a queue not yet redriven; read when scraped, for the queues with the deepest dead-letter queues (at most 1000 series).",
			[]string{"queue"}, nil),
	}
	if s.Reads.Pool() != nil {
		c.readPool = newPoolDescs("queengate_pg_read_pool_", "read (--pg-read-url)")
	}
	return c
}

func (c *poolCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.unconfirmed, c.deletedUnconsumed, c.groupLag, c.deadLetters, c.delayed} {
		ch <- d
	}
	c.pool.describe(ch)
	if c.readPool != nil {
		c.readPool.describe(ch)
	}
	c.s.Undeliverable.Describe(ch)
	c.s.Reads.Collector().Describe(ch)
}

func (c *poolCollector) Collect(ch chan<- prometheus.Metric) {
	c.pool.collect(ch, c.s.Pool.Stat())
	if c.readPool != nil {
		c.readPool.collect(ch, c.s.Reads.Pool().Stat())
	}
	c.collectConsumers(ch)
	c.collectFigures(ch)
	c.s.Undeliverable.Collect(ch)
	c.s.Reads.Collector().Collect(ch)
}

// poolDescs are one connection pool's statistics.
type poolDescs struct {
	acquired, idle, total, max                 *prometheus.Desc
	acquires, emptyAcquires, canceled, waitSec *prometheus.Desc
	opened, lifetimeClosed, idleClosed         *prometheus.Desc
}

// newPoolDescs names a pool's statistics prefix+name; which says which
// pool in their help.
func newPoolDescs(prefix, which string) *poolDescs {
	d := func(name, help string) *prometheus.Desc {
		return prometheus.NewDesc(prefix+name, strings.TrimSuffix(help, ".")+" ("+which+" pool).", nil, nil)
	}
	return &poolDescs{
		acquired:       d("acquired_connections", "Connections in use."),
		idle:           d("idle_connections", "Connections open and idle."),
		total:          d("connections", "Connections open (in use, idle, or being opened)."),
		max:            d("max_connections", "Most connections the pool opens."),
		acquires:       d("acquires_total", "Connections handed out."),
		emptyAcquires:  d("empty_acquires_total", "Acquires that waited because no idle connection was there."),
		canceled:       d("canceled_acquires_total", "Acquires given up (context ended) while waiting."),
		waitSec:        d("acquire_wait_seconds_total", "Time spent waiting for connections."),
		opened:         d("opened_connections_total", "Connections opened."),
		lifetimeClosed: d("lifetime_closed_connections_total", "Connections closed for their maximum lifetime."),
		idleClosed:     d("idle_closed_connections_total", "Connections closed for idling past the maximum."),
	}
}

func (p *poolDescs) describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{p.acquired, p.idle, p.total, p.max, p.acquires, p.emptyAcquires,
		p.canceled, p.waitSec, p.opened, p.lifetimeClosed, p.idleClosed} {
		ch <- d
	}
}

func (p *poolDescs) collect(ch chan<- prometheus.Metric, st *pgxpool.Stat) {
	gauge := func(d *prometheus.Desc, v float64) { ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v) }
	counter := func(d *prometheus.Desc, v float64) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, v)
	}
	gauge(p.acquired, float64(st.AcquiredConns()))
	gauge(p.idle, float64(st.IdleConns()))
	gauge(p.total, float64(st.TotalConns()))
	gauge(p.max, float64(st.MaxConns()))
	counter(p.acquires, float64(st.AcquireCount()))
	counter(p.emptyAcquires, float64(st.EmptyAcquireCount()))
	counter(p.canceled, float64(st.CanceledAcquireCount()))
	counter(p.waitSec, st.AcquireDuration().Seconds())
	counter(p.opened, float64(st.NewConnsCount()))
	counter(p.lifetimeClosed, float64(st.MaxLifetimeDestroyCount()))
	counter(p.idleClosed, float64(st.MaxIdleDestroyCount()))
}

// maxFigureSeries bounds the series of each of the gauges read from the
// queues' figures: a database with more groups or dead-letter queues
// exports the largest, which are the ones to look at.
const maxFigureSeries = 1000

// collectFigures exports each group's lag and what a delay holds of it
// (when not 0), and each queue's dead-letter depth (when not 0), from one
// statement (QueueFigures), the largest first. With PostgreSQL away they are left out.
func (c *poolCollector) collectFigures(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	figures, err := c.s.Figures(ctx)
	if err != nil {
		return
	}
	var lags, delays, depths []labelled
	for _, f := range figures {
		for _, g := range f.Groups {
			lags = append(lags, labelled{float64(g.Lag), []string{f.Queue, g.Group}})
			if g.Delayed > 0 {
				delays = append(delays, labelled{float64(g.Delayed), []string{f.Queue, g.Group}})
			}
		}
		if f.DLQDepth > 0 {
			depths = append(depths, labelled{float64(f.DLQDepth), []string{f.Queue}})
		}
	}
	for _, l := range largest(lags, maxFigureSeries) {
		ch <- prometheus.MustNewConstMetric(c.groupLag, prometheus.GaugeValue, l.value, l.labels...)
	}
	for _, l := range largest(delays, maxFigureSeries) {
		ch <- prometheus.MustNewConstMetric(c.delayed, prometheus.GaugeValue, l.value, l.labels...)
	}
	for _, l := range largest(depths, maxFigureSeries) {
		ch <- prometheus.MustNewConstMetric(c.deadLetters, prometheus.GaugeValue, l.value, l.labels...)
	}
}

// labelled is one series' value and label values.
type labelled struct {
	value  float64
	labels []string
}

// largest is the n largest of series.
func largest(series []labelled, n int) []labelled {
	slices.SortStableFunc(series, func(a, b labelled) int { return cmp.Compare(b.value, a.value) })
	return series[:min(n, len(series))]
}

// NewUndeliverableCounter counts, in this process, messages its pops
// dead-lettered because no pop could deliver them.
func NewUndeliverableCounter() *prometheus.CounterVec {
	return prometheus.NewCounterVec(prometheus.CounterOpts{Name: "queengate_group_undeliverable_total",
		Help: "Messages dead-lettered by this gateway's pops because they were too large to deliver, per queue and group."},
		[]string{"queue", "group"})
}

// collectConsumers reads the consumer groups' counts from their cursors
// (every gateway's pops add to them), for groups with any. With
// PostgreSQL away they are left out: the other metrics still matter then.
func (c *poolCollector) collectConsumers(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	rows, err := c.s.Pool.Query(ctx, `
		SELECT q.name, g.name, sum(cc.unconfirmed)::float8, sum(cc.deleted_unconsumed)::float8
		  FROM queen.consumer_cursors cc
		  JOIN queen.consumer_groups g ON g.id = cc.group_id
		  JOIN queen.queues q ON q.id = g.queue_id
		 WHERE cc.unconfirmed > 0 OR cc.deleted_unconsumed > 0
		 GROUP BY q.name, g.name`)
	if err != nil {
		return
	}
	defer rows.Close()
	for rows.Next() {
		var queue, group string
		var unconfirmed, deleted float64
		if rows.Scan(&queue, &group, &unconfirmed, &deleted) != nil {
			return
		}
		ch <- prometheus.MustNewConstMetric(c.unconfirmed, prometheus.CounterValue, unconfirmed, queue, group)
		ch <- prometheus.MustNewConstMetric(c.deletedUnconsumed, prometheus.CounterValue, deleted, queue, group)
	}
}
