package consumer

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"
	"unicode/utf8"

	queengate "github.com/queengate/queengate"
)

// Options tune a consumer. Zero values take the defaults.
type Options struct {
	Partition string        // one partition; "" any with work
	Consumer  string        // a name for the lease holder, shown in group lists
	Max       int           // messages per pop; default 100
	Lease     time.Duration // default 30 s, at least MinLease; renewed while the handler runs
	Wait      time.Duration // long poll per pop; default DefaultWait

	// OnAck, when set, receives the gateway's answer to each batch's ack,
	// one per partition of the batch, with its partition: one result per
	// handled message. A result other than acked or alreadyAcked means the
	// message was not settled as the handler said: after leaseNotHeld or
	// leaseExpired it is delivered again.
	OnAck func(partition string, a queengate.AckAnswer)
	// OnError, when set, receives what the consumer carries on past: a pop or
	// an ack that failed (retried after a second), a renewal that failed
	// or found the lease lost, and each batch whose ack left messages
	// unsettled (an *UnsettledError). OnAck and OnError are never called
	// two at once; OnError may be called while the handler runs (by the
	// goroutine renewing the lease).
	OnError func(error)
	// OnIdle, when set, is called each time a pop's wait ends with no
	// message: nothing to consume yet (a consumer that says so once,
	// rather than waiting in silence). Never two at once, as OnAck.
	OnIdle func()
	// MaxPopFailures is how many pops in a row may fail (no answer, no
	// gateway, a 5xx) before Run returns the last failure: default
	// 10, with a second between them (nine seconds or more), long enough
	// to ride out a gateway's restart and short enough that a consumer
	// that cannot reach any gateway (wrong URL or prefix, missing
	// permissions) says so. Before returning, it still tries to deliver
	// the last handled batch's ack while that batch's lease runs, as when
	// ctx ends. Negative: never return; every failure still goes to
	// OnError.
	MaxPopFailures int

	// Concurrency is how many batches are handled at once (default 1),
	// each by one goroutine, a partition's messages in offset order; a
	// partition's next batch comes only after its ack. The handler is
	// then called from several goroutines at once, never two at once for
	// one partition.
	Concurrency int
	// Partitions is how many partitions one pop may lease when Partition
	// is "" (queengate.PopRequest.Partitions; default
	// DefaultPopPartitions, 1 for one at a time): a batch of up to Max
	// messages then comes from several partitions, each under its own
	// lease, renewed while the batch is handled; the goroutine handles
	// them one partition after the other, and the next pop carries
	// every one's ack.
	Partitions int
	// MaxBytes bounds what each pop's messages take
	// (queengate.PopRequest.MaxBytes; 0: as much as fits in an answer).
	MaxBytes int64
	// MaxAckPending bounds what this consumer holds delivered and not yet
	// acknowledged (queengate.PopRequest.MaxAckPending; needs Consumer).
	MaxAckPending int
	// MaxMessages, when set, stops the consumer once that many messages are
	// handled (Run returns nil). Each pop asks for no more than are left,
	// so no message is delivered beyond them (one delivered and released
	// unhandled would count an attempt).
	MaxMessages int
}

// MinLease is the shortest lease a consumer takes. It renews a lease
// every third of it, so a lease survives two renewals that go unanswered;
// each renewal is a NATS round trip and a PostgreSQL write, tens of
// milliseconds and more on a busy host. A shorter lease would run out
// under a handler that renews in time on paper (a 50 ms lease, a 60 ms
// handler: every message dead-lettered).
const MinLease = time.Second

// DefaultMaxPopFailures is Options.MaxPopFailures' default.
const DefaultMaxPopFailures = 10

// DefaultWait is Options.Wait's default: how long one pop waits for
// messages.
const DefaultWait = 5 * time.Second

// DefaultPopPartitions is Options.Partitions' default: with many
// partitions of a few messages each, a batch fills from several.
const DefaultPopPartitions = 10

// ErrLeaseTooShort is what Run returns, before popping anything, for
// a lease shorter than MinLease.
var ErrLeaseTooShort = fmt.Errorf("queengate: a Consume lease must be at least %v: it is renewed every third of it", MinLease)

// UnsettledError says that an ack did not settle messages of a batch as
// the handler said; each result says why and what becomes of it (most,
// such as leaseNotHeld and leaseExpired, are delivered again).
type UnsettledError struct {
	Partition string
	Items     []queengate.AckResult // the items whose result is neither acked nor alreadyAcked
}

func (e *UnsettledError) Error() string {
	return fmt.Sprintf("queengate: %d messages of partition %s not settled as handled (first: offset %s, %s)",
		len(e.Items), e.Partition, offsetText(e.Items[0].Offset), e.Items[0].Result)
}

// Retry is what a Handler returns to fail a message and have it
// redelivered no sooner than delay from now (a nak with delay: delayMs on
// its failed ack item), instead of the queue's default.
func Retry(err error, delay time.Duration) error { return &RetryError{Err: err, Delay: delay} }

// RetryError is a handler's failure with the delay before redelivery
// (Retry).
type RetryError struct {
	Err   error
	Delay time.Duration
}

func (e *RetryError) Error() string {
	if e.Err == nil {
		return fmt.Sprintf("retry in %v", e.Delay)
	}
	return e.Err.Error()
}

func (e *RetryError) Unwrap() error { return e.Err }

func offsetText(o *int64) string {
	if o == nil {
		return "?"
	}
	return fmt.Sprint(*o)
}

// Handler processes one message. A nil error completes it; an error
// fails it (redelivered later with one more attempt, dead-lettered after
// the queue's maxAttempts), not before a delay when made by Retry. An
// error that is ctx's once it ended (the consumer stopping, a drain cut short)
// leaves the message unhandled: released, not failed. For an exactly-once
// effect, commit the message's transactionId with your own writes in one
// transaction and skip a transactionId you already hold: a redelivery is
// then harmless.
type Handler func(ctx context.Context, m queengate.Delivery) error

// Run pops, handles and acknowledges messages of queue for group
// through c until ctx ends: New(c, queue, group, opts, handle).Run(ctx). Each
// popped batch's lease is renewed at once (which tells the gateway the
// batch arrived) and then every third of the lease while the batch is
// handled. Each batch's ack travels with the next pop (one request per
// batch); when ctx ends, the handlers' context ends too, the batches in
// hand stop after the message being handled, what was handled is still
// acknowledged, and the rest is released at once. The acks' answers go
// to opts.OnAck, what Run retries past to opts.OnError. It returns
// ctx's error, ErrLeaseTooShort, the first error of the gateway that is
// not worth retrying (a 4xx), or the last failure once
// opts.MaxPopFailures pops in a row failed.
func Run(ctx context.Context, c *queengate.Client, queue, group string, opts Options, handle Handler) error {
	return New(c, queue, group, opts, handle).Run(ctx)
}

// Consumer is a Run that can be drained: its Run consumes, Drain stops
// it gracefully.
type Consumer struct {
	c            *queengate.Client
	queue, group string
	opts         Options
	handle       Handler

	left      *allowance    // MaxMessages not yet popped; nil: no limit
	draining  chan struct{} // closed by Drain: no more pops
	drainOnce sync.Once
	done      chan struct{} // closed when Run returns
	mu        sync.Mutex
	started   bool
	stopWork  context.CancelFunc // ends the handlers' context (Run's)
}

// New prepares a consumer of queue for group through c; its Run starts
// it.
func New(c *queengate.Client, queue, group string, opts Options, handle Handler) *Consumer {
	opts = opts.withDefaults()
	opts.serializeCallbacks()
	cs := &Consumer{c: c, queue: queue, group: group, opts: opts, handle: handle,
		draining: make(chan struct{}), done: make(chan struct{})}
	if opts.MaxMessages > 0 {
		cs.left = &allowance{n: opts.MaxMessages}
	}
	return cs
}

// allowance is what MaxMessages leaves to pop, shared by Run's workers.
type allowance struct {
	mu sync.Mutex
	n  int
}

// take reserves up to max messages for a pop (max itself without a
// limit); 0 when none are left.
func (a *allowance) take(max int) int {
	if a == nil {
		return max
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	n := min(max, a.n)
	a.n -= n
	return n
}

// giveBack returns what a pop reserved and did not deliver.
func (a *allowance) giveBack(n int) {
	if a == nil || n <= 0 {
		return
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	a.n += n
}

// Run consumes as the function Run does, with opts.Concurrency partitions handled
// at once, until ctx ends (it returns ctx's error), Drain stops it or
// opts.MaxMessages are handled (it returns nil). Call it once.
func (cs *Consumer) Run(ctx context.Context) error {
	if cs.opts.Lease < MinLease {
		return ErrLeaseTooShort
	}
	work, stopWork := context.WithCancel(ctx)
	defer stopWork()
	cs.mu.Lock()
	cs.started, cs.stopWork = true, stopWork
	cs.mu.Unlock()
	defer close(cs.done)
	// Pops end at a drain or with the handlers' context.
	pops, stopPops := context.WithCancel(work)
	defer stopPops()
	select {
	case <-cs.draining: // drained before it ran
		return nil
	default:
	}
	go func() {
		select {
		case <-cs.draining:
			stopPops()
		case <-pops.Done():
		}
	}()
	var (
		workers  sync.WaitGroup
		failOnce sync.Once
		failure  error
	)
	for range cs.opts.Concurrency {
		workers.Go(func() {
			if err := cs.work(ctx, work, pops); err != nil {
				failOnce.Do(func() { failure = err })
				if pops.Err() == nil { // not draining: the others stop too, acknowledging what they handled
					stopWork()
				}
			}
		})
	}
	workers.Wait()
	switch {
	case failure != nil:
		return failure
	case ctx.Err() != nil:
		return ctx.Err()
	}
	return nil
}

// Drain stops Run gracefully: no more pops (a pop waiting ends; a batch it
// brings anyway is released), while the batches in hand are handled to
// their end and acknowledged. When ctx ends first, the handlers' context
// ends: the batches stop after the message being handled, what was
// handled is acknowledged and the rest released at once. Drain returns
// once Run has returned: nil, or ctx's error when it ended first. Before
// Run, it makes Run return at once.
func (cs *Consumer) Drain(ctx context.Context) error {
	cs.drainOnce.Do(func() { close(cs.draining) })
	cs.mu.Lock()
	started := cs.started
	cs.mu.Unlock()
	if !started {
		return nil
	}
	select {
	case <-cs.done:
		return nil
	case <-ctx.Done():
	}
	cs.stopWork()
	<-cs.done
	return ctx.Err()
}

// work is one of Run's workers: it pops one batch at a time, handles it
// in order, and acknowledges it with its next pop. A partition is leased
// to one worker at a time, until its batch's ack: its messages are
// handled one at a time, in order. It returns the error that ends Run
// (nil at a drain or when ctx ends).
func (cs *Consumer) work(ctx, work, pops context.Context) (err error) {
	c, opts := cs.c, cs.opts
	var pending []queengate.PopAck // the handled batch's acks, a lease each, not yet delivered
	defer func() {
		for i := range pending {
			if ackErr := cs.finalAck(ctx, &pending[i]); ackErr != nil && err == nil {
				err = ackErr
			}
		}
	}()
	failures := 0
	for pops.Err() == nil {
		room := cs.left.take(opts.Max)
		if room == 0 {
			return nil // MaxMessages popped: the last acks go with finalAck
		}
		// Each pop is bounded even when ctx has a distant deadline: one
		// lost answer must not stall the consumer until then.
		popCtx, cancel := context.WithTimeout(pops, c.Timeout()+opts.Wait)
		batch, err := c.Pop(popCtx, cs.queue, opts.Partition, cs.popRequest(room, pending))
		cancel()
		leases := batch.Leases()
		cs.left.giveBack(room - delivered(leases)) // a failed pop delivered none
		var werr *queengate.Error
		switch {
		case err == nil:
		case pops.Err() != nil:
			return nil // unknown whether the acks were applied: finalAck sends them again
		case errors.As(err, &werr) && werr.Code < 500:
			return err
		default:
			if failures++; opts.MaxPopFailures >= 0 && failures >= opts.MaxPopFailures {
				return fmt.Errorf("queengate: %d pops in a row failed: %w", failures, err)
			}
			// Unknown whether the acks were applied: sending them again is safe.
			opts.report(fmt.Errorf("queengate: pop failed (%d in a row), retrying in a second: %w", failures, err))
			if sleep(pops, time.Second) != nil {
				return nil
			}
			continue
		}
		failures = 0
		cs.ackAnswered(pending, batch)
		pending = nil
		switch {
		case len(leases) == 0:
			if opts.OnIdle != nil && pops.Err() == nil {
				opts.OnIdle()
			}
		case pops.Err() != nil: // it came as the drain began: not handled
			for _, l := range leases {
				pending = append(pending, queengate.PopAck{Partition: l.Partition, LeaseID: l.LeaseID})
			}
		default:
			pending = cs.handleLeases(work, leases)
		}
	}
	return nil
}

// popRequest is a pop of up to room messages carrying the acks of the
// previous batch: one as "ack", several as "acks".
func (cs *Consumer) popRequest(room int, pending []queengate.PopAck) queengate.PopRequest {
	opts := cs.opts
	req := queengate.PopRequest{Group: cs.group, Consumer: opts.Consumer, Max: room, LeaseMs: opts.Lease.Milliseconds(),
		WaitMs: opts.Wait.Milliseconds(), MaxBytes: opts.MaxBytes, MaxAckPending: opts.MaxAckPending}
	if opts.Partitions > 1 {
		req.Partitions = opts.Partitions
	}
	switch {
	case len(pending) == 1:
		req.Ack = &pending[0]
	case len(pending) > 1:
		req.Acks = pending
	}
	return req
}

// ackAnswered hands the answers of the acks a pop carried to OnAck.
func (cs *Consumer) ackAnswered(pending []queengate.PopAck, batch queengate.PopAnswer) {
	if batch.Ack != nil && len(pending) == 1 {
		cs.opts.acked(pending[0].Partition, *batch.Ack)
	}
	for i, a := range batch.Acks {
		if i < len(pending) {
			cs.opts.acked(pending[i].Partition, a)
		}
	}
}

// delivered counts the messages of a pop's leases.
func delivered(leases []queengate.PopLease) int {
	n := 0
	for _, l := range leases {
		n += len(l.Messages)
	}
	return n
}

func (o Options) withDefaults() Options {
	if o.Max <= 0 {
		o.Max = queengate.DefaultPopMax
	}
	if o.Lease == 0 {
		o.Lease = queengate.DefaultLeaseMs * time.Millisecond
	}
	if o.Wait <= 0 {
		o.Wait = DefaultWait
	}
	if o.MaxPopFailures == 0 {
		o.MaxPopFailures = DefaultMaxPopFailures
	}
	o.Concurrency = max(o.Concurrency, 1)
	if o.Partitions <= 0 {
		o.Partitions = DefaultPopPartitions
	}
	if o.Partition != "" {
		o.Partitions = 1 // a pop naming its partition leases that one
	}
	o.Partitions = min(o.Partitions, queengate.MaxPopPartitions)
	return o
}

// serializeCallbacks makes OnAck, OnError and OnIdle never run two at
// once, from however many goroutines the consumer calls them from.
func (o *Options) serializeCallbacks() {
	var mu sync.Mutex
	if onAck := o.OnAck; onAck != nil {
		o.OnAck = func(partition string, a queengate.AckAnswer) {
			mu.Lock()
			defer mu.Unlock()
			onAck(partition, a)
		}
	}
	if onError := o.OnError; onError != nil {
		o.OnError = func(err error) {
			mu.Lock()
			defer mu.Unlock()
			onError(err)
		}
	}
	if onIdle := o.OnIdle; onIdle != nil {
		o.OnIdle = func() {
			mu.Lock()
			defer mu.Unlock()
			onIdle()
		}
	}
}

func (o Options) report(err error) {
	if o.OnError != nil {
		o.OnError(err)
	}
}

// acked hands an ack's answer to OnAck, and what it left unsettled to
// OnError.
func (o Options) acked(partition string, a queengate.AckAnswer) {
	if o.OnAck != nil {
		o.OnAck(partition, a)
	}
	var unsettled []queengate.AckResult
	for _, it := range a.Items {
		if it.Result != "acked" && it.Result != "alreadyAcked" {
			unsettled = append(unsettled, it)
		}
	}
	if len(unsettled) > 0 {
		o.report(&UnsettledError{Partition: partition, Items: unsettled})
	}
}

// partitionKey carries, in a Handler's context, the partition of the
// message it handles.
type partitionKey struct{}

// PartitionOf is, in a Handler's context, the partition of the message
// it was called with ("" elsewhere).
func PartitionOf(ctx context.Context) string {
	p, _ := ctx.Value(partitionKey{}).(string)
	return p
}

// handleLeases runs the handler over a pop's leases, one partition after
// the other, while a goroutine per lease renews it, and returns their
// acks (handleAll's); an ack with nothing to settle whose lease a
// renewal found lost is left out (no lease to release).
func (cs *Consumer) handleLeases(ctx context.Context, leases []queengate.PopLease) []queengate.PopAck {
	stopRenew := make(chan struct{})
	renewed := make([]chan bool, len(leases))
	for i, l := range leases {
		renewed[i] = make(chan bool, 1)
		go func() {
			renewed[i] <- cs.keepLease(ctx, stopRenew, l.Partition, queengate.LeaseRequest{Group: cs.group, LeaseID: l.LeaseID, LeaseMs: cs.opts.Lease.Milliseconds()})
		}()
	}
	acks := make([]queengate.PopAck, len(leases))
	for i, l := range leases {
		acks[i] = *cs.handleAll(ctx, l)
	}
	close(stopRenew)
	// A renewal on its way is answered before the acks go: sent after
	// it, an ack could be applied first, end the lease, and have the
	// renewal refused (409) though nothing went wrong. OnError is not
	// called once the batch is handled.
	kept := acks[:0]
	for i, ack := range acks {
		if lost := !<-renewed[i]; !lost || len(ack.Items) > 0 {
			kept = append(kept, ack)
		}
	}
	return kept
}

// handleAll runs the handler over a lease's messages in order and
// returns their ack: by offset, since a transactionId may be stored
// twice in a partition. When ctx ends midway, the rest is not handled
// (nor failed): the ack covers what was; a message whose handler
// returned ctx's error counts as not handled.
func (cs *Consumer) handleAll(ctx context.Context, batch queengate.PopLease) *queengate.PopAck {
	ack := &queengate.PopAck{Partition: batch.Partition, LeaseID: batch.LeaseID, Items: make([]queengate.AckItem, 0, len(batch.Messages))}
	inPartition := context.WithValue(ctx, partitionKey{}, batch.Partition)
	for _, m := range batch.Messages {
		if ctx.Err() != nil {
			break
		}
		item := queengate.AckItem{Offset: &m.Offset, Status: queengate.AckCompleted}
		err := cs.handle(inPartition, m)
		if err != nil && ctx.Err() != nil && errors.Is(err, ctx.Err()) {
			break // stopped, not failed: released with the rest
		}
		if err != nil {
			item.Status, item.Error = queengate.AckFailed, truncate(err.Error(), queengate.MaxAckErrorSize)
			if r, ok := errors.AsType[*RetryError](err); ok {
				item.DelayMs = r.Delay.Milliseconds()
			}
		}
		ack.Items = append(ack.Items, item)
	}
	return ack
}

// finalAck delivers the last batch's ack after ctx ended, retrying while
// the lease runs: what was handled is acknowledged, and a batch whose ack
// never arrives is redelivered after its lease. What was not handled goes
// back to the group at once, by a release, unless the ack's answer says
// the lease ended or is lost (a release would be refused).
func (cs *Consumer) finalAck(ctx context.Context, ack *queengate.PopAck) error {
	c, queue, group, opts := cs.c, cs.queue, cs.group, cs.opts
	ackCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), opts.Lease)
	defer cancel()
	if len(ack.Items) == 0 {
		cs.release(ackCtx, ack)
		return nil
	}
	for {
		a, err := c.Ack(ackCtx, queue, ack.Partition, queengate.AckRequest{Group: group, LeaseID: ack.LeaseID, Items: ack.Items})
		var werr *queengate.Error
		switch {
		case err == nil:
			opts.acked(ack.Partition, a)
			if leaseRuns(a) {
				cs.release(ackCtx, ack)
			}
			return nil
		case errors.As(err, &werr) && werr.Code < 500:
			return fmt.Errorf("queengate: ack refused: %w", err) // the lease runs out
		case sleep(ackCtx, time.Second) != nil:
			return fmt.Errorf("queengate: ack not delivered before the lease ran out: %w", err)
		}
		opts.report(fmt.Errorf("queengate: ack failed, retrying in a second: %w", err))
	}
}

// release gives the lease of ack's batch up; failing, it runs out anyway.
func (cs *Consumer) release(ctx context.Context, ack *queengate.PopAck) {
	_, _ = cs.c.Release(ctx, cs.queue, ack.Partition, queengate.LeaseRequest{Group: cs.group, LeaseID: ack.LeaseID})
}

// leaseRuns says whether an ack's answer leaves its lease held: not
// ended (something delivered under it is unsettled), nor lost.
func leaseRuns(a queengate.AckAnswer) bool {
	if a.LeaseEnded {
		return false
	}
	for _, it := range a.Items {
		if it.Result == "leaseNotHeld" || it.Result == "leaseExpired" {
			return false
		}
	}
	return true
}

// keepLease renews a lease at once, which confirms to the gateway that
// the batch arrived (a delivery never confirmed counts no attempt), then
// every third of the lease until stop is closed, ctx ends or the lease
// is lost; it reports whether the lease is still held. A renewal on its
// way when stop closes or ctx ends is waited for, never abandoned (see
// handleBatch), for up to a third of the lease: unanswered by then, the
// next one is due anyway.
func (cs *Consumer) keepLease(ctx context.Context, stop <-chan struct{}, partition string, req queengate.LeaseRequest) (held bool) {
	c, queue, opts := cs.c, cs.queue, cs.opts
	t := time.NewTicker(opts.Lease / 3)
	defer t.Stop()
	for {
		select {
		case <-stop:
			return true
		case <-ctx.Done():
			return true
		default:
		}
		renewCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), min(opts.Lease/3, c.Timeout()))
		_, err := c.Renew(renewCtx, queue, partition, req)
		cancel()
		var werr *queengate.Error
		switch {
		case errors.As(err, &werr) && werr.Code == queengate.CodeConflict:
			opts.report(fmt.Errorf("queengate: lease of partition %s lost: %w", partition, err))
			return false // the ack will say so per message
		case err != nil:
			opts.report(fmt.Errorf("queengate: renewing the lease of partition %s failed: %w", partition, err))
		}
		select {
		case <-stop:
			return true
		case <-ctx.Done():
			return true
		case <-t.C:
		}
	}
}

func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// truncate cuts s to at most n bytes, on a character boundary.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}
