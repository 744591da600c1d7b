package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"sync"
	"time"

	queengate "github.com/queengate/queengate"
	"github.com/queengate/queengate/internal/ctl/admin"
	"github.com/queengate/queengate/internal/ctl/output"
)

const consumeUsage = `Usage:
  queenctl consume QUEUE [PARTITION] --group GROUP [--count N] [--max N]
                   [--lease DURATION] [--wait DURATION] [--consumer NAME] [--fail REASON]
                   [--concurrency N] [--max-bytes N] [--max-ack-pending N]

Consumes messages as a consumer of GROUP: of any partition with work, or
of PARTITION. Prints each message as one JSON line (partition, offset,
messageId, transactionId, createdAt, attempts, data exactly as pushed),
and acknowledges each batch completed after printing all of it: delivery
is at least once. A message is printed before it is acknowledged; if
queenctl is killed before the ack arrives, the batch is delivered again
(and printed again) once its lease runs out. A batch's lease is renewed
while it is printed. An ack the gateway does not apply (the lease ran out
or was taken over first) ends queenctl with exit 1, naming the message;
it is delivered again. An interrupt (Ctrl-C, SIGTERM) drains: no more
pops, the batches in hand are printed to their end and acknowledged
(within --lease), then queenctl exits 0.

--count stops after N messages (0: until interrupted, exit 0). --max is
the batch size (default 100), --lease how long a batch is the consumer's
(default 30s, at least 1s), --wait how long a pop waits for messages
(default 5s). --fail acknowledges every message failed with REASON
instead: they are redelivered (after the queue's retry delay), and
dead-lettered after the queue's maxAttempts.

--concurrency N consumes N partitions at once (default 1), each in offset
order; lines of different partitions interleave. --max-bytes bounds what
each pop's messages take (0: as much as fits one answer).
--max-ack-pending N holds at most N messages delivered and not yet
acknowledged; the gateway counts them per consumer name, so it needs
--consumer with a name of this consumer's own.

Needs NATS (--nats or QUEENCTL_NATS_URL). The group is created by its
first pop and starts at the first message still stored.

`

// maxConsumeConcurrency bounds --concurrency: each is a pop waiting on
// the gateway.
const maxConsumeConcurrency = 1000

func setupConsume(fs *flag.FlagSet) runFunc {
	group := fs.String("group", "", "consumer group `name` (required)")
	count := fs.Int("count", 0, "stop after `N` messages (0: until interrupted)")
	max := fs.Int("max", queengate.DefaultPopMax, "messages per pop (`N`)")
	lease := fs.Duration("lease", queengate.DefaultLeaseMs*time.Millisecond, "how long a popped batch is this consumer's")
	wait := fs.Duration("wait", 5*time.Second, "how long a pop waits for messages")
	name := fs.String("consumer", "queenctl", "this consumer's `name`, shown in group lists")
	fail := fs.String("fail", "", "acknowledge every message failed with this `reason`")
	concurrency := fs.Int("concurrency", 1, "consume `N` partitions at once")
	maxBytes := fs.Int64("max-bytes", 0, "bound each pop's messages to `N` bytes (0: as much as fits)")
	maxAckPending := fs.Int("max-ack-pending", 0, "hold at most `N` messages not yet acknowledged (needs --consumer)")
	return func(ctx context.Context, s *session, args []string) error {
		if len(args) < 1 || len(args) > 2 {
			return usagef("consume: want QUEUE [PARTITION] --group GROUP, e.g. queenctl consume payments --group billing")
		}
		c := consumer{s: s, queue: args[0], group: *group, fail: *fail, named: flagGiven(fs, "consumer"),
			opts: queengate.ConsumeOptions{Consumer: *name, Max: *max, Lease: *lease, Wait: *wait,
				Concurrency: *concurrency, MaxBytes: *maxBytes, MaxAckPending: *maxAckPending, MaxMessages: *count,
				MaxPopFailures: 1}} // a failed pop ends queenctl, as any failed request does
		if len(args) == 2 {
			c.opts.Partition = args[1]
		}
		if err := c.check(); err != nil {
			return err
		}
		nc, err := s.nats(ctx)
		if err != nil {
			return err
		}
		if c.client, err = queengate.NewClient(nc.Conn, queengate.WithPrefix(s.g.prefix), queengate.WithTimeout(s.g.timeout)); err != nil {
			return err
		}
		return c.run(ctx)
	}
}

// flagGiven says whether the command line set the flag name.
func flagGiven(fs *flag.FlagSet, name string) (given bool) {
	fs.Visit(func(f *flag.Flag) { given = given || f.Name == name })
	return given
}

// consumer prints and acknowledges a group's messages with the client's
// Consume.
type consumer struct {
	s            *session
	client       *queengate.Client
	queue, group string
	fail         string
	named        bool // --consumer given
	opts         queengate.ConsumeOptions
	stop         context.CancelFunc
	mu           sync.Mutex
	unacked      map[place]string // printed, not yet acknowledged: their transactionIds
	failure      error            // what ends queenctl with an error: an ack not applied, a line not printed
}

// place is a message's partition and offset.
type place struct {
	partition string
	offset    int64
}

func (c *consumer) check() error {
	if err := checkName("queue", c.queue); err != nil {
		return err
	}
	if c.opts.Partition != "" {
		if err := checkName("partition", c.opts.Partition); err != nil {
			return err
		}
	}
	o := c.opts
	switch {
	case c.group == "":
		return usagef("consume: --group is required: the consumer group to consume as")
	case checkName("group", c.group) != nil:
		return checkName("group", c.group)
	case o.MaxMessages < 0 || o.Max < 1 || o.Max > queengate.MaxPopMax:
		return usagef("consume: --count must be 0 or more, --max 1 to %d", queengate.MaxPopMax)
	case o.Lease < queengate.MinConsumeLease || o.Lease.Milliseconds() > queengate.MaxLeaseMs || o.Wait < 0 || o.Wait.Milliseconds() > queengate.MaxWaitMs:
		return usagef("consume: --lease %v to %v (it is renewed every third of it), --wait 0 to %v", queengate.MinConsumeLease,
			time.Duration(queengate.MaxLeaseMs)*time.Millisecond, time.Duration(queengate.MaxWaitMs)*time.Millisecond)
	case o.Concurrency < 1 || o.Concurrency > maxConsumeConcurrency:
		return usagef("consume: --concurrency 1 to %d", maxConsumeConcurrency)
	case o.MaxBytes < 0 || o.MaxBytes > maxPopBytes:
		return usagef("consume: --max-bytes 0 (as much as fits) to %d", maxPopBytes)
	case o.MaxAckPending < 0 || o.MaxAckPending > maxAckPendingLimit:
		return usagef("consume: --max-ack-pending 0 (no limit) to %d", maxAckPendingLimit)
	case o.MaxAckPending > 0 && !c.named:
		return usagef("consume: --max-ack-pending counts what one consumer holds, by its name: give --consumer NAME, one of this consumer's own")
	}
	return nil
}

// The gateway's bounds on a pop's maxBytes and maxAckPending
// (docs/protocol.md, "Pop").
const (
	maxPopBytes        = 1 << 30
	maxAckPendingLimit = 1000000
)

// run consumes until --count messages are printed, an interrupt drains
// it, or something fails.
func (c *consumer) run(ctx context.Context) error {
	// An interrupt ends ctx; consuming goes on under its own context
	// while it drains.
	work, stop := context.WithCancel(context.WithoutCancel(ctx))
	defer stop()
	c.stop = stop
	opts := c.opts
	opts.OnAck, opts.OnError = c.onAck, c.onError
	c.unacked = map[place]string{}
	cs := c.client.NewConsumer(c.queue, c.group, opts, c.handle)
	var watch sync.WaitGroup
	defer watch.Wait()
	watch.Go(func() {
		select {
		case <-work.Done():
			return
		case <-ctx.Done():
		}
		if work.Err() != nil {
			return // done already
		}
		if _, refused := errors.AsType[*admin.RefusedError](context.Cause(ctx)); refused {
			stop() // NATS refused a subject: nothing to drain
			return
		}
		fmt.Fprintln(c.s.stderr, "queenctl: interrupted: draining (no more pops; the batches in hand are printed and acknowledged)")
		drain, cancel := context.WithTimeout(work, c.opts.Lease)
		defer cancel()
		_ = cs.Drain(drain) // past the lease, what was printed is still acknowledged
	})
	err := cs.Run(work)
	stop()
	c.mu.Lock()
	defer c.mu.Unlock()
	switch {
	case c.failure != nil:
		return c.failure
	case err == nil || errors.Is(err, context.Canceled): // --count reached, or drained
		return nil
	}
	return gatewayErr(err)
}

// handle prints one message. Once queenctl is to end with an error, it
// stops consuming: the message is released, not printed.
func (c *consumer) handle(ctx context.Context, m queengate.Delivery) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.failure == nil {
		c.failure = c.print(ctx, m)
	}
	if c.failure != nil {
		c.stop()
		<-ctx.Done()
		return ctx.Err()
	}
	c.unacked[place{queengate.PartitionOf(ctx), m.Offset}] = m.TransactionID
	if c.fail != "" {
		return errors.New(c.fail)
	}
	return nil
}

// print writes a message as a JSON line, data byte for byte as pushed:
// it is appended last by hand, since encoding/json would compact it and
// escape <, > and &.
func (c *consumer) print(ctx context.Context, m queengate.Delivery) error {
	head, err := json.Marshal(struct {
		Partition string `json:"partition"`
		queengate.Delivery
		Data json.RawMessage `json:"data,omitempty"` // nil: hides the Delivery's
	}{Partition: queengate.PartitionOf(ctx), Delivery: m})
	if err != nil {
		return err
	}
	data := m.Data
	if len(data) == 0 {
		data = json.RawMessage("null")
	}
	line := append(head[:len(head)-1], `,"data":`...)
	line = append(append(line, data...), '}')
	_, err = fmt.Fprintf(c.s.stdout, "%s\n", line)
	return err
}

// onAck ends queenctl at an ack the gateway did not apply, naming the
// message (Consume acknowledges by offset).
func (c *consumer) onAck(partition string, a queengate.AckAnswer) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, it := range a.Items {
		if it.Offset == nil {
			continue
		}
		at := place{partition, *it.Offset}
		if it.Result != "acked" && it.Result != "alreadyAcked" && c.failure == nil {
			c.failure = &admin.GatewayError{Code: 409, Message: fmt.Sprintf("message %s was printed but not acknowledged: %s (it will be delivered again)",
				c.unacked[at], it.Result)}
			c.stop()
		}
		delete(c.unacked, at)
	}
}

// onError reports on stderr what Consume carries on past; an ack not
// applied is onAck's.
func (c *consumer) onError(err error) {
	if _, ok := errors.AsType[*queengate.UnsettledError](err); !ok {
		fmt.Fprintln(c.s.stderr, "queenctl:", output.Printable(err.Error()))
	}
}

// gatewayErr turns a client error into queenctl's.
func gatewayErr(err error) error {
	var werr *queengate.Error
	if errors.As(err, &werr) {
		return &admin.GatewayError{Code: werr.Code, Message: werr.Message}
	}
	return &admin.UnreachableError{Msg: err.Error()}
}
