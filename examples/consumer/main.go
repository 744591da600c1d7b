// Command consumer is a runnable example of a queengate consumer in Go,
// as docs/protocol.md advises one: it runs on package consumer, which
// renews each batch's lease as soon as it arrives (the delivery counts:
// a consumer that dies on a message gets it dead-lettered after
// maxAttempts, not redelivered forever) and while the handler runs, and
// acknowledges by offset (a redriven message, whose transactionId the
// partition holds twice, is settled as the copy it is). Its effect is
// exactly once by the transactionId: a ledger keyed by it applies each
// order once, however often it is delivered (in your code, a unique key
// in your own database, written in the transaction that applies the
// effect). A failure is retried after a delay; Ctrl-C drains. main_test.go
// tests it with a producer against an in-process gateway (package
// queengatetest), redrive included.
//
//	go tool task run                      # in one terminal
//	go run ./examples/push                # in another: something to consume
//	go run ./examples/consumer            # group "example": prints each order once
package main

import (
	"context"
	"flag"
	"fmt"
	"log"
	"os/signal"
	"sync"
	"syscall"
	"time"

	"github.com/nats-io/nats.go"

	queengate "github.com/queengate/queengate"
	"github.com/queengate/queengate/consumer"
)

func main() {
	url := flag.String("nats-url", nats.DefaultURL, "NATS URL of the gateway")
	prefix := flag.String("prefix", queengate.DefaultPrefix, "subject prefix")
	queue := flag.String("queue", "payments", "queue")
	group := flag.String("group", "example", "consumer group (its own: another group's consumers take what they pop)")
	flag.Parse()

	nc, err := nats.Connect(*url)
	if err != nil {
		log.Fatal(err)
	}
	defer nc.Close()
	client, err := queengate.NewClient(nc, queengate.WithPrefix(*prefix))
	if err != nil {
		log.Fatal(err)
	}
	defer client.Close()
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()

	book := &ledger{retryIn: 5 * time.Second, apply: func(d queengate.Delivery) error {
		fmt.Printf("%s offset=%d attempt=%d %s\n", d.TransactionID, d.Offset, d.Attempts, d.Data)
		return nil
	}}
	opts := consumer.Options{Consumer: "example", OnError: func(err error) { log.Print(err) }, OnIdle: idleOnce(*queue, *group)}
	if err := consume(ctx, client, *queue, *group, opts, book); err != nil {
		log.Fatal(err)
	}
}

// consume runs the ledger's handler as a consumer of queue for group
// until ctx ends, then drains: no more pops, the batches in hand handled
// and acknowledged (within 30 s). It returns nil after a drain or once
// opts.MaxMessages are handled.
func consume(ctx context.Context, client *queengate.Client, queue, group string, opts consumer.Options, book *ledger) error {
	c := consumer.New(client, queue, group, opts, book.handle)
	ran := make(chan error, 1)
	go func() { ran <- c.Run(context.WithoutCancel(ctx)) }() // ended by the drain, not by ctx
	select {
	case err := <-ran:
		return err
	case <-ctx.Done():
	}
	drain, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_ = c.Drain(drain) // past its time, what was handled is still acknowledged
	return <-ran
}

// ledger applies each order's effect once per transactionId. It stands in
// for a table of yours with the transactionId as its unique key.
type ledger struct {
	apply   func(queengate.Delivery) error // the effect
	retryIn time.Duration                  // how long a failed order waits before it comes back

	mu      sync.Mutex
	applied map[string]bool
}

// handle is the consumer's handler. A message whose transactionId is
// applied already (delivered again after a lost ack, or a redriven copy
// in a group that applied the original) changes nothing and is
// acknowledged; a failure comes back after retryIn.
func (l *ledger) handle(_ context.Context, d queengate.Delivery) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.applied[d.TransactionID] {
		return nil
	}
	if err := l.apply(d); err != nil {
		return consumer.Retry(err, l.retryIn)
	}
	if l.applied == nil {
		l.applied = map[string]bool{}
	}
	l.applied[d.TransactionID] = true
	return nil
}

// idleOnce says once that the group has nothing to consume yet, rather
// than waiting in silence.
func idleOnce(queue, group string) func() {
	var once sync.Once
	return func() {
		once.Do(func() {
			log.Printf("nothing to consume in %s for group %s yet; waiting (Ctrl-C to stop)", queue, group)
		})
	}
}
