package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"testing"
	"time"

	queengate "github.com/queengate/queengate"
	"github.com/queengate/queengate/queengatetest"
)

// TestProducerAndConsumer tests a producer and this consumer against a
// real gateway, started for the test: the producer pushes three orders
// (one twice, as a retry would), the consumer handles each once, and the
// one its handler fails comes back until handled.
func TestProducerAndConsumer(t *testing.T) {
	client := queengatetest.New(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	for _, id := range []string{"order-1", "order-2", "order-3", "order-2"} {
		order := queengate.Message{TransactionID: id, Data: json.RawMessage(fmt.Sprintf(`{"id":%q}`, id))}
		if _, err := client.Push(ctx, "payments", "customer-42", order); err != nil {
			t.Fatal(err)
		}
	}

	c := consumer{client: client, queue: "payments", group: "billing"}
	handled := map[string]int{}
	attempts := map[string]int{}
	handle := func(d queengate.Delivery) error {
		attempts[d.TransactionID]++
		if d.TransactionID == "order-2" && d.Attempts == 1 {
			return errors.New("card declined, try again")
		}
		handled[d.TransactionID]++
		return nil
	}
	for {
		n, err := c.consumeOnce(ctx, handle)
		if err != nil {
			t.Fatal(err)
		}
		if n == 0 {
			break
		}
	}
	want := map[string]int{"order-1": 1, "order-2": 1, "order-3": 1}
	if fmt.Sprint(handled) != fmt.Sprint(want) {
		t.Errorf("handled %v, want each order once (the retried push is a duplicate)", handled)
	}
	if attempts["order-2"] != 2 {
		t.Errorf("order-2 was delivered %d times, want 2: failed once, then handled", attempts["order-2"])
	}
}
