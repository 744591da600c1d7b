package pgstore_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/queengate/queengate/internal/checkfor"
	"github.com/queengate/queengate/internal/pgcluster"
	"github.com/queengate/queengate/internal/pgtest"
	"github.com/queengate/queengate/model"
	"github.com/queengate/queengate/pgstore"
)

// replicaSettings keep a primary and its standby small; fsync=off is
// fine, nothing here crashes.
var replicaSettings = map[string]string{"fsync": "off", "max_connections": "60", "shared_buffers": "32MB"}

// replicated is a primary with a migrated database and an asynchronous
// hot standby of it.
type replicated struct{ primary, standby *pgcluster.Cluster }

func startReplicated(ctx context.Context, t *testing.T) replicated {
	t.Helper()
	primary, standby := pgtest.MigratedPair(ctx, t, replicaSettings, "reads")
	return replicated{primary, standby}
}

// openReads opens a store on the primary whose read pool is the standby,
// waiting up to wait for its replay; its connections are named app on
// both. Commits do not wait for the WAL's flush, as in the benchmarks:
// a commit answered may be beyond what the primary has written.
func (r replicated) openReads(ctx context.Context, t *testing.T, app string, wait time.Duration) *pgstore.Store {
	t.Helper()
	s, err := pgstore.Open(ctx, r.primary.URL("postgres")+"&synchronous_commit=off&application_name="+app,
		pgstore.ReadURL(pgcluster.MultiHostURL("postgres", "standby", r.standby)+"&application_name="+app),
		pgstore.ReadWait(wait))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	return s
}

// pushIDs stores one frame of messages with transactionIds ids (data: the
// id as a JSON string) in p.
func pushIDs(t *testing.T, s *pgstore.Store, p model.Partition, ids ...string) {
	t.Helper()
	fr := model.Frame{PartitionID: p.ID, Verified: -1}
	for _, id := range ids {
		fr.TxnIDs = append(fr.TxnIDs, id)
		fr.Hashes = append(fr.Hashes, model.HashTxnID(id))
		fr.Data = append(fr.Data, fmt.Appendf(nil, "%q", id))
	}
	if _, err := s.Push(context.Background(), []model.Frame{fr}); err != nil {
		t.Fatal(err)
	}
}

func readAll(ctx context.Context, t *testing.T, s *pgstore.Store, from int64, maxMessages int) model.ReadResult {
	t.Helper()
	res, err := s.Read(ctx, model.ReadQuery{Queue: "q", Partition: "p", From: from, Max: maxMessages, MaxBytes: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	return res
}

func txnIDs(res model.ReadResult) []string {
	ids := make([]string, len(res.Messages))
	for i, m := range res.Messages {
		ids[i] = m.TxnID
	}
	return ids
}

// wantPaths fails unless each path of want has been taken as many more
// times than in before, and the others no more.
func wantPaths(t *testing.T, s *pgstore.Store, before, want map[string]float64, what string) {
	t.Helper()
	now := s.ReadPaths()
	for path, n := range now {
		if n-before[path] != want[path] {
			t.Errorf("%s: read paths went from %v to %v; want %v more", what, before, now, want)
			return
		}
	}
}

func TestReadPoolStandbyNeverAnswersShort(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	r := startReplicated(ctx, t)
	// patient waits for the standby as long as the test may take; hasty
	// barely waits, as a standby whose replay is paused never catches up.
	patient := r.openReads(ctx, t, "patient", time.Minute)
	hasty := r.openReads(ctx, t, "hasty", 20*time.Millisecond)
	p, err := patient.EnsurePartition(ctx, "q", "p")
	if err != nil {
		t.Fatal(err)
	}
	pushIDs(t, patient, p, "a0", "a1", "a2", "a3", "a4", "a5", "a6", "a7", "a8", "a9")

	// Through the read pool, what the primary has, from the standby.
	before := patient.ReadPaths()
	got := readAll(ctx, t, patient, 0, 100)
	if want := []string{"a0", "a1", "a2", "a3", "a4", "a5", "a6", "a7", "a8", "a9"}; !slices.Equal(txnIDs(got), want) || got.LastOffset != 9 {
		t.Fatalf("read %v (last offset %d), want %v", txnIDs(got), got.LastOffset, want)
	}
	if now := patient.ReadPaths(); now["standby"]+now["standby_after_wait"]-before["standby"]-before["standby_after_wait"] != 1 {
		t.Fatalf("read paths went from %v to %v: want one read answered by the standby", before, now)
	}

	// Replay paused, the standby lacks what the primary stores next.
	pauseReplay(ctx, t, r.standby)
	pushIDs(t, patient, p, "b10", "b11", "b12")
	behind := map[string]float64{"primary_standby_behind": 1}

	// A full page cannot be short: the standby answers it.
	before = hasty.ReadPaths()
	if got := readAll(ctx, t, hasty, 0, 5); !slices.Equal(txnIDs(got), []string{"a0", "a1", "a2", "a3", "a4"}) {
		t.Fatalf("full page %v", txnIDs(got))
	}
	wantPaths(t, hasty, before, map[string]float64{"standby": 1}, "a full page")

	// A page to the partition's end, a message by id, a transactionId:
	// the standby would answer short; the primary answers.
	before = hasty.ReadPaths()
	if got := readAll(ctx, t, hasty, 8, 100); !slices.Equal(txnIDs(got), []string{"a8", "a9", "b10", "b11", "b12"}) || got.LastOffset != 12 {
		t.Fatalf("read from 8: %v (last offset %d), want a8 … b12", txnIDs(got), got.LastOffset)
	}
	wantPaths(t, hasty, before, behind, "a read to the end")
	before = hasty.ReadPaths()
	if m, _, _, err := hasty.MessageAt(ctx, p.ID, 11); err != nil || m.TxnID != "b11" {
		t.Fatalf("message at 11: %+v, %v; want b11", m, err)
	}
	wantPaths(t, hasty, before, behind, "a message by id")
	before = hasty.ReadPaths()
	if l, err := hasty.FindTxn(ctx, "q", "p", "b12"); err != nil || !l.Found || l.Offset != 12 {
		t.Fatalf("transactionId b12: %+v, %v; want found at 12", l, err)
	}
	wantPaths(t, hasty, before, behind, "a transactionId")
	listingsNotShort(ctx, t, hasty)

	// A read that waits is answered by the standby once its replay
	// resumes and passes what the primary had.
	waitedRead(ctx, t, r, patient)
	queueMadeAgain(ctx, t, r, hasty)

	// A standby that is gone sends reads to the primary.
	r.standby.Stop()
	before = hasty.ReadPaths()
	if got := readAll(ctx, t, hasty, 0, 100); !slices.Equal(txnIDs(got), []string{"c0"}) {
		t.Fatalf("read with the standby gone: %v, want c0", txnIDs(got))
	}
	wantPaths(t, hasty, before, map[string]float64{"primary_standby_failed": 1}, "a read with the standby gone")
	exported(t, hasty)
}

// listingsNotShort checks that the listings s reads on a standby whose
// replay is paused show what the primary stored since (a group, offsets
// 10 to 12): they are read on the primary.
func listingsNotShort(ctx context.Context, t *testing.T, s *pgstore.Store) {
	t.Helper()
	g, err := s.EnsureGroup(ctx, "q", "new-group")
	if err != nil {
		t.Fatal(err)
	}
	behind := map[string]float64{"primary_standby_behind": 1}
	before := s.ReadPaths()
	if gps, err := s.GroupPartitions(ctx, g.QueueID); err != nil || len(gps) != 1 || gps[0].Group != "new-group" || gps[0].LastOffset != 12 {
		t.Fatalf("groups: %+v, %v; want new-group, last offset 12", gps, err)
	}
	wantPaths(t, s, before, behind, "a group listing")
	before = s.ReadPaths()
	if act, err := s.GroupActivity(ctx, g.QueueID); err != nil || len(act) != 1 || act[0].Group != "new-group" {
		t.Fatalf("groups' activity: %+v, %v; want new-group", act, err)
	}
	wantPaths(t, s, before, behind, "the groups' activity")
	before = s.ReadPaths()
	if parts, err := s.Partitions(ctx, g.QueueID); err != nil || len(parts) != 1 || parts[0].LastOffset != 12 {
		t.Fatalf("partitions: %+v, %v; want p, last offset 12", parts, err)
	}
	wantPaths(t, s, before, behind, "a partition listing")
	before = s.ReadPaths()
	if figures, err := s.QueueFigures(ctx); err != nil || len(figures) != 1 || figures[0].StoredMessages != 13 {
		t.Fatalf("figures: %+v, %v; want q with 13 messages", figures, err)
	}
	wantPaths(t, s, before, behind, "the figures")
}

// pauseReplay pauses the standby's replay and waits until it is paused.
func pauseReplay(ctx context.Context, t *testing.T, standby *pgcluster.Cluster) {
	t.Helper()
	execOn(ctx, t, standby, "SELECT pg_wal_replay_pause()")
	checkfor.Check(t, time.Minute, func() error {
		if state := queryText(ctx, t, standby, "SELECT pg_get_wal_replay_pause_state()"); state != "paused" {
			return errors.New("replay " + state)
		}
		return nil
	})
}

// queueMadeAgain deletes queue q and makes it again, with message c0,
// behind the standby's paused replay: a full page of q/p read on the
// standby would be the old partition's, so the primary answers it.
func queueMadeAgain(ctx context.Context, t *testing.T, r replicated, s *pgstore.Store) {
	t.Helper()
	pauseReplay(ctx, t, r.standby)
	if _, err := s.DeleteQueue(ctx, "q"); err != nil {
		t.Fatal(err)
	}
	p, err := s.EnsurePartition(ctx, "q", "p")
	if err != nil {
		t.Fatal(err)
	}
	pushIDs(t, s, p, "c0")
	before := s.ReadPaths()
	if got := readAll(ctx, t, s, 0, 1); !slices.Equal(txnIDs(got), []string{"c0"}) {
		t.Fatalf("read of q made again: %v, want c0", txnIDs(got))
	}
	wantPaths(t, s, before, map[string]float64{"primary_standby_behind": 1}, "a full page of a queue made again")
}

// waitedRead starts a read to the end on s while the standby's replay is
// paused behind it, resumes replay once the read waits (it has asked the
// primary for its position), and checks the standby answered it whole.
func waitedRead(ctx context.Context, t *testing.T, r replicated, s *pgstore.Store) {
	t.Helper()
	before := s.ReadPaths()
	since := queryText(ctx, t, r.primary, "SELECT clock_timestamp()::text")
	answered := make(chan model.ReadResult, 1)
	go func() {
		res, err := s.Read(ctx, model.ReadQuery{Queue: "q", Partition: "p", From: 9, Max: 100, MaxBytes: 1 << 20})
		if err != nil {
			t.Error(err)
		}
		answered <- res
	}()
	checkfor.Check(t, time.Minute, func() error {
		n := queryText(ctx, t, r.primary, `SELECT count(*)::text FROM pg_stat_activity WHERE application_name = 'patient'
			AND query LIKE '%pg_current_wal_insert_lsn%' AND query_start >= '`+since+`'::timestamptz`)
		if n == "0" {
			return errors.New("the read has not asked the primary for its position")
		}
		return nil
	})
	execOn(ctx, t, r.standby, "SELECT pg_wal_replay_resume()")
	if got := <-answered; !slices.Equal(txnIDs(got), []string{"a9", "b10", "b11", "b12"}) {
		t.Fatalf("waited read from 9: %v, want a9 … b12", txnIDs(got))
	}
	wantPaths(t, s, before, map[string]float64{"standby_after_wait": 1}, "a read that waited")
}

// exported checks the store's collector exports the read paths, and
// the read pool's own statistics beside the primary pool's.
func exported(t *testing.T, s *pgstore.Store) {
	t.Helper()
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(s.Collector())
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	series := map[string]int{}
	first := map[string]float64{} // a counter's or gauge's first series
	for _, f := range families {
		m := f.GetMetric()
		series[f.GetName()] = len(m)
		first[f.GetName()] = m[0].GetCounter().GetValue() + m[0].GetGauge().GetValue()
	}
	if n := series["queengate_pg_read_pool_reads_total"]; n != 4 {
		t.Errorf("queengate_pg_read_pool_reads_total has %d series, want one per path", n)
	}
	for _, name := range []string{"queengate_pg_read_pool_acquires_total", "queengate_pg_pool_acquires_total"} {
		if first[name] < 1 {
			t.Errorf("%s = %v (%d series), want the acquires the reads made", name, first[name], series[name])
		}
	}
	if first["queengate_pg_read_pool_max_connections"] < 1 {
		t.Error("queengate_pg_read_pool_max_connections is not exported")
	}
}

func execOn(ctx context.Context, t *testing.T, c *pgcluster.Cluster, sql string) {
	t.Helper()
	conn, err := pgx.Connect(ctx, c.URL("postgres"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, sql); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
}

func queryText(ctx context.Context, t *testing.T, c *pgcluster.Cluster, sql string) string {
	t.Helper()
	conn, err := pgx.Connect(ctx, c.URL("postgres"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	var out string
	if err := conn.QueryRow(ctx, sql).Scan(&out); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
	return out
}
