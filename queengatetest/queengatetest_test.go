package queengatetest_test

import (
	"context"
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	queengate "github.com/queengate/queengate"
	"github.com/queengate/queengate/queengatetest"
	"github.com/queengate/queengate/server"
)

func TestMain(m *testing.M) { queengatetest.Main(m) }

func message(id, data string) queengate.Message {
	return queengate.Message{TransactionID: id, Data: json.RawMessage(data)}
}

// TestPushReadAndConsume: the client New gives pushes, reads the messages
// back, and consumes them with pop and ack.
func TestPushReadAndConsume(t *testing.T) {
	t.Parallel()
	c := queengatetest.New(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	answers, err := c.Push(ctx, "orders", "customer-42", message("order-1", `{"n":1}`), message("order-2", `{"n":2}`))
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range answers {
		if a.Status != queengate.StatusQueued {
			t.Fatalf("push answered %+v, want queued", a)
		}
	}
	read, err := c.Read(ctx, "orders", "customer-42", queengate.ReadRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if len(read.Messages) != 2 || string(read.Messages[1].Data) != `{"n":2}` {
		t.Fatalf("read %+v, want the two messages pushed", read.Messages)
	}
	popped, err := c.Pop(ctx, "orders", "", queengate.PopRequest{Group: "billing"})
	if err != nil {
		t.Fatal(err)
	}
	if len(popped.Messages) != 2 || popped.LeaseID == "" {
		t.Fatalf("pop delivered %d messages (lease %q), want both under a lease", len(popped.Messages), popped.LeaseID)
	}
	items := []queengate.AckItem{}
	for _, m := range popped.Messages {
		items = append(items, queengate.AckItem{TransactionID: m.TransactionID, Status: queengate.AckCompleted})
	}
	if _, err := c.Ack(ctx, "orders", popped.Partition, queengate.AckRequest{Group: "billing", LeaseID: popped.LeaseID, Items: items}); err != nil {
		t.Fatal(err)
	}
	again, err := c.Pop(ctx, "orders", "", queengate.PopRequest{Group: "billing"})
	if err != nil {
		t.Fatal(err)
	}
	if len(again.Messages) != 0 {
		t.Errorf("pop after acking everything delivered %d messages", len(again.Messages))
	}
}

// TestEachGatewayItsOwnDatabase: two gateways in one test share nothing
// (the same transactionId is new to each), and a gateway's NATS URL and
// admin address serve connections of the test's own.
func TestEachGatewayItsOwnDatabase(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, prefix := range []string{"", "shop"} {
		g := queengatetest.Start(t, func(c *server.Config) { c.Prefix = prefix })
		answers, err := g.Connect(t).Push(ctx, "orders", "p", message("same-id", `{}`))
		if err != nil {
			t.Fatal(err)
		}
		if answers[0].Status != queengate.StatusQueued {
			t.Errorf("prefix %q: push answered %s; want queued in a gateway of its own", prefix, answers[0].Status)
		}
		nc, err := nats.Connect(g.ClientURL())
		if err != nil {
			t.Fatal(err)
		}
		nc.Close()
		resp, err := http.Get("http://" + g.AdminAddr() + "/readyz")
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Errorf("prefix %q: /readyz answered %s", prefix, resp.Status)
		}
	}
}
