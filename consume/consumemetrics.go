package consume

import (
	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"

	queengate "github.com/queengate/queengate"
	"github.com/queengate/queengate/internal/promreg"
	"github.com/queengate/queengate/model"
)

// consumeMetrics count what this gateway's consumers did, per queue and
// group, never per partition: a group's series are as many as its queue
// has groups, whatever its partitions. A deleted group's series go with
// it. Counting is a few counter adds per request, no statement.
type consumeMetrics struct {
	pops, delivered, redelivered *prometheus.CounterVec
	acks                         *prometheus.CounterVec // and result
	renewals                     *prometheus.CounterVec // and result
	releases                     *prometheus.CounterVec
	expiries                     *prometheus.CounterVec
	deadLetters                  *prometheus.CounterVec
}

// Results of a renewal, as the renewals metric labels them.
const (
	renewalRenewed = "renewed"
	renewalNotHeld = "notHeld"
)

func newConsumeMetrics(reg prometheus.Registerer) (*consumeMetrics, error) {
	vec := func(name, help string, labels ...string) *prometheus.CounterVec {
		return prometheus.NewCounterVec(prometheus.CounterOpts{Name: "queengate_group_" + name, Help: help},
			append([]string{"queue", "group"}, labels...))
	}
	m := &consumeMetrics{
		pops:        vec("pops_total", "Pops answered by this gateway, with messages or without."),
		delivered:   vec("delivered_messages_total", "Messages this gateway's pops delivered (redeliveries included)."),
		redelivered: vec("redelivered_messages_total", "Messages this gateway's pops delivered again (their attempt after the first)."),
		acks: vec("acks_total", "Ack items this gateway settled, by result: completed, failed, or why the item settled nothing.",
			"result"),
		renewals: vec("lease_renewals_total", "Lease renewals, by result: renewed, or notHeld (the lease had run out or was replaced).",
			"result"),
		releases:    vec("lease_releases_total", "Leases released early by their consumer."),
		expiries:    vec("lease_expiries_total", "Leases that ran out before their consumer settled them, counted by the pop that ended them."),
		deadLetters: vec("dead_letters_total", "Messages this gateway's pops and acks moved to the dead-letter queue (out of attempts, or too large to deliver)."),
	}
	if err := promreg.RegisterAll(reg, m.pops, m.delivered, m.redelivered, m.acks, m.renewals, m.releases, m.expiries, m.deadLetters); err != nil {
		return nil, err
	}
	return m, nil
}

// popped counts a pop's answer.
func (m *consumeMetrics) popped(queue, group string, r *model.PopResult) {
	if m == nil {
		return
	}
	m.pops.WithLabelValues(queue, group).Inc()
	if len(r.Messages) == 0 {
		return
	}
	again := 0
	for i := range r.Messages {
		if r.Messages[i].Attempts > 1 {
			again++
		}
	}
	m.delivered.WithLabelValues(queue, group).Add(float64(len(r.Messages)))
	if again > 0 {
		m.redelivered.WithLabelValues(queue, group).Add(float64(again))
	}
}

// ranOut counts a lease a pop ended because it had run out.
func (m *consumeMetrics) ranOut(queue, group string) {
	if m != nil {
		m.expiries.WithLabelValues(queue, group).Inc()
	}
}

// acked counts an ack's items by result, an acked one as completed or
// failed: one add per result present, not per item. The results are a
// handful of words, so they are tallied in a small array, not a map
// allocated per ack.
func (m *consumeMetrics) acked(queue, group string, items []model.Settlement, res *model.SettledBatch) {
	if m == nil {
		return
	}
	type count struct {
		result string
		n      int
	}
	var tally [8]count
	seen := tally[:0]
	for i, o := range res.Items {
		result := o.Result
		if result == model.AckAcked {
			result = ackStatus(items[i])
		}
		j := 0
		for j < len(seen) && seen[j].result != result {
			j++
		}
		if j == len(seen) {
			seen = append(seen, count{result: result})
		}
		seen[j].n++
	}
	for _, c := range seen {
		m.acks.WithLabelValues(queue, group, c.result).Add(float64(c.n))
	}
}

// ackStatus is the status an item settled its message with.
func ackStatus(it model.Settlement) string {
	if it.Completed {
		return queengate.AckCompleted
	}
	return queengate.AckFailed
}

// leased counts a renewal (renew) or a release, held or not.
func (m *consumeMetrics) leased(queue, group string, renew, held bool) {
	switch {
	case m == nil:
	case !renew && held:
		m.releases.WithLabelValues(queue, group).Inc()
	case renew && held:
		m.renewals.WithLabelValues(queue, group, renewalRenewed).Inc()
	case renew:
		m.renewals.WithLabelValues(queue, group, renewalNotHeld).Inc()
	}
}

// deadLettered counts dead letters and logs each, at warn: a message
// that left its queue for good is an operator's business.
func (m *consumeMetrics) deadLettered(log *zerolog.Logger, letters []model.DeadLetter) {
	for _, d := range letters {
		e := log.Warn().Str("queue", d.Queue).Str("group", d.Group).Str("partition", d.Partition).Str("messageId", d.MessageID).
			Int("attempts", d.Attempts).Str("reason", d.Error)
		if id := model.TraceID(d.Meta()); id != "" {
			e = e.Str("trace_id", id)
		}
		e.Msg("dead-lettered a message")
		if m != nil {
			m.deadLetters.WithLabelValues(d.Queue, d.Group).Inc()
		}
	}
}

// forget drops a deleted group's series, or with group "" those of
// every group of a deleted queue.
func (m *consumeMetrics) forget(queue, group string) {
	if m == nil {
		return
	}
	labels := prometheus.Labels{"queue": queue}
	if group != "" {
		labels["group"] = group
	}
	for _, v := range []*prometheus.CounterVec{m.pops, m.delivered, m.redelivered, m.acks, m.renewals, m.releases, m.expiries, m.deadLetters} {
		v.DeletePartialMatch(labels)
	}
}
