package ingest_test

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"

	"github.com/queengate/queengate/ingest"
	"github.com/queengate/queengate/internal/checkfor"
	"github.com/queengate/queengate/internal/pgcluster"
	"github.com/queengate/queengate/internal/pgtest"
	"github.com/queengate/queengate/model"
	"github.com/queengate/queengate/pgstore"
)

// haPair is a primary with an asynchronous standby, the schema migrated,
// and url naming both (read-write: the store follows the primary).
type haPair struct {
	primary, standby *pgcluster.Cluster
	url              string
}

var haSettings = map[string]string{"fsync": "off", "max_connections": "100", "shared_buffers": "32MB"}

func startHAPair(t *testing.T) *haPair {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	primary, standby := pgtest.MigratedPair(ctx, t, haSettings, "standby")
	return &haPair{primary: primary, standby: standby, url: pgcluster.MultiHostURL("postgres", "read-write", primary, standby)}
}

// cut stops the standby receiving WAL, once it has replayed everything
// the primary wrote: the primary's WAL sender is frozen (SIGSTOP), so
// what the primary commits from now on is acknowledged and never
// reaches the standby, as with asynchronous replication behind at a
// crash. The kill -9 of the primary ends the frozen process too.
func (h *haPair) cut(t *testing.T) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := h.standby.WaitCaughtUp(ctx, h.primary); err != nil {
		t.Fatal(err)
	}
	conn, err := pgx.Connect(ctx, h.primary.URL("postgres"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	var pid int
	if err := conn.QueryRow(ctx, "SELECT pid FROM pg_stat_replication WHERE application_name = $1", h.standby.Name()).Scan(&pid); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	checkfor.Check(t, time.Minute, checkfor.Cond("the WAL sender to stop", func() bool {
		stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		_, after, found := strings.Cut(string(stat), ") ")
		return err == nil && found && strings.HasPrefix(after, "T")
	}))
}

// failover kills the primary (kill -9) and promotes the standby; the
// store follows it through the multi-host URL. It returns when the new
// primary takes writes.
func (h *haPair) failover(t *testing.T) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	h.primary.Kill()
	if err := h.standby.Promote(ctx); err != nil {
		t.Fatal(err)
	}
}

// gateway is one ingester over the store, with the lost reports it made.
type gateway struct {
	ing   *ingest.Ingester
	reg   *prometheus.Registry
	queue string
	mu    sync.Mutex
	lost  [][]string // one per report
}

// newGateway starts an ingester whose journal keeps the last journal
// acknowledgements (0: the default).
func newGateway(t *testing.T, store ingest.Store, queue string, journal int) *gateway {
	t.Helper()
	g := &gateway{queue: queue, reg: prometheus.NewRegistry()}
	cfg := ingest.Config{Journal: journal, OnLost: func(ids []string) {
		g.mu.Lock()
		defer g.mu.Unlock()
		g.lost = append(g.lost, ids)
	}}
	ing, err := ingest.New(store, cfg, zerolog.New(zerolog.NewTestWriter(t)).Level(zerolog.ErrorLevel), g.reg)
	if err != nil {
		t.Fatal(err)
	}
	if err := ing.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(ing.Stop)
	g.ing = ing
	return g
}

// push sends ids to partition in one request, again until no message is
// answered failed (a producer retrying with the same ids, as it must
// after a failover cut its connections), and returns the answers.
func (g *gateway) push(t *testing.T, partition string, ids ...string) []model.PushOutcome {
	t.Helper()
	var got []model.PushOutcome
	checkfor.Check(t, time.Minute, checkfor.Cond("every message answered stored or duplicate", func() bool {
		ch := make(chan []model.PushOutcome, 1)
		req := &ingest.Request{Queue: g.queue, Partition: partition, Done: func(r []model.PushOutcome) { ch <- r }}
		for _, id := range ids {
			req.Messages = append(req.Messages, model.Incoming{TxnID: id, Data: []byte(`{"id":"` + id + `"}`)})
		}
		if err := g.ing.Submit(req); err != nil {
			return false
		}
		got = <-ch
		return !slices.ContainsFunc(got, func(r model.PushOutcome) bool { return r.Status == model.StatusFailed })
	}))
	return got
}

// reports are the lost reports made so far.
func (g *gateway) reports() [][]string {
	g.mu.Lock()
	defer g.mu.Unlock()
	return slices.Clone(g.lost)
}

func ids(prefix string, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = prefix + "-" + string(rune('a'+i/26)) + string(rune('a'+i%26))
	}
	return out
}

// TestFailoverToAnAsyncStandbyAnswersExactly: gateway A stores ids; the
// standby has the first half only (asynchronous replication behind at the
// crash); the primary is killed and the standby promoted. Gateway B,
// which met only the new primary, stores the lost half again (a producer
// retrying through it), backwards: queued, never duplicate, at the
// offsets A had them but each at another's; then a few ids of its own. Then A, whose cache had
// learned the old primary's log, gets every id again: each is a
// duplicate of where the new primary holds it — the first half where A
// first stored it, the lost half where B did — and nothing is stored
// twice. A reports exactly the acknowledged messages the new primary
// lacks. Without the epochs, A's cache vouches for the old log and SQL
// skips the rows B wrote: the lost half is stored a second time.
func TestFailoverToAnAsyncStandbyAnswersExactly(t *testing.T) {
	t.Parallel()
	h := startHAPair(t)
	store := pgtest.Store(t, h.url)
	queue := "failover"
	a, b := newGateway(t, store, queue, 0), newGateway(t, store, queue, 0)
	small := newGateway(t, store, queue, 16) // a journal shorter than what the failover cuts
	kept, lost := ids("kept", 40), ids("lost", 40)

	first := a.push(t, "p", kept...)
	pid := first[0].PartitionID
	small.push(t, "s", ids("s-kept", 40)...)
	h.cut(t)
	second := a.push(t, "p", lost...)
	smallLost := small.push(t, "s", ids("s-lost", 40)...)
	again := a.push(t, "p", kept...) // the cache vouches: A's entry knows the old log
	for i := range kept {
		if first[i].Status != model.StatusQueued || first[i].Offset != int64(i) ||
			again[i].Status != model.StatusDuplicate || again[i].Offset != int64(i) ||
			second[i].Status != model.StatusQueued || second[i].Offset != int64(len(kept)+i) {
			t.Fatalf("before the failover, message %d: %+v, %+v, %+v", i, first[i], second[i], again[i])
		}
	}

	h.failover(t)
	promoted := time.Now()
	// Each connection to the dead primary would fail one push, whose
	// settling (a verification read of the new primary) answers as a full
	// probe would: dropped, so that A's pushes reach SQL with what its
	// cache vouches.
	store.Pool().Reset()
	backwards := slices.Clone(lost)
	slices.Reverse(backwards)
	retried := b.push(t, "p", backwards...) // at the offsets A had them, in another order
	for j, r := range retried {
		if r.Status != model.StatusQueued || r.Offset != int64(len(kept)+j) {
			t.Fatalf("B: lost message %s answered %+v, want queued at %d", backwards[j], r, len(kept)+j)
		}
	}
	b.push(t, "p", ids("b", 5)...) // the allocator past what A's cache knew
	all := append(slices.Clone(kept), lost...)
	answers := a.push(t, "p", all...)
	t.Logf("from the promotion to A's answers: %v", time.Since(promoted))
	for i, r := range answers {
		want := int64(i) // kept: where A first stored it
		if i >= len(kept) {
			want = int64(len(all) - 1 - (i - len(kept))) // lost: where B stored it again
		}
		if r.Status != model.StatusDuplicate || r.Offset != want {
			t.Errorf("A after the failover: %s answered %+v, want a duplicate of %d", all[i], r, want)
		}
	}
	checkStoredOnce(t, store, pid)

	var wantLost []string
	for i := range lost {
		wantLost = append(wantLost, model.MessageID(pid, int64(len(kept)+i)))
	}
	checkfor.Check(t, time.Minute, checkfor.Cond("A's lost report", func() bool { return len(a.reports()) > 0 }))
	if got := a.reports(); len(got) != 1 || !sameSet(got[0], wantLost) {
		t.Errorf("A reported lost %v, want exactly %v", got, wantLost)
	}
	for name, want := range map[string]float64{"queengate_store_changes_total": 1, "queengate_failover_lost_messages_total": float64(len(lost))} {
		if got := counterValue(t, a.reg, name); got != want {
			t.Errorf("A's %s = %v, want %v", name, got, want)
		}
	}
	for _, r := range b.reports() {
		if len(r) > 0 {
			t.Errorf("B, which acknowledged nothing before the failover, reported %v lost", r)
		}
	}
	checkJournalBound(t, small, smallLost)
}

// checkJournalBound: a gateway whose journal of 16 held only the last
// of the 40 acknowledgements the failover cut (after 40 it kept) reports
// those 16 lost and counts the 64 older ones unchecked, rather than
// saying nothing of them.
func checkJournalBound(t *testing.T, small *gateway, cut []model.PushOutcome) {
	t.Helper()
	small.push(t, "s", "after") // its first push on the new primary moves it there
	checkfor.Check(t, time.Minute, checkfor.Cond("the small journal's lost report", func() bool { return len(small.reports()) > 0 }))
	var want []string
	for _, r := range cut[len(cut)-16:] {
		want = append(want, model.MessageID(r.PartitionID, r.Offset))
	}
	if got := small.reports(); len(got) != 1 || !sameSet(got[0], want) {
		t.Errorf("journal of 16: reported lost %v, want the last 16 acknowledged %v", got, want)
	}
	for name, want := range map[string]float64{"queengate_failover_lost_messages_total": 16, "queengate_failover_unchecked_messages_total": 64} {
		if got := counterValue(t, small.reg, name); got != want {
			t.Errorf("journal of 16: %s = %v, want %v", name, got, want)
		}
	}
}

// checkStoredOnce fails when a transactionId is stored twice in the
// partition.
func checkStoredOnce(t *testing.T, store *pgstore.Store, pid int64) {
	t.Helper()
	rows, err := store.Pool().Query(context.Background(), `
		SELECT id, count(*) FROM queen.log_segments s CROSS JOIN LATERAL unnest(s.txn_ids) AS id
		 WHERE s.partition_id = $1 GROUP BY id HAVING count(*) > 1`, pid)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	for rows.Next() {
		var (
			id string
			n  int
		)
		if err := rows.Scan(&id, &n); err != nil {
			t.Fatal(err)
		}
		t.Errorf("%s is stored %d times", id, n)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
}

// counterValue reads the counter name of reg.
func counterValue(t *testing.T, reg *prometheus.Registry, name string) float64 {
	t.Helper()
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() == name {
			return f.GetMetric()[0].GetCounter().GetValue()
		}
	}
	t.Fatalf("no metric %s", name)
	return 0
}

func sameSet(a, b []string) bool {
	a, b = slices.Clone(a), slices.Clone(b)
	slices.Sort(a)
	slices.Sort(b)
	return slices.Equal(a, b)
}
