package main

import (
	"context"
	"fmt"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/queengate/queengate/internal/checkfor"
	"github.com/queengate/queengate/internal/pgtest"
	"github.com/queengate/queengate/model"
)

// TestKilledMidFireLosesNoTimerAndFiresNoneTwice: the daemon is killed
// with SIGKILL while its fire loop works through a backlog, three times;
// a fresh daemon finishes. Every timer fired exactly once: a fire is one
// transaction, so a kill can only roll it back.
func TestKilledMidFireLosesNoTimerAndFiresNoneTwice(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pgURL := pgtest.NewDB(t)
	store := pgtest.Store(t, pgURL)
	const n = 60_000
	var pids []int64
	for i := range 4 {
		p, err := store.EnsurePartition(ctx, "kill-timers", fmt.Sprint("p", i))
		if err != nil {
			t.Fatal(err)
		}
		pids = append(pids, p.ID)
	}
	due := time.Now().Add(-time.Second)
	rows := make([][]any, n)
	for i := range rows {
		id := fmt.Sprint("k-", i)
		h := model.HashTxnID(id)
		data := fmt.Sprintf(`{"i":%d}`, i)
		rows[i] = []any{pids[i%len(pids)], due, id, h, data, len(data)}
	}
	if _, err := store.Pool().CopyFrom(ctx, pgx.Identifier{"queen", "timers"},
		[]string{"partition_id", "fire_at", "txn_id", "hash", "data", "data_bytes"}, pgx.CopyFromRows(rows)); err != nil {
		t.Fatal(err)
	}
	pending := func() int64 {
		t.Helper()
		c, err := store.PendingTimers(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return c
	}

	for kill := range 3 {
		before := pending()
		if before == 0 {
			t.Fatalf("kill %d: the backlog is gone before the kill; make it larger", kill)
		}
		// Not waiting for "serving": the fire loop starts before the
		// gateway, and the kill must land mid-backlog.
		d := launchDaemon(t, "", "QUEEN_PG_URL="+pgURL)
		checkfor.Check(t, time.Minute, checkfor.Cond("the daemon to fire some timers", func() bool { return pending() != before }))
		_ = d.cmd.Process.Signal(syscall.SIGKILL)
		<-d.exited
		t.Logf("kill %d: %d pending before, %d after", kill, before, pending())
	}
	d := startDaemon(t, "", "QUEEN_PG_URL="+pgURL)
	checkfor.Check(t, 2*time.Minute, func() error {
		if n := pending(); n > 0 {
			return fmt.Errorf("%d timers still pending", n)
		}
		return nil
	})
	_ = d.cmd.Process.Signal(syscall.SIGTERM)
	<-d.exited

	var stored, distinct, wrongData int
	if err := store.Pool().QueryRow(ctx, `
		SELECT count(*), count(DISTINCT x.id), count(*) FILTER (WHERE x.d::text <> format('{"i":%s}', substr(x.id, 3)))
		  FROM queen.log_segments s, unnest(s.txn_ids, s.data) AS x(id, d)
		 WHERE s.partition_id = ANY ($1)`, pids).Scan(&stored, &distinct, &wrongData); err != nil {
		t.Fatal(err)
	}
	if stored != n || distinct != n || wrongData != 0 {
		t.Errorf("%d messages stored, %d distinct, %d with the wrong data; want %d, %d, 0", stored, distinct, wrongData, n, n)
	}
}
