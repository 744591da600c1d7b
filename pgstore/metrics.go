package pgstore

import "github.com/prometheus/client_golang/prometheus"

// poolCollector exports the connection pool's statistics, read when
// scraped.
type poolCollector struct {
	s                                          *Store
	acquired, idle, total, max                 *prometheus.Desc
	acquires, emptyAcquires, canceled, waitSec *prometheus.Desc
	opened, lifetimeClosed, idleClosed         *prometheus.Desc
}

// Collector exports the pool's statistics under queengate_pg_pool_*.
func (s *Store) Collector() prometheus.Collector {
	d := func(name, help string) *prometheus.Desc {
		return prometheus.NewDesc("queengate_pg_pool_"+name, help, nil, nil)
	}
	return &poolCollector{s: s,
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

func (c *poolCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.acquired, c.idle, c.total, c.max, c.acquires, c.emptyAcquires,
		c.canceled, c.waitSec, c.opened, c.lifetimeClosed, c.idleClosed} {
		ch <- d
	}
}

func (c *poolCollector) Collect(ch chan<- prometheus.Metric) {
	st := c.s.pool.Stat()
	gauge := func(d *prometheus.Desc, v float64) { ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v) }
	counter := func(d *prometheus.Desc, v float64) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, v)
	}
	gauge(c.acquired, float64(st.AcquiredConns()))
	gauge(c.idle, float64(st.IdleConns()))
	gauge(c.total, float64(st.TotalConns()))
	gauge(c.max, float64(st.MaxConns()))
	counter(c.acquires, float64(st.AcquireCount()))
	counter(c.emptyAcquires, float64(st.EmptyAcquireCount()))
	counter(c.canceled, float64(st.CanceledAcquireCount()))
	counter(c.waitSec, st.AcquireDuration().Seconds())
	counter(c.opened, float64(st.NewConnsCount()))
	counter(c.lifetimeClosed, float64(st.MaxLifetimeDestroyCount()))
	counter(c.idleClosed, float64(st.MaxIdleDestroyCount()))
}
