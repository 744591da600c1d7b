package main

import (
	"testing"

	"github.com/nats-io/nats.go"

	queengate "github.com/queengate/queengate"
)

// deadLetterThree pushes a, b, c to queue's partition p and fails them
// at maxAttempts 1, through the Go client: three dead letters.
func deadLetterThree(t *testing.T, g *gateway, queue string) {
	t.Helper()
	nc, err := nats.Connect(g.natsURL)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	c, err := queengate.NewClient(nc)
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	if _, err := c.Configure(ctx, queengate.ConfigureRequest{Queue: queue, Options: map[string]int64{"maxAttempts": 1}}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Push(ctx, queue, "p", queengate.Message{TransactionID: "a", Data: []byte("1")},
		queengate.Message{TransactionID: "b", Data: []byte("2")}, queengate.Message{TransactionID: "c", Data: []byte("3")}); err != nil {
		t.Fatal(err)
	}
	p, err := c.Pop(ctx, queue, "p", queengate.PopRequest{Group: "g", Max: 3})
	if err != nil || len(p.Messages) != 3 {
		t.Fatalf("pop: %+v, %v", p, err)
	}
	var items []queengate.AckItem
	for i := range p.Messages {
		items = append(items, queengate.AckItem{Offset: &p.Messages[i].Offset, Status: queengate.AckFailed, Error: "boom"})
	}
	if a, err := c.Ack(ctx, queue, "p", queengate.AckRequest{Group: "g", LeaseID: p.LeaseID, Items: items}); err != nil || a.DeadLettered != 3 {
		t.Fatalf("ack: %+v, %v", a, err)
	}
}

func TestLiveDLQ(t *testing.T) {
	t.Parallel()
	g := startGateway(t)
	deadLetterThree(t, g, "orders")
	trs := transports(g)
	for _, tr := range trs {
		r := ctl(t, "", flags(tr.admin, "dlq", "list", "orders", "-o", "json")...)
		r.expect(t, exitOK)
		if l := jsonOf[queengate.DeadLettersAnswer](t, r); len(l.DeadLetters) != 3 || l.DeadLetters[1].TransactionID != "b" {
			t.Fatalf("list over %s: %+v", tr.name, l)
		}
	}
	ctl(t, "", flags(trs[0].admin, "dlq", "list", "orders")...).expect(t, exitOK, "GROUP", "boom")
	ctl(t, "", "dlq", "redrive").expect(t, exitUsage, "give exactly one QUEUE")
	ctl(t, "", "dlq", "redrive", "orders", "--limit", "0").expect(t, exitUsage, "--limit 0")
	ctl(t, "", "dlq", "redrive", "orders", "--from-offset", "2", "--to-offset", "1").expect(t, exitUsage, "above --to-offset")

	// Not confirmed: nothing moves.
	ctl(t, "n\n", flags(trs[0].admin, "dlq", "redrive", "orders")...).expect(t, exitUsage, "redrive 3 dead letters", "[y/N]",
		`not confirmed (read "n", want y or yes)`)
	ctl(t, "", flags(trs[1].admin, "dlq", "redrive", "orders")...).expect(t, exitUsage, "not confirmed")
	// Confirmed, one selected by its original offset; then the rest with --yes.
	ctl(t, "y\n", flags(trs[0].admin, "dlq", "redrive", "orders", "--partition", "p", "--from-offset", "0", "--to-offset", "0")...).
		expect(t, exitOK, "1 dead letters redriven")
	ctl(t, "", flags(trs[1].admin, "dlq", "redrive", "orders", "--yes")...).expect(t, exitOK, "2 dead letters redriven")
	ctl(t, "", flags(trs[1].admin, "dlq", "redrive", "orders", "--yes")...).expect(t, exitOK, "0 dead letters redriven")
	ctl(t, "", flags(trs[0].admin, "dlq", "list", "orders")...).expect(t, exitOK, "no dead letters to redrive")
	r := ctl(t, "", flags(trs[0].admin, "read", "orders", "p", "--from", "3")...)
	r.expect(t, exitOK, `"transactionId":"a"`, `"transactionId":"b"`, `"transactionId":"c"`)
}
