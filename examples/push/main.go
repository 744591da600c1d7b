// Command push is a runnable example of a queengate producer in Go, with
// the client package: it pushes an order twice with request-reply (the
// retry answers "duplicate" with the first message's id), then once
// fire-and-forget, its answer read on the ack subject and matched to the
// push by the client. Its transactionIds are its own (the README's nats
// commands push others), so a first run answers queued, duplicate,
// queued; a run again within the queue's window answers duplicate to all.
//
//	go tool task run                      # in one terminal
//	go run ./examples/push                # in another
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"log"
	"time"

	"github.com/nats-io/nats.go"

	queengate "github.com/queengate/queengate"
)

func main() {
	url := flag.String("nats-url", nats.DefaultURL, "NATS URL of the gateway")
	prefix := flag.String("prefix", queengate.DefaultPrefix, "subject prefix")
	queue := flag.String("queue", "payments", "queue")
	partition := flag.String("partition", "customer-42", "partition")
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
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()

	paid := queengate.Message{TransactionID: "order-9140-paid", Data: json.RawMessage(`{"orderId":9140,"amount":42.0}`)}
	for _, attempt := range []string{"first", "retry"} {
		answers, err := client.Push(ctx, *queue, *partition, paid)
		if err != nil {
			// An *queengate.Error was rejected as a whole (nothing stored);
			// anything else left the outcome unknown: retry with the same
			// transactionId.
			log.Fatal(err)
		}
		a := answers[0]
		fmt.Printf("%-5s %s -> %s messageId=%s offset=%d\n", attempt, a.TransactionID, a.Status, a.MessageID, a.Offset)
	}

	// Fire-and-forget: the answer comes on queen.ack.<queue>.<partition>;
	// the client subscribes before publishing and matches it by the
	// transactionIds, so every message of a published push needs one.
	shipped := queengate.Message{TransactionID: "order-9140-shipped", Data: json.RawMessage(`{"orderId":9140}`)}
	pending, err := client.Publish(ctx, *queue, *partition, shipped)
	if err != nil {
		log.Fatal(err)
	}
	answers, err := pending.Wait(ctx)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("ack   %s -> %s messageId=%s offset=%d\n", answers[0].TransactionID, answers[0].Status, answers[0].MessageID, answers[0].Offset)
}
