package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"testing"
	"time"

	queengate "github.com/queengate/queengate"
	"github.com/queengate/queengate/consumer"
	"github.com/queengate/queengate/queengatetest"
)

// TestProducerAndConsumer tests a producer and this consumer against a
// real gateway, started for the test. The producer pushes three orders
// (one twice, as a retry would). Group billing fails order-2 once, and
// with maxAttempts 1 it is dead-lettered; group audit applies all three.
// Once redriven, order-2 comes back to both groups: billing applies it,
// audit recognises it by its transactionId and applies nothing. Each
// order is applied once per group, and both groups are left with nothing
// to consume: the redriven copy was acknowledged by its offset.
func TestProducerAndConsumer(t *testing.T) {
	client := queengatetest.New(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if _, err := client.Configure(ctx, queengate.ConfigureRequest{Queue: "payments", Options: map[string]int64{"maxAttempts": 1}}); err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"order-1", "order-2", "order-3", "order-2"} {
		order := queengate.Message{TransactionID: id, Data: json.RawMessage(fmt.Sprintf(`{"id":%q}`, id))}
		if _, err := client.Push(ctx, "payments", "customer-42", order); err != nil {
			t.Fatal(err)
		}
	}

	applied := map[string]map[string]int{"billing": {}, "audit": {}}
	books := map[string]*ledger{}
	declined := false
	for group := range applied {
		books[group] = &ledger{retryIn: time.Millisecond, apply: func(d queengate.Delivery) error {
			if group == "billing" && d.TransactionID == "order-2" && !declined {
				declined = true
				return errors.New("card declined, try again")
			}
			applied[group][d.TransactionID]++
			return nil
		}}
	}
	run := func(group string, messages int) {
		t.Helper()
		opts := consumer.Options{Consumer: "test", Wait: 100 * time.Millisecond, MaxMessages: messages,
			OnError: func(err error) { t.Logf("%s: %v", group, err) }}
		if err := consume(ctx, client, "payments", group, opts, books[group]); err != nil {
			t.Fatalf("%s: %v", group, err)
		}
	}
	run("billing", 3)
	run("audit", 3)
	if moved, err := client.RedriveAll(ctx, "payments", queengate.DeadLettersRequest{}); err != nil || moved != 1 {
		t.Fatalf("redrive: %d moved, %v; want order-2, dead-lettered by billing", moved, err)
	}
	run("billing", 1)
	run("audit", 1)

	want := map[string]map[string]int{
		"billing": {"order-1": 1, "order-2": 1, "order-3": 1},
		"audit":   {"order-1": 1, "order-2": 1, "order-3": 1},
	}
	if fmt.Sprint(applied) != fmt.Sprint(want) {
		t.Errorf("applied %v, want each order once per group (the retried push is a duplicate, the redriven copy applied only where the original was not)", applied)
	}
	groups, err := client.Groups(ctx, "payments")
	if err != nil {
		t.Fatal(err)
	}
	for _, g := range groups.Groups {
		if g.Lag != 0 {
			t.Errorf("group %s has %d messages left; want 0 (the redriven copy acknowledged by its offset)", g.Group, g.Lag)
		}
	}
}
