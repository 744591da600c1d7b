// Command consumer is a runnable example of a queengate consumer in Go,
// with the client package: it pops messages of a queue for a consumer
// group, handles each, and acks it completed, or failed with the
// handler's error (the group gets it again). main_test.go tests it with a
// producer against an in-process gateway (package queengatetest).
//
//	go tool task run                      # in one terminal
//	go run ./examples/push                # in another: something to consume
//	go run ./examples/consumer
package main

import (
	"context"
	"flag"
	"fmt"
	"log"
	"os/signal"
	"syscall"

	"github.com/nats-io/nats.go"

	queengate "github.com/queengate/queengate"
)

func main() {
	url := flag.String("nats-url", nats.DefaultURL, "NATS URL of the gateway")
	prefix := flag.String("prefix", queengate.DefaultPrefix, "subject prefix")
	queue := flag.String("queue", "payments", "queue")
	group := flag.String("group", "billing", "consumer group")
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

	c := consumer{client: client, queue: *queue, group: *group, waitMs: 5000}
	show := func(d queengate.Delivery) error {
		fmt.Printf("%s offset=%d attempt=%d %s\n", d.TransactionID, d.Offset, d.Attempts, d.Data)
		return nil
	}
	for ctx.Err() == nil {
		if _, err := c.consumeOnce(ctx, show); err != nil && ctx.Err() == nil {
			log.Fatal(err)
		}
	}
}

// consumer takes messages of a queue for one consumer group.
type consumer struct {
	client *queengate.Client
	queue  string
	group  string
	// waitMs is how long a pop waits for messages when there are none.
	waitMs int64
}

// consumeOnce pops a batch (of whichever partition has work), gives each
// message to handle in order, and acks the batch: completed, or failed
// with handle's error. It returns how many messages it handled.
func (c consumer) consumeOnce(ctx context.Context, handle func(queengate.Delivery) error) (int, error) {
	batch, err := c.client.Pop(ctx, c.queue, "", queengate.PopRequest{Group: c.group, WaitMs: c.waitMs})
	if err != nil || len(batch.Messages) == 0 {
		return 0, err
	}
	items := make([]queengate.AckItem, 0, len(batch.Messages))
	for _, d := range batch.Messages {
		item := queengate.AckItem{TransactionID: d.TransactionID, Status: queengate.AckCompleted}
		if err := handle(d); err != nil {
			item.Status, item.Error = queengate.AckFailed, err.Error()
		}
		items = append(items, item)
	}
	_, err = c.client.Ack(ctx, c.queue, batch.Partition, queengate.AckRequest{Group: c.group, LeaseID: batch.LeaseID, Items: items})
	return len(items), err
}
