package consume

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sync"

	"github.com/queengate/queengate"
	"github.com/queengate/queengate/consumer"
	"github.com/queengate/queengate/internal/ctl/admin"
	"github.com/queengate/queengate/internal/ctl/output"
)

// Printer prints a group's messages as JSON lines on Stdout and
// acknowledges each once printed, with the client's Consume.
type Printer struct {
	Client       *queengate.Client
	Queue, Group string
	Fail         string // acknowledge every message failed with this reason
	Opts         consumer.Options
	Stdout       io.Writer
	Stderr       io.Writer

	stop    context.CancelFunc
	idle    sync.Once
	mu      sync.Mutex
	unacked map[place]string // printed, not yet acknowledged: their transactionIds
	failure error            // what ends queenctl with an error: an ack not applied, a line not printed
}

// place is a message's partition and offset.
type place struct {
	partition string
	offset    int64
}

// Run consumes until --count messages are printed, an interrupt drains
// it, or something fails.
func (c *Printer) Run(ctx context.Context) error {
	// An interrupt ends ctx; consuming goes on under its own context
	// while it drains.
	work, stop := context.WithCancel(context.WithoutCancel(ctx))
	defer stop()
	c.stop = stop
	opts := c.Opts
	opts.OnAck, opts.OnError, opts.OnIdle = c.onAck, c.onError, c.onIdle
	c.unacked = map[place]string{}
	cs := consumer.New(c.Client, c.Queue, c.Group, opts, c.handle)
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
		fmt.Fprintln(c.Stderr, "queenctl: interrupted: draining (no more pops; the batches in hand are printed and acknowledged)")
		drain, cancel := context.WithTimeout(work, c.Opts.Lease)
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
func (c *Printer) handle(ctx context.Context, m queengate.Delivery) error {
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
	c.unacked[place{consumer.PartitionOf(ctx), m.Offset}] = m.TransactionID
	if c.Fail != "" {
		return errors.New(c.Fail)
	}
	return nil
}

// print writes a message as a JSON line, data byte for byte as pushed:
// it is appended last by hand, since encoding/json would compact it and
// escape <, > and &.
func (c *Printer) print(ctx context.Context, m queengate.Delivery) error {
	head, err := json.Marshal(struct {
		Partition string `json:"partition"`
		queengate.Delivery
		Data json.RawMessage `json:"data,omitempty"` // nil: hides the Delivery's
	}{Partition: consumer.PartitionOf(ctx), Delivery: m})
	if err != nil {
		return err
	}
	data := m.Data
	if len(data) == 0 {
		data = json.RawMessage("null")
	}
	line := append(head[:len(head)-1], `,"data":`...)
	line = append(append(line, data...), '}')
	_, err = fmt.Fprintf(c.Stdout, "%s\n", line)
	return err
}

// onAck ends queenctl at an ack the gateway did not apply, naming the
// message (Consume acknowledges by offset).
func (c *Printer) onAck(partition string, a queengate.AckAnswer) {
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
func (c *Printer) onError(err error) {
	if _, ok := errors.AsType[*consumer.UnsettledError](err); !ok {
		fmt.Fprintln(c.Stderr, "queenctl:", output.Printable(err.Error()))
	}
}

// onIdle says once, at the first pop that waited in vain, that nothing
// is there yet: a consume of an empty queue, or of a group that consumed
// it all, would otherwise wait in silence.
func (c *Printer) onIdle() {
	c.idle.Do(func() {
		where := c.Queue
		if c.Opts.Partition != "" {
			where += "/" + c.Opts.Partition
		}
		fmt.Fprintf(c.Stderr, "queenctl: nothing to consume in %s for group %s yet; waiting (Ctrl-C to stop)\n",
			output.Printable(where), output.Printable(c.Group))
	})
}

// gatewayErr turns a client error into queenctl's.
func gatewayErr(err error) error {
	var werr *queengate.Error
	if errors.As(err, &werr) {
		return &admin.GatewayError{Code: werr.Code, Message: werr.Text}
	}
	return &admin.UnreachableError{Msg: err.Error()}
}
