package queengate_test

import (
	"errors"
	"testing"

	queengate "github.com/queengate/queengate"
)

// Through the client: a purge of one partition, then a delete, each
// answering what it removed; bad names are refused before anything is
// sent, and after the delete the same transactionId is queued again.
func TestPurgeAndDeleteQueueThroughTheClient(t *testing.T) {
	t.Parallel()
	r := startGateway(t, "s3cret", queengate.WithAdminToken("s3cret"))
	ctx := t.Context()
	if _, err := r.client.Push(ctx, r.queue, "p", msg("a", `1`), msg("b", `2`)); err != nil {
		t.Fatal(err)
	}
	if _, err := r.client.Push(ctx, r.queue, "q", msg("c", `3`)); err != nil {
		t.Fatal(err)
	}
	if _, err := r.client.PurgeQueue(ctx, r.queue, queengate.QueuePurgeRequest{Partition: "bad!"}); err == nil {
		t.Fatal("a bad partition name was sent")
	}
	p, err := r.client.PurgeQueue(ctx, r.queue, queengate.QueuePurgeRequest{Partition: "p"})
	if err != nil || p.Partition != "p" || p.Partitions != 1 || p.Messages != 2 {
		t.Fatalf("purge of p: %+v, %v; want 1 partition, 2 messages", p, err)
	}
	var werr *queengate.Error
	if _, err := r.client.PurgeQueue(ctx, r.queue+"-none", queengate.QueuePurgeRequest{}); !errors.As(err, &werr) || werr.Code != 404 {
		t.Fatalf("purge of a missing queue: %v; want 404", err)
	}
	if _, err := r.client.DeleteQueue(ctx, "bad!"); err == nil {
		t.Fatal("a bad queue name was sent")
	}
	d, err := r.client.DeleteQueue(ctx, r.queue)
	if err != nil || !d.Deleted || d.Partitions != 2 || d.Messages != 1 {
		t.Fatalf("delete: %+v, %v; want 2 partitions, 1 message", d, err)
	}
	a, err := r.client.Push(ctx, r.queue, "p", msg("a", `1`))
	if err != nil || a[0].Status != queengate.StatusQueued || a[0].Offset != 0 {
		t.Fatalf("a's push after the delete: %+v, %v; want queued at offset 0", a, err)
	}
}
