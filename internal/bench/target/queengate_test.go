package target

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/queengate/queengate/internal/pgtest"
	"github.com/queengate/queengate/model"
)

func TestParseAnswers(t *testing.T) {
	t.Parallel()
	ids, s, err := parseAnswers([]byte(`[{"index":0,"transactionId":"a-1","status":"queued","partitionId":1,"messageId":"x","offset":0},` +
		`{"index":1,"transactionId":"a-2","status":"duplicate"},{"index":2,"transactionId":"a-3","status":"failed","error":"down"}]`))
	if err != nil || strings.Join(ids, ",") != "a-1,a-2,a-3" || len(s) != 3 || s[0] != model.StatusQueued || s[1] != model.StatusDuplicate || s[2] != model.StatusFailed {
		t.Errorf("parseAnswers = %v %v %v", ids, s, err)
	}
	if _, _, err := parseAnswers([]byte(`{"error":{"code":503,"message":"overloaded"}}`)); err == nil {
		t.Error("an error body parsed as answers")
	}
}

// TestAGatewayWithoutMetricsDoesNotEndTheRun: a gateway whose /metrics
// never answered (killed before its first scrape) is left out of the
// figures; one that answered before keeps its last figures.
func TestAGatewayWithoutMetricsDoesNotEndTheRun(t *testing.T) {
	t.Parallel()
	tg := &Queengate{lastScrape: map[string]map[string]float64{}, missingMetrics: map[string]bool{}}
	gone := "127.0.0.1:1" // nothing listens there
	m, err := tg.scrape(context.Background(), gone)
	if err != nil || len(m) != 0 {
		t.Errorf("scrape of a gateway that never answered: %v, %v; want no figures and no error", m, err)
	}
	tg.lastScrape[gone] = map[string]float64{"process_cpu_seconds_total": 2}
	if m, err := tg.scrape(context.Background(), gone); err != nil || m["process_cpu_seconds_total"] != 2 {
		t.Errorf("scrape of a gateway gone since: %v, %v; want its last figures", m, err)
	}
}

// TestStoredLogIsWhatTheLogGrewBy: the stored bytes per message are the
// log's tables' growth over the messages stored since the mark, at least
// the data itself, and unknown when nothing was stored.
func TestStoredLogIsWhatTheLogGrewBy(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	url := pgtest.NewDB(t)
	st := pgtest.Store(t, url)
	pool, err := pgxpool.New(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	p, err := st.EnsurePartition(ctx, "stored", "p")
	if err != nil {
		t.Fatal(err)
	}
	mark, err := MeasureStoredLog(ctx, pool)
	if err != nil {
		t.Fatal(err)
	}
	if got := mark.BytesPerMessage(mark); got != -1 {
		t.Errorf("nothing stored: %v bytes a message, want -1 (unknown)", got)
	}
	data := []byte(`"` + strings.Repeat("x", 98) + `"`) // 100 bytes of JSON
	for f := range 200 {
		fr := model.Frame{PartitionID: p.ID, Verified: -1}
		for i := range 10 {
			id := fmt.Sprintf("m-%d-%d", f, i)
			fr.TxnIDs, fr.Hashes, fr.Data = append(fr.TxnIDs, id), append(fr.Hashes, model.HashTxnID(id)), append(fr.Data, data)
		}
		if _, err := st.Push(ctx, []model.Frame{fr}); err != nil {
			t.Fatal(err)
		}
	}
	after, err := MeasureStoredLog(ctx, pool)
	if err != nil {
		t.Fatal(err)
	}
	if after.Messages-mark.Messages != 2000 {
		t.Errorf("%d messages stored since the mark, want 2000", after.Messages-mark.Messages)
	}
	t.Logf("%.1f bytes a stored 100-byte message in 10-message frames", after.BytesPerMessage(mark))
	if got := after.BytesPerMessage(mark); got < float64(len(data)) {
		t.Errorf("%.1f bytes a stored 100-byte message: less than its data", got)
	}
}
