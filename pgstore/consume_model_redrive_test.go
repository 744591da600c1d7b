package pgstore_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/queengate/queengate/model"
)

// TestConsumerGroupWithRedrivesAgreesWithItsModel is the history with
// seeks and deletes, on fewer messages with fewer attempts (more dead
// letters, and the cursor reaching the end; one attempt in half the
// seeds), and redrives among the
// steps: of every dead letter, or of some by group, original offsets or
// limit, now and then retried at once. A redriven message is a new one at
// the end of the partition, with its original transactionId and data,
// delivered to the group from attempt 1, and to another group that
// consumed the original.
func TestConsumerGroupWithRedrivesAgreesWithItsModel(t *testing.T) {
	t.Parallel()
	for seed := range uint64(4) {
		t.Run(fmt.Sprint("seed", seed), func(t *testing.T) {
			t.Parallel()
			runConsumerModel(t, seed, 40, 1+int(seed%2), 2500, modelDelays{}, modelSteps{seeks: true, redrives: true})
		})
	}
}

// modelLetter is a dead letter of the group: the offset of the message
// it stands for, and whether a redrive moved it.
type modelLetter struct {
	offset   int64
	redriven bool
}

// modelFilter selects dead letters as a redrive's body does: by the group
// that dead-lettered them ("" any) and an original offset range (-1: no
// bound on that side).
type modelFilter struct {
	group    string
	from, to int64
}

// selects says whether the filter takes the group's dead letter of offset o.
func (f modelFilter) selects(o int64) bool {
	return (f.group == "" || f.group == "g") && (f.from < 0 || o >= f.from) && (f.to < 0 || o <= f.to)
}

// request is the filter as the store takes it.
func (f modelFilter) request() model.DeadLetterFilter {
	out := model.DeadLetterFilter{Group: f.group}
	if f.from >= 0 {
		out.FromOffset = &f.from
	}
	if f.to >= 0 {
		out.ToOffset = &f.to
	}
	return out
}

// pending is the dead letters not redriven yet, in the dead-letter
// queue's order: the offsets of the messages they stand for.
func (m *consumerModel) pending() []int64 {
	var out []int64
	for _, l := range m.letters {
		if !l.redriven {
			out = append(out, l.offset)
		}
	}
	return out
}

// redrive moves up to limit of the pending dead letters f selects, oldest
// first, each to a new message at the end of the partition with the
// transactionId and data of the one it stands for (never delivered to the
// group: its attempts start at 1), and says what the redrive answers.
func (m *consumerModel) redrive(f modelFilter, limit int) model.Redriven {
	var out model.Redriven
	first := int64(m.n)
	for i := range m.letters {
		l := &m.letters[i]
		if l.redriven || !f.selects(l.offset) {
			continue
		}
		if out.Moved == limit {
			out.More = true
			break
		}
		l.redriven = true
		out.Moved++
		m.appendCopy(l.offset)
	}
	if out.Moved > 0 {
		out.FirstOffset, out.LastOffset = first, int64(m.n-1)
	}
	return out
}

// appendCopy appends a new message carrying offset o's transactionId and
// data.
func (m *consumerModel) appendCopy(o int64) {
	m.n++
	m.txn, m.data = append(m.txn, m.txn[o]), append(m.data, m.data[o])
	m.attempts, m.lastError = append(m.attempts, 0), append(m.lastError, "")
	m.completed, m.dead = append(m.completed, false), append(m.dead, false)
}

// resolve is the offset an ack naming transactionId id settles
// (docs/protocol.md, "Ack"): its first copy among the messages delivered
// to the group from its cursor on; else, through the window, its first
// stored copy.
func (m *consumerModel) resolve(id string) int64 {
	for o := m.cursor(); o < int64(m.n); o++ {
		if m.txn[o] == id && m.delivered(o) {
			return o
		}
	}
	return int64(slices.Index(m.txn, id))
}

// delivered says whether offset o was handed to the group since its
// cursor last moved past it: under an attempt, or under the lease.
func (m *consumerModel) delivered(o int64) bool {
	return m.attempts[o] > 0 || m.lease != nil && slices.Contains(m.lease.delivered, o)
}

// resolveTxnIDs sets the offset of each item naming a transactionId to
// the one it settles.
func (m *consumerModel) resolveTxnIDs(offsets []int64, items []model.Settlement) {
	for i, it := range items {
		if it.TxnID != "" {
			offsets[i] = m.resolve(it.TxnID)
		}
	}
}

// randomRedrive picks a redrive: all, by group (the one that
// dead-lettered, or another), by a range of original offsets, and now
// and then a small limit.
func randomRedrive(rng *rand.Rand, m *consumerModel) (modelFilter, int) {
	f := modelFilter{from: -1, to: -1}
	switch rng.IntN(4) {
	case 1:
		f.group = "g"
		if rng.IntN(3) == 0 {
			f.group = "other"
		}
	case 2:
		f.from = rng.Int64N(int64(m.n))
		f.to = f.from + rng.Int64N(int64(m.n)-f.from)
		if rng.IntN(3) == 0 {
			f.from = -1
		}
	}
	limit := 1000
	if rng.IntN(3) == 0 {
		limit = 1 + rng.IntN(3)
	}
	return f, limit
}

// redriveAgainstModel redrives (and now and then retries the same
// request at once) and checks each answer, the partition, the pending
// dead letters and the dead-letter queue's depth against the model.
func (b *consumerBundle) redriveAgainstModel(t *testing.T, rng *rand.Rand, m *consumerModel, where string, seen map[string]int) {
	t.Helper()
	f, limit := randomRedrive(rng, m)
	for retry := false; ; retry = true {
		from := m.n
		want := m.redrive(f, limit)
		got, err := b.store.Redrive(context.Background(), b.queue, "Default", f.request(), limit)
		if err != nil || got != want {
			t.Fatalf("%s: redrive %+v limit %d (retry %v): %+v %v; model %+v", where, f, limit, retry, got, err, want)
		}
		b.checkRedrivenAgainstModel(t, m, from, where)
		switch {
		case retry && want.Moved == 0:
			seen["redrive retried moving nothing"]++
		case want.Moved == 0:
			seen["redrive moving nothing"]++
		case len(m.pending()) > 0:
			seen["redrive of some"]++
		default:
			seen["redrive"]++
		}
		if retry || rng.IntN(2) == 0 {
			return
		}
	}
}

// checkRedrivenAgainstModel checks the partition's length, the messages
// from offset from on (what a redrive appended), the dead letters listed
// as pending and the queue's dead-letter depth against the model.
func (b *consumerBundle) checkRedrivenAgainstModel(t *testing.T, m *consumerModel, from int, where string) {
	t.Helper()
	if last := b.lastOffsetOf(t, b.queue); last != int64(m.n-1) {
		t.Fatalf("%s: the partition ends at offset %d, the model at %d", where, last, m.n-1)
	}
	if from < m.n {
		back := b.readFrom(t, int64(from))
		if len(back) != min(m.n-from, 100) {
			t.Fatalf("%s: %d messages from offset %d, the model %d", where, len(back), from, m.n-from)
		}
		for _, s := range back {
			if s.TxnID != m.txn[s.Offset] || string(s.Data) != m.data[s.Offset] {
				t.Fatalf("%s: offset %d holds %q %s, the model %q %s", where, s.Offset, s.TxnID, s.Data, m.txn[s.Offset], m.data[s.Offset])
			}
		}
	}
	listed, _, _, err := b.store.DeadLetters(context.Background(), b.queue, "Default", model.DeadLetterFilter{}, 1000)
	if err != nil {
		t.Fatal(err)
	}
	var offsets []int64
	for _, p := range listed {
		if p.Letter.Group != "g" || p.Letter.TxnID != m.txn[p.Letter.Offset] {
			t.Fatalf("%s: listed dead letter %+v, the model's message there %q", where, p.Letter, m.txn[p.Letter.Offset])
		}
		offsets = append(offsets, p.Letter.Offset)
	}
	if want := m.pending(); !slices.Equal(offsets, want) {
		t.Fatalf("%s: dead letters pending %v, the model %v", where, offsets, want)
	}
	if depth := b.dlqDepth(t); depth != int64(len(offsets)) {
		t.Fatalf("%s: dead-letter depth %d, the model %d pending", where, depth, len(offsets))
	}
}

// dlqDepth is the test queue's dlqDepth figure.
func (b *consumerBundle) dlqDepth(t *testing.T) int64 {
	t.Helper()
	figures, err := b.store.QueueFigures(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range figures {
		if f.Queue == b.queue {
			return f.DLQDepth
		}
	}
	t.Fatalf("no figures for %s", b.queue)
	return 0
}

// consumeAll makes group name and completes every message pushed so far
// under it.
func (b *consumerBundle) consumeAll(t *testing.T, name string) model.Group {
	t.Helper()
	g := b.testBundle.group(t, name)
	r := b.pop(t, g, 1000)
	items := make([]model.Settlement, len(r.Messages))
	for i, d := range r.Messages {
		items[i] = doneAt(d.Offset)
	}
	if a, err := b.store.Ack(context.Background(), g, b.part.ID, r.LeaseID, items); err != nil || !a.LeaseEnded {
		t.Fatalf("group %s completing %d messages: %+v %v", name, len(items), a, err)
	}
	return g
}

// checkOtherGroupAgainstModel pops, as group g that completed the
// messages pushed (the first pushed), everything left: the copies the
// redrives appended, each at attempt 1 with the model's transactionId.
func (b *consumerBundle) checkOtherGroupAgainstModel(t *testing.T, g model.Group, m *consumerModel, pushed int) {
	t.Helper()
	r := b.pop(t, g, 1000)
	var want, got []string
	for o := pushed; o < m.n; o++ {
		want = append(want, fmt.Sprintf("%d %s attempt 1", o, m.txn[o]))
	}
	for _, d := range r.Messages {
		got = append(got, fmt.Sprintf("%d %s attempt %d", d.Offset, d.TxnID, d.Attempts))
	}
	if !slices.Equal(got, want) {
		t.Fatalf("group %s got %q after the history, the model %q", g.Name, got, want)
	}
}
