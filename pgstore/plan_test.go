package pgstore_test

import (
	"context"
	"fmt"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/queengate/queengate/internal/pgtest"
	"github.com/queengate/queengate/model"
	"github.com/queengate/queengate/pgstore"
)

// planLog is a store whose one connection logs the plan of every
// statement it runs, the push routine's own included (auto_explain).
type planLog struct {
	store *pgstore.Store
	mu    sync.Mutex
	plans []string
}

func openPlanLog(t *testing.T, url string) *planLog {
	t.Helper()
	return openPlanLogWith(t, url, "")
}

// openPlanLogWith is openPlanLog with more auto_explain settings (e.g.
// "SET auto_explain.log_analyze = on;"), and nested statements logged
// only when those settings say so.
func openPlanLogWith(t *testing.T, url, settings string) *planLog {
	t.Helper()
	if settings == "" {
		settings = "SET auto_explain.log_nested_statements = on;"
	}
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		t.Fatal(err)
	}
	l := &planLog{}
	cfg.MaxConns = 1 // one session: its plans, once made, are the ones reused
	cfg.ConnConfig.OnNotice = func(_ *pgconn.PgConn, n *pgconn.Notice) {
		if strings.Contains(n.Message, "plan:") {
			l.mu.Lock()
			l.plans = append(l.plans, n.Message)
			l.mu.Unlock()
		}
	}
	cfg.AfterConnect = func(ctx context.Context, conn *pgx.Conn) error {
		_, err := conn.Exec(ctx, `LOAD 'auto_explain';
			SET auto_explain.log_min_duration = 0; `+settings+`
			SET auto_explain.log_level = notice; SET client_min_messages = notice`)
		return err
	}
	st, err := pgstore.OpenConfig(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(st.Close)
	l.store = st
	return l
}

// take returns the plans logged since the last take.
func (l *planLog) take() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := l.plans
	l.plans = nil
	return out
}

// tableRead is a plan node reading log_partitions or log_txns, with the
// line after it, which names its condition when it has one.
var tableRead = regexp.MustCompile(`[A-Za-z ]*Scan[^\n]* on (log_partitions|log_txns)\b[^\n]*\n[^\n]*`)

// TestPushPlansReadByKey: every statement of the push routine reads
// log_partitions and log_txns by key, never by scanning them, whatever the
// statistics say: at 1k, 10k and 100k partitions with the statistics of
// 1k, and after the partition rows were updated many times with no
// vacuum; in a session whose plans were made at 1k and in one that
// plans at each size. Partitions are created on the way, as flushes
// create them.
func TestPushPlansReadByKey(t *testing.T) {
	url := pgtest.NewDB(t)
	ctx := context.Background()
	st := pgtest.Store(t, url)
	exec := func(sql string, args ...any) {
		t.Helper()
		if _, err := st.Pool().Exec(ctx, sql, args...); err != nil {
			t.Fatal(err)
		}
	}
	exec("ALTER TABLE queen.log_partitions SET (autovacuum_enabled = false)")
	first, err := st.EnsurePartition(ctx, "plans", "p1")
	if err != nil {
		t.Fatal(err)
	}
	grow := func(n int) {
		exec(`INSERT INTO queen.log_partitions (queue_id, name)
		      SELECT $1, 'p' || g FROM generate_series((SELECT count(*) FROM queen.log_partitions) + 1, $2::integer) AS g`,
			first.QueueID, n)
	}
	grow(1000)
	if _, err := st.EnsureGroup(ctx, "plans", "g"); err != nil {
		t.Fatal(err)
	}
	exec("ANALYZE queen.log_partitions")
	early := openPlanLog(t, url) // plans made at 1k, reused as the table grows
	rows := benchRows{prefix: "plans-"}
	for _, step := range []struct {
		name       string
		partitions int
		updates    int
	}{{"1k", 1000, 0}, {"10k", 10_000, 0}, {"100k", 100_000, 0}, {"100k bloated", 100_000, 5}} {
		grow(step.partitions)
		for range step.updates {
			exec("UPDATE queen.log_partitions SET stored_bytes = stored_bytes + 1")
		}
		for _, session := range []struct {
			name string
			log  *planLog
		}{{"planned at 1k", early}, {"planned now", openPlanLog(t, url)}} {
			log := session.log
			pushPlanShapes(t, log.store, &rows, step.partitions)
			plans := log.take()
			byKey := 0
			for _, plan := range plans {
				for _, read := range tableRead.FindAllString(plan, -1) {
					// By key: an index (or its bitmap, or a row's address)
					// with a condition; anything else reads the whole table.
					if strings.Contains(read, "Seq Scan") || !strings.Contains(read, " Cond: ") {
						t.Errorf("%s, %s: a table is scanned:\n%s\nin %s", step.name, session.name, read, plan)
					}
					byKey++
				}
			}
			// The lock, the allocator update and the range probe at least.
			if byKey < 3 {
				t.Fatalf("%s, %s: %d reads of log_partitions or log_txns in %d plans logged", step.name, session.name, byKey, len(plans))
			}
		}
	}
}

var freshPartitions atomic.Int64

// pushPlanShapes pushes bundles that take every path of the routine: a
// full probe and a narrowed one with a candidate beside frames with
// nothing to probe, then a bundle with a repeat and a stored duplicate.
func pushPlanShapes(t *testing.T, st *pgstore.Store, rows *benchRows, partitions int) {
	t.Helper()
	ctx := context.Background()
	// Partitions created, as a flush creates them (with a cursor for
	// each of the queue's groups): ensure_partitions reads by key too.
	// Six calls: PostgreSQL plans a routine's statement anew for its
	// first five, then may keep a generic plan.
	for range 6 {
		n := freshPartitions.Add(2)
		fresh := []string{fmt.Sprintf("new-%d", n-1), fmt.Sprintf("new-%d", n)}
		if _, created, err := st.EnsurePartitions(ctx, []string{"plans", "plans"}, fresh); err != nil || !created[0] || !created[1] {
			t.Fatalf("ensure partitions %v: created %v, %v", fresh, created, err)
		}
	}
	var pids []int64
	for i := range 8 {
		p, err := st.EnsurePartition(ctx, "plans", fmt.Sprintf("p%d", 1+(i*7919)%partitions))
		if err != nil {
			t.Fatal(err)
		}
		pids = append(pids, p.ID)
	}
	stored := rows.frame(pids[0], -1, 3)
	res, err := st.Push(ctx, []model.Frame{stored, rows.frame(pids[1], -1, 2)})
	if err != nil {
		t.Fatal(err)
	}
	full := rows.frame(pids[0], -1, 2)
	narrowed := rows.frame(pids[1], res[1].LastOffset, 2)
	narrowed.TxnIDs[1], narrowed.Hashes[1] = stored.TxnIDs[0], stored.Hashes[0]
	narrowed.Candidates = []model.Candidate{{Index: 1, Offset: res[0].BaseOffset}}
	bundle := []model.Frame{full, narrowed}
	for _, pid := range pids[2:] {
		bundle = append(bundle, rows.frame(pid, 1<<62, 2))
	}
	if _, err := st.Push(ctx, bundle); err != nil {
		t.Fatal(err)
	}
	repeats := rows.frame(pids[0], -1, 3)
	repeats.TxnIDs[2], repeats.Hashes[2] = repeats.TxnIDs[0], repeats.Hashes[0]
	repeats.TxnIDs[1], repeats.Hashes[1] = stored.TxnIDs[1], stored.Hashes[1]
	if _, err := st.Push(ctx, []model.Frame{repeats, rows.frame(pids[2], -1, 1)}); err != nil {
		t.Fatal(err)
	}
}
