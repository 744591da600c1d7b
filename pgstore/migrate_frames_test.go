package pgstore_test

import (
	"context"
	"embed"
	"fmt"
	"path"
	"slices"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/queengate/queengate/internal/pgtest"
	"github.com/queengate/queengate/model"
	"github.com/queengate/queengate/pgstore"
)

// previousRoutines are the routines of the release before migration 020
// (routines version 11) that wrote what this build reads differently: a
// frame's hashes in log_txns beside its log_segments row, purges and
// retention deleting one table's rows at a time.
//
//go:embed testdata/routines-v11/*.sql
var previousRoutines embed.FS

// previousReleaseDB is a database at the schema of the release before
// migration 020, with that release's writers installed: what an upgrade
// finds. Migrate brings it to this build's schema and routines.
func previousReleaseDB(t *testing.T) string {
	t.Helper()
	url := pgtest.NewDB(t)
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	exec := func(sql string, args ...any) {
		t.Helper()
		if _, err := conn.Exec(ctx, sql, args...); err != nil {
			t.Fatalf("%.60s: %v", sql, err)
		}
	}
	exec("DROP SCHEMA queen CASCADE")
	if _, err := pgstore.MigrateSchemaTo(ctx, conn, 19); err != nil {
		t.Fatal(err)
	}
	// The columns this build reads beside every message (migration 22,
	// which adds them only where they are missing): the release before
	// them kept none, so they stay NULL as its rows would.
	exec("ALTER TABLE queen.log_segments ADD COLUMN meta text[]")
	exec("ALTER TABLE queen.timers ADD COLUMN meta text")
	routines, err := pgstore.Routines()
	if err != nil {
		t.Fatal(err)
	}
	// This build's routines where they did not change, the previous
	// release's where they did; queen.routines stays empty, so Migrate
	// installs this build's.
	exec("SET check_function_bodies = off")
	for _, r := range routines {
		exec(r.SQL)
	}
	old, err := previousRoutines.ReadDir("testdata/routines-v11")
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range old {
		sql, err := previousRoutines.ReadFile(path.Join("testdata/routines-v11", e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		exec(string(sql))
	}
	return url
}

// TestMigratingToOneRowPerFrameChangesNoAnswer fills a database the way
// the previous release did (frames kept whole, a purged prefix whose
// transactionIds still count, a prefix retention retired, a lease
// running, data hashes of a queue that compares payloads), migrates it
// in place, and finds every read, lookup, verdict, data hash and ack
// by transactionId what the previous release answered; then pushes,
// purges and retention after the migration move the new frames' hashes
// as they should, beside the old ones.
func TestMigratingToOneRowPerFrameChangesNoAnswer(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	url := previousReleaseDB(t)
	st := pgtest.Store(t, url)
	queue := pgtest.UniqueName(t)
	part := func(name string) *testBundle {
		t.Helper()
		p, err := st.EnsurePartition(ctx, queue, name)
		if err != nil {
			t.Fatal(err)
		}
		return &testBundle{store: st, queue: queue, part: p}
	}
	kept, purged, aged := part("kept"), part("purged"), part("aged")
	kept.setWindow(t, 3600)
	kept.push(t, -1, "k0", "k1", "k2")
	kept.push(t, -1, "k3")
	kept.push(t, -1, "k4", "k5")
	purged.push(t, -1, "u0", "u1")
	purged.push(t, -1, "u2")
	if _, err := st.PurgeQueue(ctx, queue, "purged"); err != nil {
		t.Fatal(err)
	}
	purged.push(t, -1, "u3")
	aged.push(t, -1, "a0")
	aged.push(t, -1, "a1")
	pgtest.AgeFrames(t, st.Pool(), 2*time.Hour, "partition_id = $1 AND base_offset = 0", aged.part.ID)
	if _, err := st.Retain(ctx, retainOpts(0)); err != nil {
		t.Fatal(err)
	}
	comparing := setupIn(t, url)
	comparing.setOnConflict(t, model.ConflictFlag)
	if _, err := st.Push(ctx, []model.Frame{withData(newFrame(comparing.part.ID, -1, "c0", "c1"), `"A"`, `"B"`)}); err != nil {
		t.Fatal(err)
	}
	wantHashes := comparing.originals(t, 0, 1)
	cb := &consumerBundle{testBundle: kept, group: kept.group(t, "g")}
	lease := cb.pop(t, cb.group, 2) // k0 and k1, acknowledged after the migration

	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	if applied, err := pgstore.Migrate(ctx, conn); err != nil || !slices.Contains(applied, 20) {
		t.Fatalf("migrate: applied %v, %v; want 20 among them", applied, err)
	}

	// Reads: every message still stored, as stored.
	wantRead(t, st, queue, "kept", 0, "k0", "k1", "k2", "k3", "k4", "k5")
	wantRead(t, st, queue, "purged", 3, "u3")
	wantRead(t, st, queue, "aged", 0, "a0", "a1")

	// Lookups: what counts in the window, and whether the message is kept.
	for _, c := range []struct {
		partition, id   string
		found, retained bool
		offset          int64
	}{
		{"kept", "k0", true, true, 0}, {"kept", "k5", true, true, 5},
		{"purged", "u0", true, false, 0}, {"purged", "u2", true, false, 2}, {"purged", "u3", true, true, 3},
		{"aged", "a0", false, false, 0}, {"aged", "a1", true, true, 1},
	} {
		l, err := st.FindTxn(ctx, queue, c.partition, c.id)
		if err != nil || l.Found != c.found || (c.found && (l.Offset != c.offset || l.Retained != c.retained)) {
			t.Errorf("%s/%s after the migration: %+v, %v; want found %v at %d, retained %v",
				c.partition, c.id, l, err, c.found, c.offset, c.retained)
		}
	}

	// Verdicts: a full probe, and a candidate the cache names in a frame
	// stored before the migration.
	wantOutcomes(t, kept.push(t, -1, "k5", "k0", "new-k"), dup(5), dup(0), queued(6))
	r, err := st.Push(ctx, []model.Frame{narrowed(kept.part.ID, 6, []model.Candidate{{Index: 0, Offset: 3}}, "k3")})
	if err != nil {
		t.Fatal(err)
	}
	wantOutcomes(t, r[0], dup(3))
	if r[0].Probe != model.ProbeNarrowed {
		t.Errorf("a vouched push naming a candidate in an old frame: probe %v, want narrowed", r[0].Probe)
	}
	wantOutcomes(t, purged.push(t, -1, "u1", "u3"), dup(1), dup(3))
	wantOutcomes(t, aged.push(t, -1, "a0", "a1"), queued(2), dup(1))

	// Hydration sees the old frames and the new ones alike.
	h, err := st.Hydrate(ctx, kept.part.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got := rangesOf(h); got != "0-2 3-3 4-5 6-6" {
		t.Errorf("hydrated frames %s, want 0-2 3-3 4-5 6-6", got)
	}

	// The data hashes stored before the migration still answer.
	if got := comparing.originals(t, 0, 1); got[0] != wantHashes[0] || got[1] != wantHashes[1] || len(got) != 2 {
		t.Errorf("data hashes after the migration %v, want %v", got, wantHashes)
	}

	// The lease from before the migration is acknowledged by
	// transactionId.
	if a := cb.ack(t, lease.LeaseID, done("k0"), done("k1")); a.NextOffset != 2 || results(a)[0] != model.AckAcked || results(a)[1] != model.AckAcked {
		t.Errorf("ack by transactionId of a lease from before the migration: %+v", a)
	}

	// After the migration: the new frames' hashes are beside their data,
	// a purge moves them, and both kinds still count.
	purged.push(t, -1, "u5")
	if _, err := st.PurgeQueue(ctx, queue, "purged"); err != nil {
		t.Fatal(err)
	}
	wantOutcomes(t, purged.push(t, -1, "u0", "u3", "u5", "u6"), dup(0), dup(3), dup(4), queued(5))
	if l, err := st.FindTxn(ctx, queue, "purged", "u5"); err != nil || !l.Found || l.Offset != 4 || l.Retained {
		t.Errorf("u5 purged after the migration: %+v, %v; want found at 4, not retained", l, err)
	}

	// Retention retires old and new frames' transactionIds alike, once
	// no group holds them.
	if _, err := st.DeleteGroup(ctx, queue, "g"); err != nil {
		t.Fatal(err)
	}
	pgtest.AgeFrames(t, st.Pool(), 2*time.Hour, "partition_id = $1", kept.part.ID)
	if _, err := st.Retain(ctx, retainOpts(0)); err != nil {
		t.Fatal(err)
	}
	wantOutcomes(t, kept.push(t, -1, "k0", "new-k"), queued(7), queued(8))
	if n := kept.hashFrames(t); n != 1 {
		t.Errorf("%d frames of kept with hashes after retention, want 1 (the last push)", n)
	}
	var left int
	if err := st.Pool().QueryRow(ctx, "SELECT count(*) FROM queen.log_txns WHERE partition_id = $1", kept.part.ID).Scan(&left); err != nil || left != 0 {
		t.Errorf("%d log_txns rows of kept left after retention, %v; want none", left, err)
	}
}

// wantRead reads partition of queue from 0 and wants the messages of ids
// from offset first on, in order, each with its data as pushed.
func wantRead(t *testing.T, st *pgstore.Store, queue, partition string, first int64, ids ...string) {
	t.Helper()
	r, err := st.Read(context.Background(), model.ReadQuery{Queue: queue, Partition: partition, From: 0, Max: 100, MaxBytes: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, m := range r.Messages {
		got = append(got, fmt.Sprintf("%d:%s", m.Offset, m.TxnID))
	}
	var want []string
	for i, id := range ids {
		want = append(want, fmt.Sprintf("%d:%s", first+int64(i), id))
	}
	if !slices.Equal(got, want) {
		t.Errorf("read %s: %v, want %v", partition, got, want)
	}
}

// rangesOf lists a hydration's frames as base-end.
func rangesOf(h model.Hydration) string {
	var s string
	for i, r := range h.Txns {
		if i > 0 {
			s += " "
		}
		s += fmt.Sprintf("%d-%d", r.BaseOffset, r.EndOffset)
	}
	return s
}
