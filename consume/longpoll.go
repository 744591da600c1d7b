package consume

import (
	"container/list"
	"context"
	"errors"
	"sync"
	"time"

	queengate "github.com/queengate/queengate"
	"github.com/queengate/queengate/model"
)

// Long polls (docs/design.md, "Consuming"). A pop that may wait joins
// a wait list: one per group and partition asked for (0: any). Waiters
// sleep without asking PostgreSQL anything until their list is woken: by
// a commit to the queue or a lease ended early (announced on
// <prefix>.committed.<queue> by whichever gateway saw it), or by a lease
// found run out by the gateway's one check a second (checkEvery) over
// every group waited on. A wake lets one waiter pop, the one waiting
// longest; one that gets messages lets two more pop, so a burst spreads
// while a lone message costs one pop however many wait. A list whose pop
// found nothing with no wake since is known empty: a new long poll joins
// it without popping, until a wake or until revalidate has passed, when
// the check wakes the list once more (work nobody announces: an
// announcement lost, a timer's fire).

const (
	// checkEvery is how often a gateway looks for run-out leases while
	// pops wait.
	checkEvery = time.Second
	// revalidate bounds how long a list stays known empty on no evidence
	// but its last pop.
	revalidate = 5 * time.Second
)

// waitKey names a wait list: a group's pops of one partition, or of any
// (partition 0).
type waitKey struct{ group, partition int64 }

type waitList struct {
	key     waitKey
	queue   string
	waiters list.List // of *waiter, longest waiting first
	pending int       // waiters signalled that have not popped since
	wakes   uint64    // wakes so far
	emptyAt time.Time // when a pop that found nothing began, with no wake since (zero: not known)
}

type waiter struct {
	signal    chan struct{} // holds at most one signal: pop now
	signalled bool          // a signal sent and not yet taken
	popping   bool          // its pop runs
	elem      *list.Element
}

// waits holds a gateway's wait lists; all fields under mu.
type waits struct {
	mu         sync.Mutex
	lists      map[waitKey]*waitList
	byQueue    map[string]map[waitKey]*waitList
	revalidate time.Duration
}

func newWaits() *waits {
	return &waits{lists: map[waitKey]*waitList{}, byQueue: map[string]map[waitKey]*waitList{}, revalidate: revalidate}
}

// join adds a waiter to key's list; popFirst unless trusted and the list
// is known empty since less than revalidate.
func (ws *waits) join(queue string, key waitKey, trusted bool) (l *waitList, w *waiter, popFirst bool) {
	ws.mu.Lock()
	defer ws.mu.Unlock()
	l = ws.lists[key]
	if l == nil {
		l = &waitList{key: key, queue: queue}
		ws.lists[key] = l
		if ws.byQueue[queue] == nil {
			ws.byQueue[queue] = map[waitKey]*waitList{}
		}
		ws.byQueue[queue][key] = l
	}
	w = &waiter{signal: make(chan struct{}, 1)}
	w.elem = l.waiters.PushBack(w)
	return l, w, !trusted || !ws.knownEmpty(l, time.Now())
}

func (ws *waits) knownEmpty(l *waitList, now time.Time) bool {
	return !l.emptyAt.IsZero() && now.Sub(l.emptyAt) < ws.revalidate
}

// popping notes w's pop beginning: what foundNothing needs.
func (ws *waits) popping(l *waitList, w *waiter) (wakes uint64, at time.Time) {
	ws.mu.Lock()
	defer ws.mu.Unlock()
	w.popping = true
	return l.wakes, time.Now()
}

// foundNothing marks the list known empty when no wake came since w's
// pop, which found nothing, began, unless it was held at its
// maxAckPending: other pops of the list may find work.
func (ws *waits) foundNothing(l *waitList, w *waiter, wakes uint64, at time.Time, held bool) {
	ws.mu.Lock()
	defer ws.mu.Unlock()
	w.popping = false
	if l.wakes == wakes && !held {
		l.emptyAt = at
	}
}

// took notes that w took its signal: it pops now.
func (ws *waits) took(l *waitList, w *waiter) {
	ws.mu.Lock()
	defer ws.mu.Unlock()
	w.signalled = false
	l.pending--
}

// leave removes w from its list. A signal it did not take goes to the
// next waiter; a waiter leaving with messages (delivered) lets two more
// pop, since there may be more.
func (ws *waits) leave(l *waitList, w *waiter, delivered bool) {
	ws.mu.Lock()
	defer ws.mu.Unlock()
	l.waiters.Remove(w.elem)
	if w.signalled {
		l.pending--
		l.signalNext(1)
	}
	if delivered {
		l.emptyAt = time.Time{}
		l.signalNext(2)
	}
	ws.dropIdle(l)
}

// wake lets one waiter of l pop, unless one is about to already.
func (ws *waits) wake(l *waitList) {
	l.wakes++
	l.emptyAt = time.Time{}
	if l.pending == 0 {
		l.signalNext(1)
	}
	ws.dropIdle(l)
}

// signalNext signals up to n waiters that have no signal, longest
// waiting first.
func (l *waitList) signalNext(n int) {
	for e := l.waiters.Front(); e != nil && n > 0; e = e.Next() {
		if w := e.Value.(*waiter); !w.signalled {
			w.signalled = true
			l.pending++
			w.signal <- struct{}{}
			n--
		}
	}
}

// dropIdle forgets a list nobody waits on that is not known empty.
func (ws *waits) dropIdle(l *waitList) {
	if l.waiters.Len() > 0 || !l.emptyAt.IsZero() {
		return
	}
	delete(ws.lists, l.key)
	if q := ws.byQueue[l.queue]; q != nil {
		delete(q, l.key)
		if len(q) == 0 {
			delete(ws.byQueue, l.queue)
		}
	}
}

// committed wakes queue's lists.
func (ws *waits) committed(queue string) {
	ws.mu.Lock()
	defer ws.mu.Unlock()
	for _, l := range ws.byQueue[queue] {
		ws.wake(l)
	}
}

// wakeAll wakes every list.
func (ws *waits) wakeAll() {
	ws.mu.Lock()
	defer ws.mu.Unlock()
	for _, l := range ws.lists {
		ws.wake(l)
	}
}

// ranOut wakes the lists of run-out leases' groups: of any partition, and
// of the lease's.
func (ws *waits) ranOut(leases []model.GroupPartitionID) {
	ws.mu.Lock()
	defer ws.mu.Unlock()
	for _, gp := range leases {
		for _, key := range []waitKey{{gp.GroupID, 0}, {gp.GroupID, gp.PartitionID}} {
			if l := ws.lists[key]; l != nil {
				ws.wake(l)
			}
		}
	}
}

// sweep wakes the lists known empty for revalidate or longer (forgetting
// those nobody waits on), and returns the groups still waited on.
func (ws *waits) sweep(now time.Time) []int64 {
	ws.mu.Lock()
	defer ws.mu.Unlock()
	var groups []int64
	seen := map[int64]bool{}
	for _, l := range ws.lists {
		if !l.emptyAt.IsZero() && !ws.knownEmpty(l, now) {
			ws.wake(l)
		}
		if ws.lists[l.key] != nil && !seen[l.key.group] {
			seen[l.key.group] = true
			groups = append(groups, l.key.group)
		}
	}
	return groups
}

// waiters counts the pops waiting on queue.
func (ws *waits) waiters(queue string) int {
	return ws.count(queue, func(*waiter) bool { return true })
}

// sleeping counts the pops waiting on queue that neither pop nor are
// about to.
func (ws *waits) sleeping(queue string) int {
	return ws.count(queue, func(w *waiter) bool { return !w.popping && !w.signalled })
}

func (ws *waits) count(queue string, counts func(*waiter) bool) int {
	ws.mu.Lock()
	defer ws.mu.Unlock()
	n := 0
	for _, l := range ws.byQueue[queue] {
		for e := l.waiters.Front(); e != nil; e = e.Next() {
			if counts(e.Value.(*waiter)) {
				n++
			}
		}
	}
	return n
}

// committed wakes the pops waiting on queue.
func (c *Consumers) committed(queue string) { c.waits.committed(queue) }

// watch checks for run-out leases every c.checkEvery until stop is
// closed; after a reconnection to NATS it wakes every list, since
// announcements may have been lost meanwhile.
func (c *Consumers) watch(stop <-chan struct{}, reconnects func() uint64) {
	t := time.NewTicker(c.checkEvery)
	defer t.Stop()
	seen := reconnects()
	for {
		select {
		case <-stop:
			return
		case <-t.C:
		}
		if n := reconnects(); n != seen {
			seen = n
			c.waits.wakeAll()
		}
		c.checkLeases()
	}
}

// checkLeases is the gateway's one statement for its waiting pops: it
// wakes the lists of groups with a lease that ran out.
func (c *Consumers) checkLeases() {
	groups := c.waits.sweep(time.Now())
	if len(groups) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	leases, err := c.store.RunOutLeases(ctx, groups)
	c.checks.Add(1)
	if err != nil {
		c.log.Warn().Err(err).Msg("looking for run-out leases failed; the next check retries")
		return
	}
	c.waits.ranOut(leases)
}

// announce tells every gateway's waiting pops of queue that a pop may
// find something now (best effort: a list known empty is looked at again
// within revalidate).
func (c *Consumers) announce(queue string) {
	if c.publish != nil {
		c.publish([]string{queue})
	}
}

// settled announces what an ack may have made poppable: its partition,
// when the lease ended, and the dead-letter queue it wrote to.
func (c *Consumers) settled(queue string, ans queengate.AckAnswer) {
	if ans.LeaseEnded || ans.DeadLettered > 0 {
		c.announce(queue)
	}
	if ans.DeadLettered > 0 {
		c.announce(model.DeadLetterQueue(queue))
	}
}

// freedRoom wakes the queue's waiting pops when an ack settled part of a
// lease counted under maxAckPending: a pop held at its limit may now have
// room. (An ack that ended the lease wakes them through settled.)
func (c *Consumers) freedRoom(queue string, res model.SettledBatch) {
	if res.LeaseCounted && !res.LeaseEnded {
		c.announce(queue)
	}
}

// longPoll pops until messages come, or for up to waitFor when wait
// (sleeping in the list of pr's group and partition until woken), and
// answers. trusted: the pop may skip its first pop when the list is
// known empty (it settled nothing that could have changed that).
func (c *Consumers) longPoll(ctx context.Context, queue string, pr model.PopQuery, waitFor time.Duration, wait, trusted bool, ans *popAnswer) (any, *queengate.Error) {
	if !wait || waitFor <= 0 {
		c.activity.note(pr.Group.ID)
		res, err := c.popSettled(ctx, queue, &pr)
		if err != nil {
			return nil, c.groupFailed(pr.Group, err)
		}
		return ans.answer(queue, pr.Group, &res, c.popMore(ctx, queue, pr, &res, ans.more)), nil
	}
	// The group is active all the while its pop waits, however long.
	defer c.activity.wait(pr.Group.ID)()
	l, w, popNow := c.waits.join(queue, waitKey{pr.Group.ID, pr.PartitionID}, trusted)
	delivered := false
	defer func() { c.waits.leave(l, w, delivered) }()
	timer := time.NewTimer(waitFor)
	defer timer.Stop()
	deadLettered := 0
	for {
		if popNow {
			wakes, at := c.waits.popping(l, w)
			res, err := c.popSettled(ctx, queue, &pr)
			if err != nil {
				return nil, c.groupFailed(pr.Group, err)
			}
			deadLettered += res.DeadLettered
			res.DeadLettered = deadLettered
			if len(res.Messages) > 0 {
				delivered = true
				return ans.answer(queue, pr.Group, &res, c.popMore(ctx, queue, pr, &res, ans.more)), nil
			}
			c.waits.foundNothing(l, w, wakes, at, res.Held)
		}
		select {
		case <-w.signal:
			c.waits.took(l, w)
			popNow = true
		case <-timer.C:
			return ans.answer(queue, pr.Group, &model.PopResult{DeadLettered: deadLettered}, nil), nil
		case <-ctx.Done():
			return ans.answer(queue, pr.Group, &model.PopResult{DeadLettered: deadLettered}, nil), nil
		case <-c.draining: // the gateway stops: answer now rather than after its drain timeout
			return ans.answer(queue, pr.Group, &model.PopResult{DeadLettered: deadLettered}, nil), nil
		}
	}
}

// leaseEnvelope bounds what a further partition of a multi-partition
// pop takes in its answer beside its messages: its name of up to 128
// bytes, ids, the lease and the field names.
const leaseEnvelope = 512

// popMore takes up to more further partitions after a pop that
// delivered first (docs/protocol.md, "Pop"), in one statement of the
// store (PopMore): each a pop of any partition under its own lease,
// while messages and room in the answer are left (what pr's first
// partition left of Max, and of MaxBytes and Room). A failure keeps the
// first partition's delivery: the further pops rolled back, nothing of
// theirs was delivered.
func (c *Consumers) popMore(ctx context.Context, queue string, pr model.PopQuery, first *model.PopResult, more int) []model.PopResult {
	if more <= 0 || len(first.Messages) == 0 || pr.Max <= len(first.Messages) {
		return nil
	}
	next := pr
	next.Max = pr.Max - len(first.Messages)
	next.Room = min(pr.Room, pr.MaxBytes) - deliveriesSize(first.Messages)
	next.MaxBytes = next.Room
	results, err := c.store.PopMore(ctx, next, more, leaseEnvelope)
	if err != nil {
		c.announce(queue) // its lease choices rolled back: others may have passed them over
		c.log.Warn().Err(err).Str("queue", queue).Str("group", pr.Group.Name).
			Msg("a multi-partition pop's further partitions failed; it answers the first")
		return nil
	}
	var taken []model.PopResult
	for i := range results {
		res := &results[i]
		c.popped(queue, pr, res)
		first.DeadLettered += res.DeadLettered
		if len(res.Messages) > 0 {
			taken = append(taken, *res)
		}
	}
	return taken
}

// deliveriesSize is what messages take at most in a pop's answer.
func deliveriesSize(ms []model.LeasedMessage) int64 {
	var n int64
	for _, m := range ms {
		n += model.DeliverySize(m)
	}
	return n
}

// popSettled pops again while a pop delivers nothing but dead-letters
// something: what it moved may have stood before messages ready now.
// A group found deleted is looked up by name again, once: a pop names its
// group into being, so it pops a new one (pr's group changes).
func (c *Consumers) popSettled(ctx context.Context, queue string, pr *model.PopQuery) (model.PopResult, error) {
	deadLettered := 0
	regrouped := false
	for {
		res, err := c.store.Pop(ctx, *pr)
		if errors.Is(err, model.ErrGroupNotFound) && !regrouped {
			regrouped = true
			c.knownGroups.CompareAndDelete(queue+"/"+pr.Group.Name, pr.Group)
			if pr.Group, err = c.group(ctx, queue, pr.Group.Name, true); err == nil {
				continue
			}
		}
		if err != nil {
			// Its lease choice rolled back: another pop may have skipped
			// that partition meanwhile, and found nothing.
			c.announce(queue)
			return res, err
		}
		c.popped(queue, *pr, &res)
		deadLettered += res.DeadLettered
		if len(res.Messages) > 0 || res.DeadLettered == 0 || ctx.Err() != nil {
			res.DeadLettered = deadLettered
			return res, nil
		}
	}
}

// popped logs and counts what a pop of the store did beside its
// delivery: dead letters and a lease it found run out.
func (c *Consumers) popped(queue string, pr model.PopQuery, res *model.PopResult) {
	c.logDeadLettering(queue, pr, res)
	c.metrics.deadLettered(&c.log, res.DeadLetters)
	if res.RanOutLease {
		c.metrics.ranOut(queue, pr.Group.Name)
	}
	if res.DeadLettered > 0 {
		c.announce(model.DeadLetterQueue(queue))
	}
}
