package main

import (
	"context"
	"flag"
	"time"

	queengate "github.com/queengate/queengate"
	queenconsumer "github.com/queengate/queengate/consumer" // consumer is this command's type
	"github.com/queengate/queengate/internal/ctl/cli"
	"github.com/queengate/queengate/internal/ctl/consume"
)

const consumeUsage = `Usage:
  queenctl consume QUEUE [PARTITION] --group GROUP [--count N] [--max N]
                   [--lease DURATION] [--wait DURATION] [--consumer NAME] [--fail REASON]
                   [--concurrency N] [--partitions N] [--max-bytes N] [--max-ack-pending N]

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

--concurrency N consumes N batches at once (default 1), each partition in
offset order; lines of different partitions interleave. --partitions N
lets each pop of any partition lease up to N partitions (default 10, 1 to
100; 1: one at a time): a batch of --max then fills from several
partitions that hold a few messages each, printed one partition after the
other. --max-bytes bounds what
each pop's messages take (0: as much as fits one answer).
--max-ack-pending N holds at most N messages delivered and not yet
acknowledged; the gateway counts them per consumer name, so it needs
--consumer with a name of this consumer's own.

Needs NATS (--nats or QUEENCTL_NATS_URL). The group is created by its
first pop and starts at the first message still stored. When the group
has nothing to consume, consume says so once on stderr and waits for
messages (until --count is met or it is interrupted).

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
	partitions := fs.Int("partitions", queenconsumer.DefaultPopPartitions, "let each pop lease up to `N` partitions")
	maxBytes := fs.Int64("max-bytes", 0, "bound each pop's messages to `N` bytes (0: as much as fits)")
	maxAckPending := fs.Int("max-ack-pending", 0, "hold at most `N` messages not yet acknowledged (needs --consumer)")
	return func(ctx context.Context, s *session, args []string) error {
		if len(args) < 1 || len(args) > 2 {
			return cli.Usagef("consume: want QUEUE [PARTITION] --group GROUP, e.g. queenctl consume payments --group billing")
		}
		c := consumer{named: flagGiven(fs, "consumer"), Printer: consume.Printer{Stdout: s.stdout, Stderr: s.stderr,
			Queue: args[0], Group: *group, Fail: *fail, Opts: queenconsumer.Options{Consumer: *name, Max: *max, Lease: *lease, Wait: *wait,
				Concurrency: *concurrency, Partitions: *partitions, MaxBytes: *maxBytes, MaxAckPending: *maxAckPending, MaxMessages: *count,
				MaxPopFailures: 1}}} // a failed pop ends queenctl, as any failed request does
		if len(args) == 2 {
			c.Opts.Partition = args[1]
		}
		if err := c.check(); err != nil {
			return err
		}
		nc, err := s.nats(ctx)
		if err != nil {
			return err
		}
		if c.Client, err = queengate.NewClient(nc.Conn, queengate.WithPrefix(s.g.prefix), queengate.WithTimeout(s.g.timeout)); err != nil {
			return err
		}
		return c.Run(ctx)
	}
}

// flagGiven says whether the command line set the flag name.
func flagGiven(fs *flag.FlagSet, name string) (given bool) {
	fs.Visit(func(f *flag.Flag) { given = given || f.Name == name })
	return given
}

// consumer is a consume command's printer with what check needs of the
// command line.
type consumer struct {
	consume.Printer
	named bool // --consumer given
}

func (c *consumer) check() error {
	if err := checkName("queue", c.Queue); err != nil {
		return err
	}
	if c.Opts.Partition != "" {
		if err := checkName("partition", c.Opts.Partition); err != nil {
			return err
		}
	}
	o := c.Opts
	switch {
	case c.Group == "":
		return cli.Usagef("consume: --group is required: the consumer group to consume as")
	case checkName("group", c.Group) != nil:
		return checkName("group", c.Group)
	case o.MaxMessages < 0 || o.Max < 1 || o.Max > queengate.MaxPopMax:
		return cli.Usagef("consume: --count must be 0 or more, --max 1 to %d", queengate.MaxPopMax)
	case o.Lease < queenconsumer.MinLease || o.Lease.Milliseconds() > queengate.MaxLeaseMs || o.Wait < 0 || o.Wait.Milliseconds() > queengate.MaxWaitMs:
		return cli.Usagef("consume: --lease %v to %v (it is renewed every third of it), --wait 0 to %v", queenconsumer.MinLease,
			time.Duration(queengate.MaxLeaseMs)*time.Millisecond, time.Duration(queengate.MaxWaitMs)*time.Millisecond)
	case o.Concurrency < 1 || o.Concurrency > maxConsumeConcurrency:
		return cli.Usagef("consume: --concurrency 1 to %d", maxConsumeConcurrency)
	case o.Partitions < 1 || o.Partitions > queengate.MaxPopPartitions:
		return cli.Usagef("consume: --partitions 1 to %d", queengate.MaxPopPartitions)
	case o.MaxBytes < 0 || o.MaxBytes > maxPopBytes:
		return cli.Usagef("consume: --max-bytes 0 (as much as fits) to %d", maxPopBytes)
	case o.MaxAckPending < 0 || o.MaxAckPending > maxAckPendingLimit:
		return cli.Usagef("consume: --max-ack-pending 0 (no limit) to %d", maxAckPendingLimit)
	case o.MaxAckPending > 0 && !c.named:
		return cli.Usagef("consume: --max-ack-pending counts what one consumer holds, by its name: give --consumer NAME, one of this consumer's own")
	}
	return nil
}

// The gateway's bounds on a pop's maxBytes and maxAckPending
// (docs/protocol.md, "Pop").
const (
	maxPopBytes        = 1 << 30
	maxAckPendingLimit = 1000000
)
