package queengate_test

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	queengate "github.com/queengate/queengate"
	"github.com/queengate/queengate/internal/pgtest"
)

func TestReadYourWritesAcrossRequests(t *testing.T) {
	t.Parallel()
	r := startGateway(t, "")
	ctx := t.Context()
	var pushed []queengate.Result
	for i := range 5 {
		ans, err := r.client.Push(ctx, r.queue, "p", msg(fmt.Sprint("w-", 2*i), fmt.Sprintf(`{"i":%d}`, 2*i)), msg(fmt.Sprint("w-", 2*i+1), fmt.Sprintf(`[%d]`, 2*i+1)))
		if err != nil {
			t.Fatal(err)
		}
		pushed = append(pushed, ans...)
	}
	var read []queengate.StoredMessage
	next := int64(0)
	for {
		ans, err := r.client.Read(ctx, r.queue, "p", queengate.ReadRequest{From: next, Max: 3})
		if err != nil {
			t.Fatal(err)
		}
		if len(ans.Messages) == 0 {
			break
		}
		read, next = append(read, ans.Messages...), ans.Next
	}
	if len(read) != len(pushed) {
		t.Fatalf("read %d messages, pushed %d", len(read), len(pushed))
	}
	for i, m := range read {
		a := pushed[i]
		want := fmt.Sprintf(`{"i":%d}`, i)
		if i%2 == 1 {
			want = fmt.Sprintf(`[%d]`, i)
		}
		if m.Offset != a.Offset || m.MessageID != a.MessageID || m.TransactionID != a.TransactionID || string(m.Data) != want {
			t.Errorf("message %d read as %+v; pushed %+v with data %s", i, m, a, want)
		}
	}
	byID, err := r.client.GetMessage(ctx, pushed[3].MessageID)
	if err != nil || byID.TransactionID != "w-3" || byID.Queue != r.queue || byID.Partition != "p" || string(byID.Data) != `[3]` {
		t.Errorf("get by message id: %+v, %v", byID, err)
	}
	byTxn, err := r.client.GetTransaction(ctx, r.queue, "p", "w-4")
	if err != nil || byTxn.MessageID != pushed[4].MessageID {
		t.Errorf("get by transactionId: %+v, %v; want %s", byTxn, err, pushed[4].MessageID)
	}
}

func TestReadAndGetRejectBadInputClearly(t *testing.T) {
	t.Parallel()
	r := startGateway(t, "")
	ctx := t.Context()
	if _, err := r.client.Push(ctx, r.queue, "p", msg("x", `1`)); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name string
		call func() error
		code int
		says string
	}{
		{"negative offset", func() error {
			_, err := r.client.Read(ctx, r.queue, "p", queengate.ReadRequest{From: -1})
			return err
		}, 400, "offsets start at 0"},
		{"max too large", func() error {
			_, err := r.client.Read(ctx, r.queue, "p", queengate.ReadRequest{Max: queengate.MaxReadMax + 1})
			return err
		}, 400, "max is 10001"},
		{"unknown partition", func() error {
			_, err := r.client.Read(ctx, r.queue, "ghost", queengate.ReadRequest{})
			return err
		}, 404, "does not exist"},
		{"bad message id", func() error {
			_, err := r.client.GetMessage(ctx, "nope")
			return err
		}, 400, "bad messageId"},
		{"absent message", func() error {
			_, err := r.client.GetMessage(ctx, "00000000-0000-0fff-0000-000000000000")
			return err
		}, 404, "no message at offset 0"},
		{"absent transactionId", func() error {
			_, err := r.client.GetTransaction(ctx, r.queue, "p", "never")
			return err
		}, 404, "not stored"},
	}
	for _, c := range cases {
		var werr *queengate.Error
		if err := c.call(); !errors.As(err, &werr) || werr.Code != c.code || !strings.Contains(werr.Text, c.says) {
			t.Errorf("%s: %v, want %d saying %q", c.name, err, c.code, c.says)
		}
	}
	// Nothing was created by the reads.
	q, err := r.client.Queue(ctx, r.queue)
	if err != nil || len(q.Partitions) != 1 {
		t.Errorf("partitions after the bad reads: %+v, %v; want p alone", q.Partitions, err)
	}
}

// TestExplainAgreesWithTheNextPush: over random histories — pushes of a
// small pool of ids, the window moving past some of them, the window
// turned off and on — explain's verdict and original are what the very
// next push of that id answers.
func TestExplainAgreesWithTheNextPush(t *testing.T) {
	t.Parallel()
	r := startGateway(t, "")
	ctx := t.Context()
	store := pgtest.Store(t, pgtest.SharedURL(t))
	rng := rand.New(rand.NewPCG(7, 7))
	setWindow := func(seconds int) {
		if _, err := r.client.Configure(ctx, queengate.ConfigureRequest{Queue: r.queue, Options: map[string]int64{"dedupWindowSeconds": int64(seconds)}}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := r.client.Push(ctx, r.queue, "p", msg("seed", `0`)); err != nil {
		t.Fatal(err)
	}
	for step := range 300 {
		id := fmt.Sprint("e-", rng.IntN(12))
		switch rng.IntN(20) {
		case 0: // the window moves past everything stored so far
			pgtest.AgeFrames(t, store.Pool(), 3*time.Hour,
				"partition_id IN (SELECT p.id FROM queen.log_partitions p JOIN queen.queues q ON q.id = p.queue_id WHERE q.name = $1)",
				r.queue)
			continue
		case 1:
			setWindow(0)
		case 2:
			setWindow(3600)
		}
		ex, err := r.client.Explain(ctx, r.queue, "p", id)
		if err != nil {
			t.Fatal(err)
		}
		ans, err := r.client.Push(ctx, r.queue, "p", msg(id, fmt.Sprint(step)))
		if err != nil {
			t.Fatal(err)
		}
		a := ans[0]
		switch {
		case ex.Verdict == "duplicate" && (a.Status != queengate.StatusDuplicate || a.Offset != ex.Original.Offset || a.MessageID != ex.Original.MessageID):
			t.Fatalf("step %d: explain said duplicate of %+v, the push answered %+v", step, ex.Original, a)
		case ex.Verdict == "new" && a.Status != queengate.StatusQueued:
			t.Fatalf("step %d: explain said new (%s), the push answered %+v", step, ex.Explanation, a)
		case ex.Explanation == "" || ex.Cache.Path == "":
			t.Fatalf("step %d: explain without a reason: %+v", step, ex)
		}
	}
}

// TestDataIsReadBackByteForByte: data is stored as the producer sent it,
// spacing and key order included.
func TestDataIsReadBackByteForByte(t *testing.T) {
	t.Parallel()
	r := startGateway(t, "")
	nc := r.clientConn(t)
	const data = `{ "b" : 1,  "a" : [ 2 , "\u00e9" ] }`
	if _, err := nc.Request("queen.push."+r.queue+".p", []byte(`{"transactionId":"raw","data":`+data+`}`), 10*time.Second); err != nil {
		t.Fatal(err)
	}
	got, err := r.client.GetTransaction(t.Context(), r.queue, "p", "raw")
	if err != nil || string(got.Data) != data {
		t.Errorf("read back %q, %v; pushed %q", got.Data, err, data)
	}
}
