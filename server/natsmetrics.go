package server

import (
	"github.com/nats-io/nats.go"
	"github.com/prometheus/client_golang/prometheus"
)

// natsCollector exports the state of the gateway's NATS connection,
// read when scraped.
type natsCollector struct {
	nc                                 *nats.Conn
	connected, reconnects              *prometheus.Desc
	inMsgs, outMsgs, inBytes, outBytes *prometheus.Desc
}

// newNATSCollector exports nc's state: connected (1 or 0), reconnects,
// and messages and bytes in and out.
func newNATSCollector(nc *nats.Conn) prometheus.Collector {
	d := func(name, help string) *prometheus.Desc {
		return prometheus.NewDesc("queengate_nats_"+name, help, nil, nil)
	}
	return &natsCollector{nc: nc,
		connected:  d("connected", "1 while the gateway's NATS connection is up, 0 while it is away (reconnecting) or closed."),
		reconnects: d("reconnects_total", "Times the NATS connection was re-established."),
		inMsgs:     d("received_messages_total", "Messages received on the NATS connection."),
		outMsgs:    d("sent_messages_total", "Messages published on the NATS connection."),
		inBytes:    d("received_bytes_total", "Payload bytes received on the NATS connection."),
		outBytes:   d("sent_bytes_total", "Payload bytes published on the NATS connection."),
	}
}

func (c *natsCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.connected, c.reconnects, c.inMsgs, c.outMsgs, c.inBytes, c.outBytes} {
		ch <- d
	}
}

func (c *natsCollector) Collect(ch chan<- prometheus.Metric) {
	up := 0.0
	if c.nc.IsConnected() {
		up = 1
	}
	st := c.nc.Stats()
	ch <- prometheus.MustNewConstMetric(c.connected, prometheus.GaugeValue, up)
	ch <- prometheus.MustNewConstMetric(c.reconnects, prometheus.CounterValue, float64(st.Reconnects))
	ch <- prometheus.MustNewConstMetric(c.inMsgs, prometheus.CounterValue, float64(st.InMsgs))
	ch <- prometheus.MustNewConstMetric(c.outMsgs, prometheus.CounterValue, float64(st.OutMsgs))
	ch <- prometheus.MustNewConstMetric(c.inBytes, prometheus.CounterValue, float64(st.InBytes))
	ch <- prometheus.MustNewConstMetric(c.outBytes, prometheus.CounterValue, float64(st.OutBytes))
}
