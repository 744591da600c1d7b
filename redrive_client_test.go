package queengate_test

import (
	"testing"

	queengate "github.com/queengate/queengate"
)

// Through the client: dead letters are listed, then redriven one request
// at a time until none is left; each is back once, its transactionId and
// data byte for byte (spacing and null included).
func TestRedriveThroughTheClient(t *testing.T) {
	t.Parallel()
	r := startGateway(t, "s3cret", queengate.WithAdminToken("s3cret"))
	ctx := t.Context()
	if _, err := r.client.Configure(ctx, queengate.ConfigureRequest{Queue: r.queue, Options: map[string]int64{"maxAttempts": 1}}); err != nil {
		t.Fatal(err)
	}
	sent := []queengate.Message{msg("a", `{ "n" : 1 }`), msg("b", `null`), msg("c", `"x"`)}
	if _, err := r.client.Push(ctx, r.queue, "p", sent...); err != nil {
		t.Fatal(err)
	}
	p, err := r.client.Pop(ctx, r.queue, "", queengate.PopRequest{Group: "g", Max: 3})
	if err != nil || len(p.Messages) != 3 {
		t.Fatalf("pop: %+v, %v", p, err)
	}
	var items []queengate.AckItem
	for i := range p.Messages {
		items = append(items, queengate.AckItem{Offset: &p.Messages[i].Offset, Status: queengate.AckFailed, Error: "boom"})
	}
	if a, err := r.client.Ack(ctx, r.queue, p.Partition, queengate.AckRequest{Group: "g", LeaseID: p.LeaseID, Items: items}); err != nil || a.DeadLettered != 3 {
		t.Fatalf("ack: %+v, %v", a, err)
	}
	l, err := r.client.DeadLetters(ctx, r.queue, queengate.DeadLettersRequest{Group: "g"})
	if err != nil || len(l.DeadLetters) != 3 {
		t.Fatalf("list: %+v, %v", l, err)
	}
	if _, err := r.client.Redrive(ctx, r.queue, queengate.DeadLettersRequest{Limit: 5000}); err == nil {
		t.Fatal("a limit over MaxRedrive was accepted")
	}
	moved, err := r.client.RedriveAll(ctx, r.queue, queengate.DeadLettersRequest{Limit: 1})
	if err != nil || moved != 3 {
		t.Fatalf("redrive all: %d, %v", moved, err)
	}
	back, err := r.client.Read(ctx, r.queue, "p", queengate.ReadRequest{From: 3})
	if err != nil || len(back.Messages) != 3 {
		t.Fatalf("read back: %+v, %v", back, err)
	}
	for i, m := range back.Messages {
		if m.TransactionID != sent[i].TransactionID || string(m.Data) != string(sent[i].Data) {
			t.Errorf("redriven %d: %q %s, want %q %s", i, m.TransactionID, m.Data, sent[i].TransactionID, sent[i].Data)
		}
	}
}
