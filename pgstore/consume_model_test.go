package pgstore_test

import (
	"cmp"
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/queengate/queengate/model"
)

// consumerModel is what a group's state on one partition must be, kept
// apart from SQL: attempts per offset, each one's last error, what is
// completed or dead-lettered, the current lease, the deliveries taken
// back unconfirmed, and the leases run out unheard from one offset (every
// maxUnheard-th counts its attempts); and time, in whole hours (clock),
// with the delays the queue and failures ask for.
type consumerModel struct {
	n, maxAttempts      int
	attempts            []int
	lastError           []string
	completed           []bool
	dead                []bool
	failedIn            map[int64]string // the lease that last failed an offset
	deadLetters         int
	dlq                 map[int64]bool // offsets with a dead letter, which a seek or a group delete leaves there
	letters             []modelLetter  // the dead-letter queue, in the order the dead letters came
	txn, data           []string       // each offset's transactionId and data: a redrive appends copies
	pushed              int            // offsets pushed before the history: from it on, copies
	redrivenDeadLetters int
	unconfirmed         int
	maxUnheard          int   // the queue's maxUnheardDeliveries
	unheardFrom         int64 // the first offset of the leases run out unheard, -1 none
	unheard             int   // how many from unheardFrom
	unheardCounted      int   // how many of them counted their attempts
	deadAfterUnheard    int   // dead letters whose last error is such a count
	lease               *modelLease
	delays              modelDelays
	clock               int // hours moved
	heldUntil           int // no pop before: the failures' delays
}

// modelDelays are a queue's retry options and whether failures ask for
// their own delays, in hours.
type modelDelays struct {
	retry   int
	backoff []int
	asked   []int // the delays a failure picks from (0: the queue's)
}

// after is how long a failure at attempt n waits, by the queue's options.
func (d modelDelays) after(n int) int {
	if len(d.backoff) > 0 {
		return d.backoff[min(n, len(d.backoff))-1]
	}
	return d.retry
}

type modelLease struct {
	id        string
	delivered []int64
	expired   bool
	// heard: an ack, renewal or release named the lease, so its
	// deliveries are attempts: its answer arrived.
	heard bool
	// crashed: its consumer died before a word; nothing names it again.
	crashed bool
	// set: the clock when the lease's end was last set (pop, renewal);
	// once expired, free is the first hour at which its end lies behind,
	// and delay how long after that a heard lease holds the partition
	// (by the highest attempt it delivered).
	set, free, delay int
}

// held says whether a delay keeps the group off the partition: a
// failure's, or a heard lease's that ran out.
func (m *consumerModel) held() bool {
	l := m.lease
	return m.clock < m.heldUntil || l != nil && l.expired && l.heard && m.clock < l.free+l.delay
}

// tick moves the clock an hour: a running lease (a minute long) runs
// out within it.
func (m *consumerModel) tick() {
	m.clock++
	if m.running() {
		m.lease.expired, m.lease.free = true, m.lease.set+1
	}
}

func (m *consumerModel) done(o int64) bool { return m.completed[o] || m.dead[o] }

// cursor is the first offset neither completed nor dead-lettered.
func (m *consumerModel) cursor() int64 {
	for o := range m.n {
		if !m.done(int64(o)) {
			return int64(o)
		}
	}
	return int64(m.n)
}

// running: the lease holds the partition.
func (m *consumerModel) running() bool { return m.lease != nil && !m.expired() }
func (m *consumerModel) expired() bool { return m.lease.expired }

// pop says what a pop of up to k must deliver (offsets and attempts) and
// dead-letter, and applies it.
func (m *consumerModel) pop(k int) (delivered []int64, attempts []int, deadLettered int) {
	if m.running() || m.cursor() >= int64(m.n) || m.held() {
		return nil, nil, 0
	}
	if m.lease != nil {
		m.leaseRanOut()
	}
	m.lease = nil
	var picked []int64
	for o := m.cursor(); o < int64(m.n) && len(picked) < k; o++ {
		if !m.done(o) {
			picked = append(picked, o)
		}
	}
	for _, o := range picked {
		if m.maxAttempts > 0 && m.attempts[o] >= m.maxAttempts {
			m.deadLetter(o)
			deadLettered++
			continue
		}
		m.attempts[o]++
		delivered, attempts = append(delivered, o), append(attempts, m.attempts[o])
	}
	return delivered, attempts, deadLettered
}

// deadLetter settles offset o by a dead letter: one in the dead-letter
// queue per message and group name, so a second of o (after a seek or a
// group delete) adds none.
func (m *consumerModel) deadLetter(o int64) {
	if !m.dlq[o] {
		m.letters = append(m.letters, modelLetter{offset: o})
	}
	m.dead[o], m.dlq[o] = true, true
	m.deadLetters++
	if strings.Contains(m.lastError[o], "unheard") {
		m.deadAfterUnheard++
	}
	if o >= int64(m.pushed) {
		m.redrivenDeadLetters++
	}
}

// leaseRanOut ends a lease that ran out: unheard, it is taken back as if
// never delivered, and counted unconfirmed, unless it is the
// maxUnheard-th (or 2×, 3×…) run out unheard from its first offset;
// heard from, or so counted, its attempts stand and what it left
// unsettled says why.
func (m *consumerModel) leaseRanOut() {
	why := "lease ran out"
	if !m.lease.heard {
		from := m.lease.delivered[0]
		if m.unheardFrom != from {
			m.unheardFrom, m.unheard = from, 0
		}
		m.unheard++
		if m.maxUnheard == 0 || m.unheard%m.maxUnheard != 0 {
			m.takeBack()
			m.unconfirmed += len(m.lease.delivered)
			return
		}
		m.unheardCounted++
		why = fmt.Sprintf("lease ran out unheard %d times", m.unheard)
	}
	for _, o := range m.lease.delivered {
		if !m.done(o) && m.failedIn[o] != m.lease.id {
			m.lastError[o] = fmt.Sprintf("%s (consumer 'c', attempt %d)", why, m.attempts[o])
		}
	}
}

// takeBack uncounts the lease's deliveries.
func (m *consumerModel) takeBack() {
	for _, o := range m.lease.delivered {
		m.attempts[o]--
	}
}

// undo says whether an undo of lease id takes it back, and applies it.
func (m *consumerModel) undo(id string) bool {
	if m.lease == nil || m.lease.id != id || m.lease.heard {
		return false
	}
	m.takeBack()
	m.lease = nil
	return true
}

// already is how an ack answers for a message settled before.
func (m *consumerModel) already(o int64) string {
	if m.dlq[o] {
		return model.AckDeadLettered
	}
	return model.AckAlready
}

// settle applies an ack of offsets under the current lease and says each
// result; the lease ends once everything delivered under it is settled.
func (m *consumerModel) settle(offsets []int64, completed []bool, delays []int) (results []string, ended bool) {
	m.lease.heard = true
	for i, o := range offsets {
		switch {
		case m.done(o) || slices.Contains(offsets[:i], o) || m.failedIn[o] == m.lease.id:
			results = append(results, m.already(o))
		case m.expired():
			results = append(results, model.AckLeaseExpired)
		case !slices.Contains(m.lease.delivered, o):
			results = append(results, model.AckNotInLease)
		case completed[i]:
			m.completed[o] = true
			results = append(results, model.AckAcked)
		default:
			m.failedIn[o] = m.lease.id
			m.lastError[o] = "e"
			if m.maxAttempts > 0 && m.attempts[o] >= m.maxAttempts {
				m.deadLetter(o)
			} else if wait := cmp.Or(delays[i], m.delays.after(m.attempts[o])); m.clock+wait > m.heldUntil {
				m.heldUntil = m.clock + wait
			}
			results = append(results, model.AckAcked)
		}
	}
	if m.expired() {
		return results, false
	}
	for _, o := range m.lease.delivered {
		if !m.done(o) && m.failedIn[o] != m.lease.id {
			return results, false
		}
	}
	m.lease = nil
	return results, true
}

// TestConsumerGroupAgreesWithItsModel drives one group on one partition
// through random pops, acks (completed and failed, in and out of order,
// by offset and by transactionId, under current and stale leases),
// renewals, lease expiries (heard from or not), releases and undos of
// pops never answered, and checks every answer, the cursor and the
// unconfirmed count against the model after each step.
func TestConsumerGroupAgreesWithItsModel(t *testing.T) {
	t.Parallel()
	for seed := range uint64(4) {
		t.Run(fmt.Sprint("seed", seed), func(t *testing.T) {
			t.Parallel()
			runConsumerModel(t, seed, 120, 3, 400, modelDelays{}, modelSteps{})
		})
	}
}

// TestConsumerGroupWithDelaysAgreesWithItsModel is the same history with
// delayed redelivery: the queue's delay (a backoff list by attempt, or
// one delay), failures asking for their own, and the clock moving by
// hours.
func TestConsumerGroupWithDelaysAgreesWithItsModel(t *testing.T) {
	t.Parallel()
	for seed := range uint64(4) {
		delays := modelDelays{retry: 1, asked: []int{0, 0, 1, 3}}
		if seed%2 == 0 {
			delays.backoff = []int{1, 0, 2}
		}
		t.Run(fmt.Sprint("seed", seed), func(t *testing.T) {
			t.Parallel()
			runConsumerModel(t, seed, 120, 3, 800, delays, modelSteps{})
		})
	}
}

// TestConsumerGroupWithSeeksAndDeletesAgreesWithItsModel is the same
// history with seeks of the group (back and forward, of the group or of
// its partition, leases running or not) and deletes of the group (made
// again by name by the next step) among the steps.
func TestConsumerGroupWithSeeksAndDeletesAgreesWithItsModel(t *testing.T) {
	t.Parallel()
	for seed := range uint64(4) {
		t.Run(fmt.Sprint("seed", seed), func(t *testing.T) {
			t.Parallel()
			runConsumerModel(t, seed, 120, 3, 600, modelDelays{}, modelSteps{seeks: true})
		})
	}
}

// TestConsumerGroupWithCrashesAgreesWithItsModel is the same history
// with consumers that die on a pop, before a word, as often as not: their
// leases run out unheard, and every maxUnheardDeliveries-th from one
// offset counts its attempts, so messages are dead-lettered by them too.
func TestConsumerGroupWithCrashesAgreesWithItsModel(t *testing.T) {
	t.Parallel()
	for seed := range uint64(4) {
		t.Run(fmt.Sprint("seed", seed), func(t *testing.T) {
			t.Parallel()
			runConsumerModel(t, seed, 60, 3, 600, modelDelays{}, modelSteps{seeks: seed == 3, crashes: true, maxUnheard: 2 + int(seed%2)})
		})
	}
}

// modelSteps are the kinds of step a history has beyond pops, acks,
// renewals, expiries, releases and undos, and the queue's
// maxUnheardDeliveries.
type modelSteps struct {
	seeks    bool // seeks and deletes of the group
	redrives bool // redrives of the dead letters (with seeks and deletes)
	// crashes: now and then a pop's consumer dies at once, and its lease
	// runs out unheard.
	crashes bool
	// maxUnheard is the queue's maxUnheardDeliveries; 0: the default.
	maxUnheard int
}

func runConsumerModel(t *testing.T, seed uint64, n, maxAttempts, steps int, delays modelDelays, extra modelSteps) {
	b := setupConsumerInFrames(t, n, seed)
	ctx := context.Background()
	b.setMaxAttempts(t, maxAttempts)
	hours := func(h []int) *[]int {
		ms := make([]int, len(h))
		for i, v := range h {
			ms[i] = v * int(time.Hour/time.Millisecond)
		}
		return &ms
	}
	maxUnheard := cmp.Or(extra.maxUnheard, model.DefaultMaxUnheardDeliveries)
	b.configure(t, model.OptionsPatch{RetryDelayMs: &(*hours([]int{delays.retry}))[0], RetryBackoffMs: hours(delays.backoff),
		MaxUnheardDeliveries: &maxUnheard})
	m := &consumerModel{n: n, pushed: n, maxAttempts: maxAttempts, attempts: make([]int, n), lastError: make([]string, n),
		completed: make([]bool, n), dead: make([]bool, n), failedIn: map[int64]string{}, delays: delays,
		dlq: map[int64]bool{}, maxUnheard: maxUnheard, unheardFrom: -1}
	for i := range n {
		id := fmt.Sprintf("t%d", i)
		m.txn, m.data = append(m.txn, id), append(m.data, frameData(i, id))
	}
	var other model.Group // a group that consumed what was pushed, to see what redrives bring back
	if extra.redrives {
		other = b.consumeAll(t, "other")
	}
	rng := rand.New(rand.NewPCG(seed, 99))
	carriers := rand.New(rand.NewPCG(seed, 7))
	var stale string // a lease that is no longer the partition's
	seen := map[string]int{}
	clockMoves := 0
	if delays.asked != nil {
		clockMoves = 1
	}
	for step := range steps {
		where := fmt.Sprintf("step %d", step)
		// The histories without delays or seeks are the ones they were
		// before either: no clock moves, no seeks.
		kinds := 12
		if extra.seeks {
			kinds = 14
		}
		if extra.redrives {
			kinds = 15
		}
		// popStep checks a pop of up to k, made by pop, against the model.
		popStep := func(k int, pop func() model.PopResult) {
			old := m.lease
			if old != nil && old.expired && !m.held() {
				seen[fmt.Sprint("expiry heard ", old.heard)]++
			}
			if m.held() && !m.running() && m.cursor() < int64(m.n) {
				seen[fmt.Sprint("held by a failure ", m.clock < m.heldUntil)]++
			}
			wantOff, wantAtt, wantDead := m.pop(k)
			got := pop()
			b.remember(got)
			var gotErr, wantErr []string
			for i, d := range got.Messages {
				o := wantOff[min(i, len(wantOff)-1)]
				gotErr = append(gotErr, d.LastError)
				wantErr = append(wantErr, m.lastError[o])
				if d.TxnID != m.txn[o] || string(d.Data) != m.data[o] {
					t.Fatalf("%s: pop delivered %d as %q %s; model %q %s", where, d.Offset, d.TxnID, d.Data, m.txn[o], m.data[o])
				}
			}
			if !slices.Equal(offsetsOf(got), wantOff) || !slices.Equal(attemptsOf(got), wantAtt) || got.DeadLettered != wantDead ||
				!slices.Equal(gotErr, wantErr) {
				t.Fatalf("%s: pop %d got %v attempts %v errors %q dead %d; model %v %v %q %d", where, k, offsetsOf(got), attemptsOf(got),
					gotErr, got.DeadLettered, wantOff, wantAtt, wantErr, wantDead)
			}
			if old != nil && m.lease != old {
				stale = old.id // replaced, or gone with the pop that found it run out
			}
			if len(wantOff) > 0 {
				m.lease = &modelLease{id: got.LeaseID, delivered: wantOff, set: m.clock, delay: m.delays.after(slices.Max(wantAtt))}
				seen["pop"]++
				if extra.crashes && rng.IntN(2) == 0 { // its consumer dies before a word
					b.backdateLease(t)
					m.lease.expired, m.lease.free, m.lease.crashed = true, m.clock, true
					seen["crash"]++
				}
			}
			for i, a := range wantAtt {
				if a > 1 {
					seen["redelivery"]++
				}
				if wantOff[i] >= int64(n) {
					seen["redriven message delivered"]++
				}
			}
		}
		switch r := rng.IntN(kinds + clockMoves); {
		case r < 3:
			k := 1 + rng.IntN(8)
			popStep(k, func() model.PopResult { return b.pop(t, b.group, k) })
		case r < 7 && m.lease != nil && !m.lease.crashed:
			offsets, completed, items := randomAck(rng, m)
			// Half the acks are carried by a pop, as the gateway serves
			// it: the usual one in one statement, any other by an ack.
			// Those are picked by a second source, so that the histories
			// are the ones they were before, but for the pops carried.
			carried, k := carriers.IntN(2) == 0, 1+carriers.IntN(8)
			if carried && carriers.IntN(4) == 0 {
				offsets, completed, items = wholeLeaseAck(carriers.IntN(2) == 0, m)
			}
			m.resolveTxnIDs(offsets, items)
			lease := m.lease.id
			asked := make([]int, len(items))
			for i := range items {
				if !completed[i] && delays.asked != nil {
					asked[i] = delays.asked[rng.IntN(len(delays.asked))]
					items[i].DelayMs = (time.Duration(asked[i]) * time.Hour).Milliseconds()
				}
			}
			wantRes, wantEnded := m.settle(offsets, completed, asked)
			if fastPathTaken(t, b, lease, items) {
				seen["ack by the shortcut"]++
			}
			var popped *model.PopResult
			a, ok := model.SettledBatch{}, false
			served := b.tailServed()
			if carried {
				a, popped, ok = b.cycle(t, k, lease, items)
			}
			if b.tailServed() > served {
				seen["tail served"]++
			}
			if ok {
				seen["cycle"]++
			} else {
				a = b.ack(t, lease, items...)
			}
			if !slices.Equal(results(a), wantRes) || a.LeaseEnded != wantEnded {
				t.Fatalf("%s: ack %v %v got %v ended %v; model %v ended %v", where, offsets, completed, results(a), a.LeaseEnded, wantRes, wantEnded)
			}
			if wantEnded {
				stale = lease
			}
			for _, r := range wantRes {
				seen["ack "+r]++
				seen["answer "+r]++
			}
			if carried {
				if popped != nil {
					seen["cycle popped"]++
				}
				popStep(k, func() model.PopResult {
					if popped != nil {
						return *popped
					}
					return b.pop(t, b.group, k)
				})
			}
		case r < 8 && m.lease != nil && !m.expired():
			b.backdateLease(t)
			m.lease.expired, m.lease.free = true, m.clock
			seen["expiry"]++
		case r < 9 && m.running():
			if _, ok, err := b.store.Lease(ctx, b.group, b.part.ID, m.lease.id, 0); !ok || err != nil {
				t.Fatalf("%s: release: %v %v", where, ok, err)
			}
			stale, m.lease = m.lease.id, nil
			seen["release"]++
		case r == 9 && m.running():
			b.renew(t, m.lease.id)
			m.lease.heard, m.lease.set = true, m.clock
			seen["renewal"]++
		case r == 12 && extra.seeks:
			if old := b.seekAgainstModel(t, rng, m, where, seen); old != "" {
				stale = old
			}
		case r == 13 && extra.seeks && rng.IntN(3) == 0:
			seen["unconfirmed"] += m.unconfirmed // the delete's new group starts at 0
			if old := b.deleteAgainstModel(t, m, where); old != "" {
				stale = old
			}
			seen["group delete"]++
		case r >= 14 && r < kinds:
			b.redriveAgainstModel(t, rng, m, where, seen)
		case r == kinds:
			b.elapse(t, b.group, time.Hour)
			m.tick()
			seen["an hour"]++
		case r == 10 && m.lease != nil && !m.lease.crashed:
			// The pop's answer was never sent: an undo, as the gateway
			// makes (only a pop's own gateway does, at once; any lease
			// here tests what it refuses).
			lease := m.lease.id
			want := m.undo(lease)
			if got := b.undo(t, lease); got != want {
				t.Fatalf("%s: undo of %s: %v, model %v", where, lease, got, want)
			}
			if want {
				stale = lease
			}
			seen[fmt.Sprint("undo ", want)]++
		case stale != "":
			// A stale lease settles nothing: every item leaseNotHeld or
			// alreadyAcked, and the cursor does not move.
			before := m.cursor()
			o := rng.Int64N(int64(n))
			a := b.ack(t, stale, doneAt(o))
			want := model.AckLeaseNotHeld
			if m.done(o) || m.failedIn[o] == stale {
				want = m.already(o)
			}
			seen["stale "+want]++
			seen["answer "+want]++
			if results(a)[0] != want || a.NextOffset != before {
				t.Fatalf("%s: ack of %d under a stale lease: %+v, want %s and the cursor at %d", where, o, a, want, before)
			}
		}
		checkCursor(t, b, m, where)
	}
	var dlq int64
	if err := b.store.Pool().QueryRow(ctx, `SELECT coalesce(max(p.last_offset) + 1, 0) FROM queen.log_partitions p
		JOIN queen.queues q ON q.id = p.queue_id WHERE q.name = $1`, model.DeadLetterQueue(b.queue)).Scan(&dlq); err != nil {
		t.Fatal(err)
	}
	if dlq != int64(len(m.dlq)) { // one dead letter per message and group name: a second is a duplicate
		t.Fatalf("the dead-letter queue holds %d messages, the model %d", dlq, len(m.dlq))
	}
	seen["dead letter"] = m.deadLetters
	if extra.redrives {
		seen["dead letter of a redriven message"] = m.redrivenDeadLetters
	}
	if gp := b.groupPartition(t); gp.Unconfirmed != int64(m.unconfirmed) {
		t.Fatalf("unconfirmed %d, the model %d", gp.Unconfirmed, m.unconfirmed)
	}
	seen["unconfirmed"] += m.unconfirmed
	seen["unheard counted"] = m.unheardCounted
	seen["dead letter after leases unheard"] = m.deadAfterUnheard
	t.Logf("seed %d: %v; cursor at %d of %d", seed, seen, m.cursor(), m.n)
	kinds := []string{"pop", "redelivery", "expiry", "release", "dead letter", "ack acked", "ack alreadyAcked",
		"ack notInLease", "answer deadLettered", "renewal", "ack by the shortcut", "cycle", "cycle popped", "tail served", "expiry heard true", "expiry heard false", "undo true", "undo false", "unconfirmed",
		"an hour", "held by a failure true", "held by a failure false"}
	if extra.seeks {
		kinds = []string{"pop", "redelivery", "dead letter", "ack acked", "stale leaseNotHeld", "stale alreadyAcked",
			"seek back", "seek forward", "seek ending a lease", "group delete"}
	}
	if extra.redrives {
		b.checkOtherGroupAgainstModel(t, other, m, n)
		kinds = []string{"pop", "dead letter", "ack acked", "stale leaseNotHeld", "stale alreadyAcked", "seek back", "seek forward",
			"group delete", "redrive", "redrive of some", "redrive moving nothing", "redrive retried moving nothing",
			"redriven message delivered", "dead letter of a redriven message"}
		if maxAttempts > 1 {
			kinds = append(kinds, "redelivery")
		}
	}
	if extra.crashes {
		kinds = []string{"pop", "redelivery", "ack acked", "crash", "expiry heard false", "expiry heard true", "unheard counted",
			"unconfirmed", "dead letter", "dead letter after leases unheard"}
	}
	for _, kind := range kinds {
		// Histories with delays hold back the whole-lease acks the
		// shortcut answers; the others cover it.
		withDelays := delays.asked != nil
		if seen[kind] == 0 && (withDelays || !strings.HasPrefix(kind, "held") && kind != "an hour") &&
			!(withDelays && kind == "ack by the shortcut") {
			t.Errorf("the history never had a %s: make it longer", kind)
		}
	}
}

// randomAck picks some of the lease's offsets (and now and then one it
// did not deliver, or one twice), each completed or failed, named by
// offset or by transactionId.
func randomAck(rng *rand.Rand, m *consumerModel) ([]int64, []bool, []model.Settlement) {
	if rng.IntN(4) == 0 {
		return wholeLeaseAck(rng.IntN(2) == 0, m)
	}
	var offsets []int64
	for _, o := range m.lease.delivered {
		if rng.IntN(3) > 0 {
			offsets = append(offsets, o)
		}
	}
	if len(offsets) == 0 || rng.IntN(5) == 0 {
		offsets = append(offsets, rng.Int64N(int64(m.n)))
	}
	rng.Shuffle(len(offsets), func(i, j int) { offsets[i], offsets[j] = offsets[j], offsets[i] })
	completed := make([]bool, len(offsets))
	items := make([]model.Settlement, len(offsets))
	for i, o := range offsets {
		completed[i] = rng.IntN(4) > 0
		items[i] = model.Settlement{Offset: o, Completed: completed[i], Error: "e"}
		if rng.IntN(2) == 0 {
			items[i] = model.Settlement{Offset: -1, TxnID: m.txn[o], Completed: completed[i], Error: "e"}
		}
	}
	return offsets, completed, items
}

// wholeLeaseAck completes everything the lease delivered, in order, by
// transactionId or by offset: the ack consumer_ack answers by its
// shortcut when nothing before it is left unsettled.
func wholeLeaseAck(byTxnID bool, m *consumerModel) ([]int64, []bool, []model.Settlement) {
	offsets := slices.Clone(m.lease.delivered)
	completed := make([]bool, len(offsets))
	items := make([]model.Settlement, len(offsets))
	for i, o := range offsets {
		completed[i], items[i] = true, doneAt(o)
		if byTxnID {
			items[i] = done(m.txn[o])
		}
	}
	return offsets, completed, items
}

func checkCursor(t *testing.T, b *consumerBundle, m *consumerModel, where string) {
	t.Helper()
	var next int64
	if err := b.store.Pool().QueryRow(context.Background(),
		"SELECT next_offset FROM queen.consumer_cursors WHERE group_id = $1 AND partition_id = $2", b.group.ID, b.part.ID).Scan(&next); err != nil {
		return // no cursor before the first pop
	}
	if next != m.cursor() {
		t.Fatalf("%s: cursor at %d, the model at %d", where, next, m.cursor())
	}
}
