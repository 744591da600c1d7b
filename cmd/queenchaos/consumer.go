package main

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/queengate/queengate"
	"github.com/queengate/queengate/internal/chaos/verify"
	"github.com/queengate/queengate/internal/chaos/world"
)

// consumeLoad is what the consumers do while producers push and faults
// strike: consumers of each group pop from any partition, confirm each
// batch with a renewal (as the Go package consumer does, so that their
// deliveries count as attempts), handle it, and carry its ack in their
// next pop.
type consumeLoad struct {
	Groups   []string
	PerGroup int           // consumers per group
	Max      int           // messages per pop
	Lease    time.Duration // short, so that faults outlast leases
	Wait     time.Duration // a pop's long poll
	Handling time.Duration // per batch, before its ack
	// Every SlowEvery-th batch of a consumer is handled for SlowHandling,
	// its lease renewed every third of the lease meanwhile (as the
	// Go package consumer does): the leases the verifier can check for
	// overlap are those held long. None once producing has stopped: the
	// rest is consumed at once.
	SlowEvery    int
	SlowHandling time.Duration
	// FailEvery: the last group fails each message whose sequence number
	// is a multiple of it at every attempt (it ends dead-lettered), and
	// each one just after a multiple at its first attempt only (it is
	// delivered again, then completed). The other groups complete all.
	FailEvery uint32
	// PoisonEvery: the last group's consumers die on each message whose
	// sequence number is PoisonEvery/2 past a multiple of it: they leave
	// its batch without a word (no renewal, ack or release) and pop again
	// after a restart's pause, so its leases run out unheard until the
	// queue's maxUnheardDeliveries counts them and maxAttempts
	// dead-letters it (with the rest of its batches). 0: none.
	// PoisonFirst, when set, keeps to each producer's first PoisonFirst
	// of them: however fast the run, no more poison messages than the
	// drain can see dead-lettered (each holds its partition some 30 s).
	PoisonEvery uint32
	PoisonFirst uint32
	MaxAttempts int           // the queue's maxAttempts
	Drain       time.Duration // most time to consume the rest once producing has stopped
	// Follower is a group whose consumers each keep to one partition,
	// one consumer per partition (the Go package consumer with
	// Options.Partition): each pop names its partition and carries the
	// ack of its last batch, handled for FollowHandling. That is the
	// cycle a gateway serves from its tail, when the pop reaches the
	// gateway that wrote the partition and answered the last pop (pops go
	// to any gateway). The Groups' pops of any partition nearly never
	// are: another partition is usually first, or their partition more
	// than two frames behind. "": none.
	Follower       string
	FollowHandling time.Duration
}

// consumeLedger records what the consumers saw, for the verifier.
type consumeLedger struct {
	mu          sync.Mutex
	con         verify.Consumed
	requests    atomic.Int64 // numbers pops, from 1
	popFailures atomic.Int64
}

// now is a wall-clock reading: it is compared with the server's lease
// ends.
func now() time.Time { return time.Now().Round(0) }

// leased records a lease and its deliveries; it returns the lease's
// index.
func (l *consumeLedger) leased(lease verify.Lease, msgs []queengate.Delivery) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	i := len(l.con.Leases)
	l.con.Leases = append(l.con.Leases, lease)
	for _, m := range msgs {
		l.con.Deliveries = append(l.con.Deliveries, verify.Delivery{Lease: i, Offset: m.Offset, ID: m.TransactionID})
	}
	return i
}

// extend records a renewal's answer.
func (l *consumeLedger) extend(lease int, until time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if until.After(l.con.Leases[lease].Until) {
		l.con.Leases[lease].Until = until
	}
}

// settling records that an ack or a release of the lease is being sent.
func (l *consumeLedger) settling(lease int, at time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.con.Leases[lease].Settling.IsZero() {
		l.con.Leases[lease].Settling = at
	}
}

// acked records an ack's items with their results (a nil answer: none
// came).
func (l *consumeLedger) acked(group string, ack *queengate.PopAck, answer *queengate.AckAnswer, at time.Time, request int64) {
	results := make([]string, len(ack.Items))
	if answer != nil {
		for _, r := range answer.Items {
			if r.Index >= 0 && r.Index < len(results) {
				results[r.Index] = r.Result
			}
		}
		l.moved(group, answer.DeadLettered)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	for i, it := range ack.Items {
		l.con.Acks = append(l.con.Acks, verify.AckSent{Group: group, Partition: ack.Partition, Offset: *it.Offset,
			Completed: it.Status == queengate.AckCompleted, Result: results[i], Answered: at, Request: request})
	}
}

// crashed records the poison messages of a batch a consumer died on.
func (l *consumeLedger) crashed(group string, ans queengate.PopAnswer, poison []queengate.Delivery) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, m := range poison {
		l.con.Crashes = append(l.con.Crashes, verify.Crash{Group: group, Partition: ans.Partition, Offset: m.Offset, ID: m.TransactionID})
	}
}

// moved records dead letters an answer said it moved.
func (l *consumeLedger) moved(group string, n int) {
	if n == 0 {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.con.Moved == nil {
		l.con.Moved = map[string]int64{}
	}
	l.con.Moved[group] += int64(n)
}

// consumer is one consumer of a group.
type consumer struct {
	group, name, queue string
	partition          string // the one it pops; "": any
	handling           time.Duration
	failing            bool // the group that fails some messages
	load               consumeLoad
	client             *queengate.Client
	led                *consumeLedger
	batches            int
	draining           *atomic.Bool // producing has stopped
}

// run pops, confirms, handles and acknowledges until ctx ends, then
// delivers its last ack and releases its lease.
func (c *consumer) run(ctx context.Context) {
	var pending *queengate.PopAck // the handled batch's ack, carried by the next pop
	lease := -1                   // pending's lease
	for ctx.Err() == nil {
		ans, granted, err := c.pop(ctx, pending, lease)
		var werr *queengate.Error
		switch {
		case ctx.Err() != nil:
			// finish delivers pending.
		case errors.As(err, &werr) && werr.Code < 500:
			// Not worth sending again: the lease runs out instead.
			c.led.popFailures.Add(1)
			pending, lease = nil, -1
			world.Sleep(ctx, 200*time.Millisecond)
		case err != nil:
			// Unknown whether the ack was settled: sending it again is safe.
			c.led.popFailures.Add(1)
			world.Sleep(ctx, 200*time.Millisecond)
		case granted < 0:
			pending, lease = nil, -1
		case c.crashesOn(ans):
			// Dead before a word: the lease runs out unheard.
			pending, lease = nil, -1
			world.Sleep(ctx, poisonRestart)
		default:
			c.hold(ctx, ans, granted)
			pending, lease = c.handle(ans), granted
		}
	}
	c.finish(pending, lease)
}

// pop sends a pop carrying pending (the ack of lease pendingLease) and
// records what it saw: the ack's results, the dead letters moved, and the
// lease it granted, whose index it returns (-1: none).
func (c *consumer) pop(ctx context.Context, pending *queengate.PopAck, pendingLease int) (queengate.PopAnswer, int, error) {
	request, asked := c.led.requests.Add(1), now()
	if pending != nil {
		c.led.settling(pendingLease, asked)
	}
	ans, err := c.client.Pop(ctx, c.queue, c.partition, queengate.PopRequest{Group: c.group, Consumer: c.name, Max: c.load.Max,
		LeaseMs: c.load.Lease.Milliseconds(), WaitMs: c.load.Wait.Milliseconds(), Ack: pending})
	answered := now()
	if pending != nil {
		c.led.acked(c.group, pending, ackOf(ans, err), answered, request)
	}
	if err != nil {
		return ans, -1, err
	}
	c.led.moved(c.group, ans.DeadLettered)
	if ans.LeaseID == "" || ans.LeaseUntil == nil {
		return ans, -1, nil
	}
	return ans, c.led.leased(verify.Lease{Group: c.group, Consumer: c.name, Partition: ans.Partition, ID: ans.LeaseID,
		Request: request, Asked: asked, Granted: answered, Until: ans.LeaseUntil.Round(0)}, ans.Messages), nil
}

func ackOf(ans queengate.PopAnswer, err error) *queengate.AckAnswer {
	if err != nil {
		return nil
	}
	return ans.Ack
}

// hold keeps the batch for its handling time: it renews the lease at
// once (the gateway then counts the batch's deliveries as attempts) and
// every third of the lease while handling lasts, recording each new end.
func (c *consumer) hold(ctx context.Context, ans queengate.PopAnswer, lease int) {
	c.batches++
	d := c.handling
	if c.load.SlowEvery > 0 && c.batches%c.load.SlowEvery == 0 && !c.draining.Load() {
		d = c.load.SlowHandling
	}
	end := time.Now().Add(d)
	c.renew(ctx, ans, lease)
	for time.Until(end) > c.load.Lease/3 && ctx.Err() == nil {
		world.Sleep(ctx, c.load.Lease/3)
		c.renew(ctx, ans, lease)
	}
	world.Sleep(ctx, time.Until(end))
}

func (c *consumer) renew(ctx context.Context, ans queengate.PopAnswer, lease int) {
	r, err := c.client.Renew(ctx, c.queue, ans.Partition, queengate.LeaseRequest{Group: c.group, LeaseID: ans.LeaseID,
		LeaseMs: c.load.Lease.Milliseconds()})
	if err == nil && r.LeaseUntil != nil {
		c.led.extend(lease, r.LeaseUntil.Round(0))
	}
}

// handle is the batch's ack: every message completed, but for the
// failing group's chosen ones.
func (c *consumer) handle(ans queengate.PopAnswer) *queengate.PopAck {
	ack := &queengate.PopAck{Partition: ans.Partition, LeaseID: ans.LeaseID, Items: make([]queengate.AckItem, len(ans.Messages))}
	for i, m := range ans.Messages {
		ack.Items[i] = queengate.AckItem{Offset: &m.Offset, Status: queengate.AckCompleted}
		if c.failing && c.fails(m) {
			ack.Items[i].Status, ack.Items[i].Error = queengate.AckFailed, fmt.Sprintf("queenchaos fails %s", m.TransactionID)
		}
	}
	return ack
}

// poisonRestart is how long a consumer that died on a poison message
// takes to come back.
const poisonRestart = 200 * time.Millisecond

// crashesOn reports whether the consumer dies on the batch: the failing
// group's consumers do on a batch holding a poison message (see
// consumeLoad.PoisonEvery), and the ledger records it.
func (c *consumer) crashesOn(ans queengate.PopAnswer) bool {
	if !c.failing || c.load.PoisonEvery == 0 {
		return false
	}
	var poison []queengate.Delivery
	for _, m := range ans.Messages {
		var producer, seq uint32
		if _, err := fmt.Sscanf(m.TransactionID, "c%d-%d", &producer, &seq); err == nil && c.load.poisons(seq) {
			poison = append(poison, m)
		}
	}
	if len(poison) > 0 {
		c.led.crashed(c.group, ans, poison)
	}
	return len(poison) > 0
}

// poisons reports whether the failing group's consumers die on a
// producer's message number seq (see consumeLoad.PoisonEvery).
func (cl consumeLoad) poisons(seq uint32) bool {
	return seq%cl.PoisonEvery == cl.PoisonEvery/2 && (cl.PoisonFirst == 0 || seq/cl.PoisonEvery < cl.PoisonFirst)
}

// fails reports whether the failing group fails this delivery (see
// consumeLoad.FailEvery).
func (c *consumer) fails(m queengate.Delivery) bool {
	var producer, seq uint32
	if _, err := fmt.Sscanf(m.TransactionID, "c%d-%d", &producer, &seq); err != nil || c.load.FailEvery == 0 {
		return false
	}
	return seq%c.load.FailEvery == 0 || seq%c.load.FailEvery == 1 && m.Attempts <= 1
}

// finish delivers the last batch's ack and releases its lease, as the
// Go package consumer does when it stops.
func (c *consumer) finish(pending *queengate.PopAck, lease int) {
	if pending == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), c.load.Lease)
	defer cancel()
	c.led.settling(lease, now())
	a, err := c.client.Ack(ctx, c.queue, pending.Partition, queengate.AckRequest{Group: c.group, LeaseID: pending.LeaseID, Items: pending.Items})
	var answer *queengate.AckAnswer
	if err == nil {
		answer = &a
	}
	c.led.acked(c.group, pending, answer, now(), 0)
	_, _ = c.client.Release(ctx, c.queue, pending.Partition, queengate.LeaseRequest{Group: c.group, LeaseID: pending.LeaseID})
}

// consumerFleet is the consumers at work.
type consumerFleet struct {
	load      consumeLoad
	queue     string
	consumers []*consumer
	led       *consumeLedger
	stop      context.CancelFunc
	running   sync.WaitGroup
	draining  atomic.Bool
	closers   []func()
}

// startConsumers connects each group's consumers, each to its own NATS
// server first as producers are, and starts them: the follower group's
// one per partition of partitions.
func startConsumers(ctx context.Context, w *world.World, cl consumeLoad, queue string, partitions int, timeout time.Duration) (*consumerFleet, error) {
	f := &consumerFleet{load: cl, queue: queue, led: &consumeLedger{con: verify.Consumed{Groups: cl.allGroups()}}}
	add := func(group, name, partition string, handling time.Duration, failing bool) error {
		nc, err := w.Connect(len(f.consumers), "queenchaos consumer "+name)
		if err != nil {
			return err
		}
		f.closers = append(f.closers, nc.Close)
		client, err := queengate.NewClient(nc, queengate.WithTimeout(timeout))
		if err != nil {
			return err
		}
		f.consumers = append(f.consumers, &consumer{group: group, name: name, queue: queue, partition: partition, handling: handling,
			failing: failing, load: cl, client: client, led: f.led, draining: &f.draining})
		return nil
	}
	for gi, group := range cl.Groups {
		for i := range cl.PerGroup {
			if err := add(group, fmt.Sprintf("%s-%d", group, i), "", cl.Handling, gi == len(cl.Groups)-1); err != nil {
				f.close()
				return nil, err
			}
		}
	}
	for i := range partitions {
		if cl.Follower == "" {
			break
		}
		if err := add(cl.Follower, fmt.Sprintf("%s-%s", cl.Follower, partitionName(i)), partitionName(i), cl.FollowHandling, false); err != nil {
			f.close()
			return nil, err
		}
	}
	ctx, f.stop = context.WithCancel(ctx)
	for _, c := range f.consumers {
		f.running.Go(func() { c.run(ctx) })
	}
	return f, nil
}

// allGroups are the groups consuming: the follower first, the failing
// group last.
func (cl consumeLoad) allGroups() []string {
	if cl.Follower == "" {
		return cl.Groups
	}
	return append([]string{cl.Follower}, cl.Groups...)
}

// finish waits until the groups have consumed everything stored (at most
// the load's Drain), stops the consumers, and returns what they saw: nil
// when none ran. Producing stopped at stopped.
func (f *consumerFleet) finish(ctx context.Context, w *world.World, stopped time.Time, log func(string, ...any)) *verify.Consumed {
	defer f.running.Wait()
	defer f.stop()
	if len(f.consumers) == 0 {
		return nil
	}
	f.draining.Store(true)
	deadline := time.Now().Add(f.load.Drain)
	for {
		n, err := verify.Backlog(ctx, w.PGURL(), f.queue, f.load.allGroups())
		if err == nil && n == 0 {
			log("drain: consumers done %v after producing stopped", time.Since(stopped).Round(10*time.Millisecond))
			break
		}
		if time.Now().After(deadline) {
			log("drain: %d messages not consumed after %v (%v); stopping the consumers", n, f.load.Drain, err)
			break
		}
		world.Sleep(ctx, 250*time.Millisecond)
	}
	return &f.led.con
}

// close closes the consumers' connections.
func (f *consumerFleet) close() {
	if f.stop != nil {
		f.stop()
	}
	f.running.Wait()
	for _, c := range f.closers {
		c()
	}
}

func (cl consumeLoad) String() string {
	s := fmt.Sprintf("%d consumers in each of the groups %s (pops of up to %d, %v leases)",
		cl.PerGroup, strings.Join(cl.Groups, ", "), cl.Max, cl.Lease)
	if cl.Follower != "" {
		s += fmt.Sprintf(", and in group %s one consumer per partition, popping it by name", cl.Follower)
	}
	return s
}
