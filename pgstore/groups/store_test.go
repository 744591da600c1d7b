package groups_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/queengate/queengate/internal/pgtest"
	"github.com/queengate/queengate/model"
	"github.com/queengate/queengate/pgstore/groups"
	"github.com/queengate/queengate/pgstore/internal/readpool"
)

func TestMain(m *testing.M) { pgtest.Run(m) }

// TestAStoreServesGroupsOverThePoolAndLogItIsGiven: a groups.Store made
// apart from pgstore's pops what the log stored, acks it, and counts a
// message too large for its maxData as undeliverable, dead-lettering it.
func TestAStoreServesGroupsOverThePoolAndLogItIsGiven(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := pgtest.Store(t, pgtest.SharedURL(t))
	queue := pgtest.UniqueName(t)
	p, err := st.EnsurePartition(ctx, queue, "Default")
	if err != nil {
		t.Fatal(err)
	}
	small, large := []byte(`1`), []byte(`"`+strings.Repeat("x", 1000)+`"`)
	fr := model.Frame{PartitionID: p.ID, Verified: -1, TxnIDs: []string{"small", "large"},
		Hashes: []model.Hash{model.HashTxnID("small"), model.HashTxnID("large")}, Data: [][]byte{small, large}}
	if _, err := st.Push(ctx, []model.Frame{fr}); err != nil {
		t.Fatal(err)
	}
	undeliverable := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "undeliverable"}, []string{"queue", "group"})
	c := groups.New(st.Pool(), readpool.New(st.Pool(), nil, 0), st, func() int { return 1 << 20 }, undeliverable)
	g, err := c.EnsureGroup(ctx, queue, "g")
	if err != nil {
		t.Fatal(err)
	}
	r, err := c.Pop(ctx, model.PopQuery{Group: g, Max: 10, Lease: time.Minute, Consumer: "c",
		MaxBytes: 1 << 20, Room: 1 << 20, MaxDelivery: 600})
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Messages) != 1 || r.Messages[0].TxnID != "small" || r.TooLarge != 1 {
		t.Fatalf("popped %+v; want small, and large dead-lettered as never deliverable in 600 bytes", r)
	}
	if n := testutil.ToFloat64(undeliverable.WithLabelValues(queue, "g")); n != 1 {
		t.Errorf("undeliverable = %v, want 1", n)
	}
	a, err := c.Ack(ctx, g, p.ID, r.LeaseID, []model.Settlement{{Offset: r.Messages[0].Offset, Completed: true}})
	if err != nil {
		t.Fatal(err)
	}
	if len(a.Items) != 1 || a.Items[0].Result != model.AckAcked {
		t.Errorf("ack: %+v, want acked", a)
	}
}
