package target

import (
	"context"
	"strings"
	"testing"

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
