package consume_test

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	queengate "github.com/queengate/queengate"
)

// popModel is what a group's multi-partition pops must deliver, kept
// apart from the gateway: per partition, the messages pushed, those
// completed, each one's deliveries so far, and the lease on it (the
// consumer and what it delivered unsettled).
type popModel struct {
	pushed    map[string]int
	completed map[string]map[int64]bool
	attempts  map[string]map[int64]int
	held      map[string]*modelHold // partition -> its running lease
}

type modelHold struct {
	consumer string
	lease    queengate.PopLease
}

func newPopModel() *popModel {
	return &popModel{pushed: map[string]int{}, completed: map[string]map[int64]bool{}, attempts: map[string]map[int64]int{},
		held: map[string]*modelHold{}}
}

func (m *popModel) push(p string, n int) {
	if m.completed[p] == nil {
		m.completed[p], m.attempts[p] = map[int64]bool{}, map[int64]int{}
	}
	m.pushed[p] += n
}

// due lists partition p's offsets a pop delivers next, up to k: from the
// first not completed, skipping the completed ones.
func (m *popModel) due(p string, k int) []int64 {
	var out []int64
	for o := int64(0); o < int64(m.pushed[p]) && len(out) < k; o++ {
		if !m.completed[p][o] {
			out = append(out, o)
		}
	}
	return out
}

// free lists the partitions a pop may lease: with work, not leased.
func (m *popModel) free() []string {
	var out []string
	for p := range m.pushed {
		if m.held[p] == nil && len(m.due(p, 1)) > 0 {
			out = append(out, p)
		}
	}
	return out
}

// checkPop fails t unless a pop of up to max messages over up to n
// partitions by consumer delivered what the model says, and applies it.
func (m *popModel) checkPop(t *testing.T, consumer string, max, n int, a queengate.PopAnswer) {
	t.Helper()
	leases := a.Leases()
	left := max
	for _, l := range leases {
		if h := m.held[l.Partition]; h != nil {
			t.Fatalf("%s got partition %s, leased to %s", consumer, l.Partition, h.consumer)
		}
		want := m.due(l.Partition, left)
		var got []int64
		for _, d := range l.Messages {
			got = append(got, d.Offset)
			if m.attempts[l.Partition][d.Offset]++; d.Attempts != m.attempts[l.Partition][d.Offset] {
				t.Fatalf("partition %s offset %d: attempt %d, the model's %d", l.Partition, d.Offset, d.Attempts, m.attempts[l.Partition][d.Offset])
			}
		}
		if len(want) == 0 || !slices.Equal(got, want) {
			t.Fatalf("%s got offsets %v of partition %s, the model's %v", consumer, got, l.Partition, want)
		}
		m.held[l.Partition] = &modelHold{consumer: consumer, lease: l}
		left -= len(got)
	}
	switch {
	case len(leases) > n || left < 0:
		t.Fatalf("a pop of %d over %d partitions took %d leases, %d messages", max, n, len(leases), max-left)
	case len(leases) < n && left > 0 && len(m.free()) > 0:
		var state []string
		for _, p := range m.free() {
			state = append(state, fmt.Sprintf("%s: pushed %d, due %v, attempts %v", p, m.pushed[p], m.due(p, 100), m.attempts[p]))
		}
		t.Fatalf("a pop of %d over %d partitions stopped at %d leases (%v), %d left to ask for, while %v have work", max, n, len(leases), leasedParts(leases), left, state)
	}
}

// settle makes consumer's acks of its leases, each completing all,
// completing all but failing one, or settling a part (the lease runs
// on), as r picks (nil: completing all); it returns the acks, per ack whether its lease ends,
// and what applies them to the model once a pop carries them.
func (m *popModel) settle(r *rand.Rand, consumer string) (acks []queengate.PopAck, ends []bool, apply func()) {
	var applies []func()
	for _, p := range slices.Sorted(mapKeys(m.held)) {
		h := m.held[p]
		if h.consumer != consumer {
			continue
		}
		ack := queengate.PopAck{Partition: p, LeaseID: h.lease.LeaseID}
		msgs := h.lease.Messages
		choice := 0 // r nil: complete all
		if r != nil {
			choice = r.IntN(3)
		}
		if choice == 2 && len(msgs) > 1 {
			msgs = msgs[:len(msgs)-1] // the last left unsettled: the lease runs on
		}
		var completed []int64
		for i, d := range msgs {
			status := queengate.AckCompleted
			if choice == 1 && i == len(msgs)/2 && d.Attempts < 2 {
				status = queengate.AckFailed
			}
			ack.Items = append(ack.Items, queengate.AckItem{Offset: &d.Offset, Status: status})
			if status == queengate.AckCompleted {
				completed = append(completed, d.Offset)
			}
		}
		end := len(msgs) == len(h.lease.Messages)
		applies = append(applies, func() {
			for _, o := range completed {
				m.completed[p][o] = true
			}
			if end {
				delete(m.held, p)
			} else {
				h.lease.Messages = h.lease.Messages[len(msgs):]
			}
		})
		acks, ends = append(acks, ack), append(ends, end)
	}
	return acks, ends, func() {
		for _, a := range applies {
			a()
		}
	}
}

func leasedParts(leases []queengate.PopLease) []string {
	var out []string
	for _, l := range leases {
		out = append(out, fmt.Sprint(l.Partition, len(l.Messages)))
	}
	return out
}

func mapKeys[K comparable, V any](m map[K]V) func(func(K) bool) {
	return func(yield func(K) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}

// Multi-partition pops of three consumers of a group, and their acks
// carried by the next pops (completing, failing, or settling part of
// each lease), agree with the model at every step: each partition is
// leased to one consumer at a time, delivered from its first message not
// completed, in order, with its attempts; a pop stops short of its
// partitions only when no other partition has work; each lease ends when
// all it delivered is settled.
func TestMultiPartitionPopsAgreeWithTheModel(t *testing.T) {
	t.Parallel()
	for seed := range uint64(3) {
		t.Run(fmt.Sprint("seed ", seed), func(t *testing.T) {
			t.Parallel()
			r := rand.New(rand.NewPCG(seed, 34))
			// Whether a pop carries its one ack as "ack" (a cycle, which
			// the tail may serve) or as a list of one: a source of its
			// own, so that the histories are the ones they were.
			carriers := rand.New(rand.NewPCG(seed, 35))
			m := newPopModel()
			var parts []string
			for i := range 6 {
				p := fmt.Sprint("p", i)
				parts = append(parts, p)
				m.push(p, 1+r.IntN(6))
			}
			e, c := consuming(t, 0)
			for _, p := range parts {
				e.fill(t, m.pushed[p], p)
			}
			consumers := []string{"a", "b", "c"}
			pending := map[string][]bool{}
			acksOf := map[string][]queengate.PopAck{}
			applyOf := map[string]func(){}
			for step := range 60 {
				who := consumers[r.IntN(len(consumers))]
				if step%15 == 14 { // more messages for a partition, maybe held
					p := parts[r.IntN(len(parts))]
					more := 1 + r.IntN(3)
					pushMore(t, e, p, m.pushed[p], more)
					m.push(p, more)
				}
				req := queengate.PopRequest{Group: "g", Consumer: who, Max: 1 + r.IntN(12), Partitions: 1 + r.IntN(4), LeaseMs: 600000}
				if len(acksOf[who]) > 0 {
					req.Acks = acksOf[who]
					applyOf[who]()
				}
				carry(carriers, &req)
				a, err := c.Pop(t.Context(), e.Queue, "", req)
				if err != nil {
					t.Fatalf("step %d: %v", step, err)
				}
				checkCarried(t, req, pending[who], a)
				m.checkPop(t, who, req.Max, req.Partitions, a)
				acksOf[who], pending[who], applyOf[who] = m.settle(r, who)
			}
			// Then each consumer completes all it holds and pops on until
			// every message is completed, once.
			for range 100 {
				done := true
				for _, who := range consumers {
					req := queengate.PopRequest{Group: "g", Consumer: who, Max: 10, Partitions: 3, Acks: acksOf[who]}
					if len(req.Acks) > 0 {
						applyOf[who]()
					}
					carry(carriers, &req)
					a, err := c.Pop(t.Context(), e.Queue, "", req)
					if err != nil {
						t.Fatal(err)
					}
					checkCarried(t, req, pending[who], a)
					m.checkPop(t, who, req.Max, req.Partitions, a)
					acksOf[who], pending[who], applyOf[who] = m.settle(nil, who)
					done = done && len(req.Acks) == 0 && len(a.Leases()) == 0
				}
				if done {
					break
				}
			}
			groups, err := c.Groups(t.Context(), e.Queue)
			if err != nil || groups.Groups[0].Lag != 0 {
				t.Fatalf("after the drain: %+v, %v; want no lag", groups, err)
			}
			t.Logf("cycles from the tail: %+v", e.ing.Tail().Counts())
		})
	}
}

// carry sends, now and then, a pop's one ack as "ack" rather than as a
// list of one: a cycle, which the gateway may serve from its tail.
func carry(r *rand.Rand, req *queengate.PopRequest) {
	if len(req.Acks) == 1 && r.IntN(2) == 0 {
		req.Ack, req.Acks = &req.Acks[0], nil
	}
}

// checkCarried checks the answer of the acks req carried, as "ack" or
// "acks".
func checkCarried(t *testing.T, req queengate.PopRequest, ends []bool, a queengate.PopAnswer) {
	t.Helper()
	if req.Ack != nil {
		if a.Ack == nil {
			t.Fatalf("a pop carrying an ack was answered without one: %+v", a)
		}
		checkAcks(t, []queengate.PopAck{*req.Ack}, ends, []queengate.AckAnswer{*a.Ack})
		return
	}
	checkAcks(t, req.Acks, ends, a.Acks)
}

// pushMore pushes n more messages to partition p, whose first is number
// from (transactionIds as fill's).
func pushMore(t *testing.T, e *testEnv, p string, from, n int) {
	t.Helper()
	var ids []string
	for i := from; i < from+n; i++ {
		ids = append(ids, fmt.Sprintf("%s-%d", p, i))
	}
	wantStatus(t, e.Push(t, e.Subject(p), msgs(ids...)), slices.Repeat([]string{"queued"}, n)...)
}

// checkAcks fails t unless each carried ack's answer settled every item
// and ended its lease as the model says.
func checkAcks(t *testing.T, sent []queengate.PopAck, ends []bool, got []queengate.AckAnswer) {
	t.Helper()
	if len(got) != len(sent) {
		t.Fatalf("%d acks answered, %d sent", len(got), len(sent))
	}
	for i, a := range got {
		for _, it := range a.Items {
			if it.Result != "acked" {
				t.Fatalf("ack %d of partition %s: item %+v, want acked", i, sent[i].Partition, it)
			}
		}
		if a.LeaseEnded != ends[i] {
			t.Fatalf("ack %d of partition %s: leaseEnded %v, the model's %v", i, sent[i].Partition, a.LeaseEnded, ends[i])
		}
	}
}
