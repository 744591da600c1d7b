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
)

func init() {
	commands["consume"] = &command{usage: consumeUsage, setup: setupConsume}
}

const consumeUsage = `Usage:
  queenctl consume QUEUE [PARTITION] --group GROUP [--count N] [--max N]
                   [--lease DURATION] [--wait DURATION] [--consumer NAME] [--fail REASON]

Consumes messages as a consumer of GROUP: of any partition with work, or
of PARTITION. Prints each message as one JSON line (partition, offset,
messageId, transactionId, createdAt, attempts, data exactly as pushed),
and acknowledges each batch completed after printing all of it: delivery
is at least once. A message is printed before it is acknowledged; if
queenctl is killed before the ack arrives, the batch is delivered again
(and printed again) once its lease runs out. An ack the gateway does not
apply (the lease ran out or was taken over first) ends queenctl with exit
1, naming the message; it is delivered again. An interrupt (Ctrl-C,
SIGTERM) still waits for the printed batch's ack.

--count stops after N messages (0: until interrupted, exit 0). --max is
the batch size (default 100), --lease how long a batch is the consumer's
(default 30s), --wait how long a pop waits for messages (default 5s).
--fail acknowledges every message failed with REASON instead: they are
redelivered, and dead-lettered after the queue's maxAttempts.

Needs NATS (--nats or QUEENCTL_NATS_URL). The group is created by its
first pop and starts at the first message still stored.

`

func setupConsume(fs *flag.FlagSet) runFunc {
	group := fs.String("group", "", "consumer group `name` (required)")
	count := fs.Int("count", 0, "stop after `N` messages (0: until interrupted)")
	max := fs.Int("max", queengate.DefaultPopMax, "messages per pop (`N`)")
	lease := fs.Duration("lease", queengate.DefaultLeaseMs*time.Millisecond, "how long a popped batch is this consumer's")
	wait := fs.Duration("wait", 5*time.Second, "how long a pop waits for messages")
	name := fs.String("consumer", "queenctl", "this consumer's `name`, shown in group lists")
	fail := fs.String("fail", "", "acknowledge every message failed with this `reason`")
	return func(ctx context.Context, s *session, args []string) error {
		if len(args) < 1 || len(args) > 2 {
			return usagef("consume: want QUEUE [PARTITION] --group GROUP, e.g. queenctl consume payments --group billing")
		}
		c := consumer{s: s, queue: args[0], group: *group, count: *count, fail: *fail,
			pop: queengate.PopRequest{Group: *group, Consumer: *name, Max: *max, LeaseMs: lease.Milliseconds(), WaitMs: wait.Milliseconds()}}
		if len(args) == 2 {
			c.partition = args[1]
		}
		if err := c.check(); err != nil {
			return err
		}
		nc, err := s.nats(ctx)
		if err != nil {
			return err
		}
		if c.client, err = queengate.NewClient(nc.nc, queengate.WithPrefix(s.g.prefix), queengate.WithTimeout(s.g.timeout)); err != nil {
			return err
		}
		return c.run(ctx)
	}
}

// consumer prints and acknowledges a group's messages.
type consumer struct {
	s                       *session
	client                  *queengate.Client
	queue, partition, group string
	count                   int
	fail                    string
	pop                     queengate.PopRequest
}

func (c *consumer) check() error {
	if err := checkName("queue", c.queue); err != nil {
		return err
	}
	if c.partition != "" {
		if err := checkName("partition", c.partition); err != nil {
			return err
		}
	}
	switch {
	case c.group == "":
		return usagef("consume: --group is required: the consumer group to consume as")
	case checkName("group", c.group) != nil:
		return checkName("group", c.group)
	case c.count < 0 || c.pop.Max < 1 || c.pop.Max > queengate.MaxPopMax:
		return usagef("consume: --count must be 0 or more, --max 1 to %d", queengate.MaxPopMax)
	case c.pop.LeaseMs < 1 || c.pop.LeaseMs > queengate.MaxLeaseMs || c.pop.WaitMs < 0 || c.pop.WaitMs > queengate.MaxWaitMs:
		return usagef("consume: --lease 1ms to %v, --wait 0 to %v", time.Duration(queengate.MaxLeaseMs)*time.Millisecond,
			time.Duration(queengate.MaxWaitMs)*time.Millisecond)
	}
	return nil
}

func (c *consumer) run(ctx context.Context) error {
	printed := 0
	for c.count == 0 || printed < c.count {
		if c.count > 0 {
			c.pop.Max = min(c.pop.Max, c.count-printed)
		}
		batch, err := c.client.Pop(ctx, c.queue, c.partition, c.pop)
		switch {
		case ctx.Err() != nil:
			return nil // interrupted: what was printed is acknowledged
		case err != nil:
			return gatewayErr(err)
		}
		if len(batch.Messages) == 0 {
			continue
		}
		// Renewed at once, as the Go client's Consume does: it tells the
		// gateway the batch arrived, so a queenctl killed while printing
		// counts an attempt. Its answer does not matter: the ack says
		// whether the lease held.
		var confirm sync.WaitGroup
		confirm.Go(func() {
			_, _ = c.client.Renew(ctx, c.queue, batch.Partition, queengate.LeaseRequest{Group: c.group, LeaseID: batch.LeaseID, LeaseMs: c.pop.LeaseMs})
		})
		err = c.print(batch)
		confirm.Wait()
		if err != nil {
			return err
		}
		if err := c.ack(ctx, batch); err != nil {
			return err
		}
		printed += len(batch.Messages)
	}
	return nil
}

// print writes a batch as JSON lines, data byte for byte as pushed: it
// is appended last by hand, since encoding/json would compact it and
// escape <, > and &.
func (c *consumer) print(batch queengate.PopAnswer) error {
	for _, m := range batch.Messages {
		head, err := json.Marshal(struct {
			Partition string `json:"partition"`
			queengate.Delivery
			Data json.RawMessage `json:"data,omitempty"` // nil: hides the Delivery's
		}{Partition: batch.Partition, Delivery: m})
		if err != nil {
			return err
		}
		data := m.Data
		if len(data) == 0 {
			data = json.RawMessage("null")
		}
		line := append(head[:len(head)-1], `,"data":`...)
		line = append(append(line, data...), '}')
		if _, err := fmt.Fprintf(c.s.stdout, "%s\n", line); err != nil {
			return err
		}
	}
	return nil
}

// ack settles a printed batch; it says which messages it could not.
func (c *consumer) ack(ctx context.Context, batch queengate.PopAnswer) error {
	items := make([]queengate.AckItem, len(batch.Messages))
	for i, m := range batch.Messages {
		items[i] = queengate.AckItem{TransactionID: m.TransactionID, Status: queengate.AckCompleted}
		if c.fail != "" {
			items[i].Status, items[i].Error = queengate.AckFailed, c.fail
		}
	}
	// Acknowledged even when interrupted now: the batch was printed.
	ans, err := c.client.Ack(context.WithoutCancel(ctx), c.queue, batch.Partition,
		queengate.AckRequest{Group: c.group, LeaseID: batch.LeaseID, Items: items})
	if err != nil {
		return gatewayErr(err)
	}
	for _, it := range ans.Items {
		if it.Result != "acked" {
			return &gatewayError{Code: 409, Message: fmt.Sprintf("message %s was printed but not acknowledged: %s (it will be delivered again)", it.TransactionID, it.Result)}
		}
	}
	return nil
}

// gatewayErr turns a client error into queenctl's.
func gatewayErr(err error) error {
	var werr *queengate.Error
	if errors.As(err, &werr) {
		return &gatewayError{Code: werr.Code, Message: werr.Message}
	}
	return &unreachableError{err.Error()}
}
