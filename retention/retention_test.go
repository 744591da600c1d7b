package retention_test

import (
	"context"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/rs/zerolog"

	"github.com/queengate/queengate/internal/pgtest"
	"github.com/queengate/queengate/model"
	"github.com/queengate/queengate/retention"
)

func TestMain(m *testing.M) { pgtest.Run(m) }

// TestRetentionRunnerPurgesAndCounts: the runner drives pgstore's
// pass and exports what it did; a retry after the purge is still exact.
func TestRetentionRunnerPurgesAndCounts(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	store := pgtest.Store(t, pgtest.NewDB(t))
	queue := pgtest.UniqueName(t)
	window := 60
	if _, _, err := store.Configure(ctx, queue, model.OptionsPatch{DedupWindowSeconds: &window}, false); err != nil {
		t.Fatal(err)
	}
	p, err := store.EnsurePartition(ctx, queue, "p")
	if err != nil {
		t.Fatal(err)
	}
	push := func(id string) model.FrameResult {
		t.Helper()
		res, err := store.Push(ctx, []model.Frame{{PartitionID: p.ID, Verified: -1, TxnIDs: []string{id},
			Hashes: []model.Hash{model.HashTxnID(id)}, Data: [][]byte{[]byte("1")}}})
		if err != nil {
			t.Fatal(err)
		}
		return res[0]
	}
	push("expired")
	push("kept")
	pgtest.AgeFrames(t, store.Pool(), 10*time.Minute, "partition_id = $1 AND end_offset = 0", p.ID)
	reg := prometheus.NewRegistry()
	opts := model.DefaultRetainOptions()
	r, err := retention.NewRunner(store, time.Hour, opts, zerolog.Nop(), reg)
	if err != nil {
		t.Fatal(err)
	}
	r.Pass(ctx)
	if n, err := testutil.GatherAndCount(reg, "queengate_retention_passes_total"); err != nil || n != 1 {
		t.Errorf("passes series: %d, %v", n, err)
	}
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var deleted float64
	for _, mf := range mfs {
		if mf.GetName() == "queengate_retention_deleted_rows_total" {
			for _, m := range mf.GetMetric() {
				if m.GetLabel()[0].GetValue() == "log_txns" {
					deleted = m.GetCounter().GetValue()
				}
			}
		}
	}
	if deleted != 1 {
		t.Errorf("frames whose transactionIds were retired = %v, want 1", deleted)
	}
	if res := push("expired"); res.Outcomes[0].Duplicate {
		t.Error("a retry of a purged id past the window is a duplicate")
	}
	if res := push("kept"); !res.Outcomes[0].Duplicate || res.Outcomes[0].Offset != 1 {
		t.Errorf("a retry inside the window after the purge: %+v, want duplicate of offset 1", res.Outcomes[0])
	}
}
