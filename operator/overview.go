package operator

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	queengate "github.com/queengate/queengate"
	"github.com/queengate/queengate/gateway"
	"github.com/queengate/queengate/ingest"
	"github.com/queengate/queengate/internal/wire"
	"github.com/queengate/queengate/model"
)

// Every queue at a glance (GET /overview, <prefix>.overview): what
// PostgreSQL holds (one statement, QueueFigures, per request: only while
// someone looks) beside this gateway's push answers, sampled in memory.

// historyLen is how many samples a queue's history keeps: five minutes
// at the default interval.
const historyLen = 60

// defaultSampleEvery is how often push answers are sampled.
const defaultSampleEvery = 5 * time.Second

// pushTotals are a queue's push answers since the gateway started.
type pushTotals struct{ queued, duplicates, failed int64 }

func (t *pushTotals) add(c ingest.PartitionCounts) {
	t.queued += c.Queued
	t.duplicates += c.Duplicate
	t.failed += c.Failed
}

// rateSample is the totals at a moment.
type rateSample struct {
	at time.Time
	pushTotals
}

// pushRates samples every queue's push answers, for the overview's
// history: a ring of historyLen samples per queue answered, in memory;
// a sample reads the ingester's per-queue counters, and PostgreSQL only
// to learn the name of a queue first answered since the last. Nothing
// here grows with the partitions: at a million of them, copying their
// counts on every sample kept ~80 MB live and the collector busy.
type pushRates struct {
	every time.Duration
	ing   IngestStats
	store ConfigStore

	mu    sync.Mutex
	names map[int64]string // queue id -> its name ("": deleted)
	rings map[string][]rateSample
}

func newPushRates(every time.Duration, ing IngestStats, store ConfigStore) *pushRates {
	if every <= 0 {
		every = defaultSampleEvery
	}
	return &pushRates{every: every, ing: ing, store: store, names: map[int64]string{}, rings: map[string][]rateSample{}}
}

// run samples until ctx ends.
func (r *pushRates) run(ctx context.Context) {
	tick := time.NewTicker(r.every)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case at := <-tick.C:
			r.sample(ctx, at)
		}
	}
}

// sample adds one sample to every queue's ring.
func (r *pushRates) sample(ctx context.Context, at time.Time) {
	totals := r.totals(ctx)
	r.mu.Lock()
	defer r.mu.Unlock()
	for queue, t := range totals {
		ring := r.rings[queue]
		if len(ring) == 0 {
			// Counts start at 0 with the gateway: before its first
			// answers, the queue had none.
			ring = append(ring, rateSample{at: at.Add(-r.every)})
		}
		ring = append(ring, rateSample{at: at, pushTotals: t})
		r.rings[queue] = ring[max(0, len(ring)-historyLen):]
	}
}

// totals are every queue's push answers now.
func (r *pushRates) totals(ctx context.Context) map[string]pushTotals {
	counts := map[int64]ingest.PartitionCounts{}
	r.ing.EachQueueCounts(func(queueID int64, c ingest.PartitionCounts) { counts[queueID] = c })
	r.learnQueues(ctx, counts)
	r.mu.Lock()
	defer r.mu.Unlock()
	out := map[string]pushTotals{}
	for id, c := range counts {
		if queue := r.names[id]; queue != "" {
			t := out[queue]
			t.add(c)
			out[queue] = t
		}
	}
	return out
}

// learnQueues finds the names of the queues of counts not known yet (a
// queue id never changes names; a queue made again gets a new id).
func (r *pushRates) learnQueues(ctx context.Context, counts map[int64]ingest.PartitionCounts) {
	r.mu.Lock()
	var unknown []int64
	for id := range counts {
		if _, ok := r.names[id]; !ok {
			unknown = append(unknown, id)
		}
	}
	r.mu.Unlock()
	if len(unknown) == 0 {
		return
	}
	found, err := r.store.QueueNames(ctx, unknown)
	if err != nil {
		return // asked again next time
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, id := range unknown {
		r.names[id] = found[id]
	}
}

// history is queue's answers per interval between its samples, oldest
// first.
func (r *pushRates) history(queue string) []queengate.RateView {
	r.mu.Lock()
	defer r.mu.Unlock()
	ring := r.rings[queue]
	out := make([]queengate.RateView, 0, max(0, len(ring)-1))
	for i := 1; i < len(ring); i++ {
		a, b := ring[i-1], ring[i]
		out = append(out, queengate.RateView{At: b.at.UTC(), Queued: b.queued - a.queued,
			Duplicates: b.duplicates - a.duplicates, Failed: b.failed - a.failed})
	}
	return out
}

// Overview answers every queue at a glance, in name order from the one
// named from on ("": the first), cut to fit one answer.
func (o *Ops) Overview(ctx context.Context, from string) (any, *queengate.Error) {
	// Figures first: a queue created between the two reads has its
	// options all the same.
	figures, err := o.store.QueueFigures(ctx)
	if err != nil {
		return nil, gateway.StoreError(err)
	}
	configs, err := o.store.Queues(ctx)
	if err != nil {
		return nil, gateway.StoreError(err)
	}
	queueName := func(f model.QueueFigures) string { return f.Queue }
	byName(figures, queueName)
	first, werr := fromName(figures, queueName, from, fmt.Sprintf("no queue %q", from))
	if werr != nil {
		return nil, werr
	}
	options := map[string]queengate.QueueOptions{}
	for _, c := range configs {
		options[c.Name] = queueView(c).Options
	}
	out := queengate.OverviewAnswer{SampleSeconds: o.rates.every.Seconds(), Count: len(figures),
		Queues: make([]queengate.QueueOverview, 0, len(figures)-first)}
	for _, f := range figures[first:] {
		out.Queues = append(out.Queues, o.queueOverview(f, options[f.Queue]))
	}
	fitOverview(&out, o.AnswerBudget())
	return out, nil
}

// queueOverview is one queue's entry: its figures, its groups with the
// most lag, and this gateway's push answers.
func (o *Ops) queueOverview(f model.QueueFigures, opts queengate.QueueOptions) queengate.QueueOverview {
	q := queengate.QueueOverview{Queue: f.Queue, Options: opts, Partitions: f.Partitions, StoredMessages: f.StoredMessages,
		DLQDepth: f.DLQDepth, Delayed: f.Delayed, GroupCount: len(f.Groups), Groups: []queengate.GroupLagView{}, History: o.rates.history(f.Queue)}
	groups := slices.Clone(f.Groups)
	slices.SortStableFunc(groups, func(a, b model.GroupLag) int { return cmp.Compare(b.Lag, a.Lag) })
	for _, g := range groups[:min(len(groups), queengate.MaxOverviewGroups)] {
		q.Groups = append(q.Groups, queengate.GroupLagView{Group: g.Group, Lag: g.Lag, Delayed: g.Delayed})
	}
	var t pushTotals
	t.add(o.ing.QueueCounts(f.QueueID))
	q.Queued, q.Duplicates, q.Failed = t.queued, t.duplicates, t.failed
	return q
}

// fitOverview cuts an overview to what fits budget bytes, as fitQueues
// cuts a queue list.
func fitOverview(a *queengate.OverviewAnswer, budget int) {
	if wire.EncodedLen(a) <= budget {
		return
	}
	queues := a.Queues
	n, _ := wire.Fitting(queues, budget-wire.EncodedLen(queengate.OverviewAnswer{SampleSeconds: a.SampleSeconds, Count: a.Count,
		Truncated: true, NextQueue: maxName}))
	a.Queues = queues[:n]
	if n < len(queues) {
		a.Truncated, a.NextQueue = true, queues[n].Queue
	}
}
