// Command push is a runnable example of a queengate producer in Go: it
// pushes the example message of docs/protocol.md twice with request-reply
// (the retry answers "duplicate" with the first message's id), then once
// fire-and-forget, reading the answer on the ack subject.
//
//	go tool task run                      # in one terminal
//	go run ./examples/push                # in another
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"log"
	"os"
	"time"

	"github.com/nats-io/nats.go"
)

// answer is one entry of a push reply (docs/protocol.md, "Answers").
type answer struct {
	Index         int    `json:"index"`
	TransactionID string `json:"transactionId"`
	Status        string `json:"status"` // queued, duplicate or failed
	MessageID     string `json:"messageId"`
	PartitionID   int64  `json:"partitionId"`
	Offset        int64  `json:"offset"`
	Error         string `json:"error,omitempty"`
}

func main() {
	url := flag.String("nats-url", nats.DefaultURL, "NATS URL of the gateway")
	prefix := flag.String("prefix", "queen", "subject prefix")
	queue := flag.String("queue", "payments", "queue")
	partition := flag.String("partition", "customer-42", "partition")
	flag.Parse()

	nc, err := nats.Connect(*url)
	if err != nil {
		log.Fatal(err)
	}
	defer nc.Close()
	subject := *prefix + ".push." + *queue + "." + *partition
	body := []byte(`[{"transactionId":"order-9137-paid","data":{"orderId":9137,"amount":99.5}}]`)

	for _, attempt := range []string{"first", "retry"} {
		msg, err := nc.Request(subject, body, 10*time.Second)
		if err != nil {
			log.Fatal(err)
		}
		if code := msg.Header.Get("Nats-Service-Error-Code"); code != "" {
			log.Fatalf("rejected with %s: %s", code, msg.Header.Get("Nats-Service-Error"))
		}
		var answers []answer
		if err := json.Unmarshal(msg.Data, &answers); err != nil {
			log.Fatal(err)
		}
		a := answers[0]
		fmt.Printf("%-5s %s -> %s messageId=%s offset=%d\n", attempt, a.TransactionID, a.Status, a.MessageID, a.Offset)
	}

	// Fire-and-forget: publish without a reply subject and read the answer
	// on queen.ack.<queue>.<partition>. Subscribe before publishing.
	acks, err := nc.SubscribeSync(*prefix + ".ack." + *queue + "." + *partition)
	if err != nil {
		log.Fatal(err)
	}
	if err := nc.Publish(subject, []byte(`{"data":{"note":"no transactionId: the gateway mints one"}}`)); err != nil {
		log.Fatal(err)
	}
	ack, err := acks.NextMsg(10 * time.Second)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("ack   %s\n", ack.Data)
	os.Exit(0)
}
