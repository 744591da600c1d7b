package pgstore_test

import (
	"context"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/queengate/queengate/model"
)

// seek applies a seek to offset x: every offset below it is consumed,
// every one from it on is new (no attempts, no error, not done), and the
// lease ends, without counting as run out. It says whether a lease was
// running.
func (m *consumerModel) seek(x int64) (leaseEnded bool) {
	leaseEnded = m.running()
	m.lease = nil
	for o := range int64(m.n) {
		if o < x {
			m.completed[o] = m.completed[o] || !m.dead[o]
			continue
		}
		m.completed[o], m.dead[o], m.attempts[o], m.lastError[o] = false, false, 0, ""
	}
	clear(m.failedIn)
	m.unheardFrom, m.unheard = -1, 0
	return leaseEnded
}

// deleteGroup applies a group delete and the group made again by name:
// nothing delivered, nothing done; the dead letters stay in their queue.
// It says what the delete must answer: the messages not consumed and
// whether a lease was running.
func (m *consumerModel) deleteGroup() (unconsumed int64, leaseEnded bool) {
	for o := range int64(m.n) {
		if !m.done(o) {
			unconsumed++
		}
	}
	leaseEnded = m.running()
	m.seek(0)
	m.unconfirmed = 0
	return unconsumed, leaseEnded
}

// seekAgainstModel seeks the group (or its one partition by name) to a
// random offset, checks the answer against the model, and returns the
// lease the seek made stale ("" if none).
func (b *consumerBundle) seekAgainstModel(t *testing.T, rng *rand.Rand, m *consumerModel, where string, seen map[string]int) string {
	t.Helper()
	x := rng.Int64N(int64(m.n) + 1)
	var stale string
	if m.lease != nil {
		stale = m.lease.id
	}
	from := m.cursor()
	want := []model.GroupMove{{Partition: "Default", From: from, To: x, LeaseEnded: m.seek(x)}}
	seek := model.Seek{Offset: x}
	if rng.IntN(2) == 0 {
		seek.Partition = "Default"
	}
	_, got, err := b.store.SeekGroup(context.Background(), b.queue, b.group.Name, seek)
	if err != nil || !slices.Equal(got, want) {
		t.Fatalf("%s: seek to %d: %+v %v; model %+v", where, x, got, err, want)
	}
	switch {
	case x < from:
		seen["seek back"]++
	case x > from:
		seen["seek forward"]++
	}
	if want[0].LeaseEnded {
		seen["seek ending a lease"]++
	}
	return stale
}

// deleteAgainstModel deletes the group, checks the answer against the
// model, makes the group again by name, and returns the lease the delete
// made stale ("" if none).
func (b *consumerBundle) deleteAgainstModel(t *testing.T, m *consumerModel, where string) string {
	t.Helper()
	var stale string
	if m.lease != nil {
		stale = m.lease.id
	}
	unconsumed, leaseEnded := m.deleteGroup()
	d, err := b.store.DeleteGroup(context.Background(), b.queue, b.group.Name)
	if err != nil || d.Unconsumed != unconsumed || (d.LeasesEnded == 1) != leaseEnded {
		t.Fatalf("%s: delete: %+v %v; model %d unconsumed, lease ended %v", where, d, err, unconsumed, leaseEnded)
	}
	b.group = b.testBundle.group(t, b.group.Name)
	return stale
}
