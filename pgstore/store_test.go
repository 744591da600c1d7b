package pgstore_test

import (
	"context"
	"encoding/hex"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/queengate/queengate/internal/pgtest"
	"github.com/queengate/queengate/model"
	"github.com/queengate/queengate/pgstore"
)

func TestHashTxnIDIsBigEndianXXH3_128(t *testing.T) {
	t.Parallel()
	// XXH3_128("") from the xxHash reference: high 0x99aa06d3014798d8,
	// low 0x6001c324468d497f; stored high half first.
	got := model.HashTxnID("")
	if want := "99aa06d3014798d86001c324468d497f"; hex.EncodeToString(got[:]) != want {
		t.Errorf("HashTxnID(\"\") = %x, want %s", got, want)
	}
	if model.HashTxnID("a") == model.HashTxnID("b") {
		t.Error("distinct ids hash alike")
	}
}

func TestSQLStoresTheBrokersHashBytes(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.push(t, -1, "order-9137-paid")
	var stored string
	if err := b.store.Pool().QueryRow(context.Background(),
		"SELECT replace(hashes[1]::text, '-', '') FROM queen.log_segments WHERE partition_id = $1",
		b.part.ID).Scan(&stored); err != nil {
		t.Fatal(err)
	}
	h := model.HashTxnID("order-9137-paid")
	if stored != hex.EncodeToString(h[:]) {
		t.Errorf("SQL holds %s, broker computes %x", stored, h)
	}
}

func TestMessageIDRoundTripsAndIsStable(t *testing.T) {
	t.Parallel()
	cases := [][2]int64{{7, 41}, {0, 0}, {1, 1 << 50}, {1<<62 + 3, 1<<62 + 5}}
	seen := map[string]bool{}
	for _, c := range cases {
		id := model.MessageID(c[0], c[1])
		if id != model.MessageID(c[0], c[1]) {
			t.Errorf("MessageID(%d, %d) is not stable", c[0], c[1])
		}
		if seen[id] {
			t.Errorf("MessageID(%d, %d) = %s collides", c[0], c[1], id)
		}
		seen[id] = true
		p, o, err := model.ParseMessageID(id)
		if err != nil || p != c[0] || o != c[1] {
			t.Errorf("ParseMessageID(%s) = %d, %d, %v; want %d, %d", id, p, o, err, c[0], c[1])
		}
	}
	if id := model.MessageID(7, 41); id != "00000000-0000-0007-0000-000000000029" {
		t.Errorf("MessageID(7, 41) = %s", id)
	}
	for _, bad := range []string{"", "x", strings.Repeat("g", 36), "00000000-0000-0007-0000_000000000029"} {
		if _, _, err := model.ParseMessageID(bad); err == nil {
			t.Errorf("ParseMessageID(%q) accepted", bad)
		}
	}
}

func TestEnsurePartitionRacesCreateOneRow(t *testing.T) {
	t.Parallel()
	st := pgtest.Store(t, pgtest.SharedURL(t))
	queue := pgtest.UniqueName(t)
	ctx := context.Background()
	var wg sync.WaitGroup
	ids := make([]int64, 24)
	for i := range ids {
		wg.Go(func() {
			p, err := st.EnsurePartition(ctx, queue, fmt.Sprintf("p%d", i%3))
			if err != nil {
				t.Error(err)
				return
			}
			if p.WindowSeconds != 3600 || p.LastOffset != -1 {
				t.Errorf("new partition: window %d last %d, want defaults 3600 and -1", p.WindowSeconds, p.LastOffset)
			}
			ids[i] = p.ID
		})
	}
	wg.Wait()
	for i := range ids {
		if ids[i] != ids[i%3] {
			t.Errorf("racers for p%d got ids %d and %d", i%3, ids[i], ids[i%3])
		}
	}
	var queues, parts int
	if err := st.Pool().QueryRow(ctx, `
		SELECT count(DISTINCT q.id), count(p.id) FROM queen.queues q
		JOIN queen.log_partitions p ON p.queue_id = q.id WHERE q.name = $1`, queue).Scan(&queues, &parts); err != nil {
		t.Fatal(err)
	}
	if queues != 1 || parts != 3 {
		t.Errorf("%d queue rows and %d partitions, want 1 and 3", queues, parts)
	}
	cfg, err := st.QueueConfig(ctx, queue)
	if err != nil || cfg.DedupWindowSeconds != 3600 || cfg.Name != queue {
		t.Errorf("QueueConfig = %+v, %v", cfg, err)
	}
	if _, err := st.QueueConfig(ctx, queue+"-missing"); err == nil {
		t.Error("QueueConfig of a missing queue succeeded")
	}
}

// TestEnsurePartitionsRacesCreateEachOnce has callers ensure overlapping
// sets of partitions (some existing, some new, over two queues, listed in
// different orders) at once: every caller gets the same id for a
// partition, each new partition is reported created to exactly one of
// them, never one that existed, and nobody deadlocks.
func TestEnsurePartitionsRacesCreateEachOnce(t *testing.T) {
	t.Parallel()
	st := pgtest.Store(t, pgtest.SharedURL(t))
	ctx := context.Background()
	qa, qb := pgtest.UniqueName(t), pgtest.UniqueName(t)+"-b"
	old, err := st.EnsurePartition(ctx, qa, "old")
	if err != nil {
		t.Fatal(err)
	}
	type key struct{ queue, name string }
	var keys []key
	for i := range 40 {
		keys = append(keys, key{[]string{qa, qb}[i%2], fmt.Sprintf("p%d", i)})
	}
	keys = append(keys, key{qa, "old"})
	const callers = 8
	ids := make([]map[key]int64, callers)
	created := make([]map[key]bool, callers)
	var wg sync.WaitGroup
	for c := range callers {
		wg.Go(func() {
			// Each caller lists its own overlapping share in its own order.
			var queues, names []string
			var mine []key
			for k := range keys {
				i := (k*7 + c*13) % len(keys)
				if (i+c)%3 != 0 || keys[i].name == "old" {
					queues, names = append(queues, keys[i].queue), append(names, keys[i].name)
					mine = append(mine, keys[i])
				}
			}
			parts, made, err := st.EnsurePartitions(ctx, queues, names)
			if err != nil {
				t.Error(err)
				return
			}
			ids[c], created[c] = map[key]int64{}, map[key]bool{}
			for i, k := range mine {
				if parts[i].ID == 0 || parts[i].WindowSeconds != 3600 || parts[i].LastOffset != -1 || parts[i].OnConflict == "" {
					t.Errorf("caller %d, %v: %+v", c, k, parts[i])
				}
				ids[c][k], created[c][k] = parts[i].ID, made[i]
			}
		})
	}
	wg.Wait()
	if t.Failed() {
		return
	}
	for _, k := range keys {
		var id int64
		creators := 0
		for c := range callers {
			got, listed := ids[c][k]
			if !listed {
				continue
			}
			if id != 0 && got != id {
				t.Errorf("%v: ids %d and %d", k, id, got)
			}
			id = got
			if created[c][k] {
				creators++
			}
		}
		switch {
		case k.name == "old" && (id != old.ID || creators != 0):
			t.Errorf("the existing partition: id %d (want %d), reported created %d times", id, old.ID, creators)
		case k.name != "old" && id != 0 && creators != 1:
			t.Errorf("%v reported created %d times, want exactly once", k, creators)
		}
	}
	var parts int
	if err := st.Pool().QueryRow(ctx, `
		SELECT count(*) FROM queen.log_partitions p JOIN queen.queues q ON q.id = p.queue_id
		 WHERE q.name IN ($1, $2)`, qa, qb).Scan(&parts); err != nil {
		t.Fatal(err)
	}
	if parts != len(keys) {
		t.Errorf("%d partition rows, want %d", parts, len(keys))
	}
}

// TestEnsurePartitionsLeavesOutOnlyRefusedNames: a name the schema
// refuses fails alone; the others of the same call are ensured.
func TestEnsurePartitionsLeavesOutOnlyRefusedNames(t *testing.T) {
	t.Parallel()
	st := pgtest.Store(t, pgtest.SharedURL(t))
	q := pgtest.UniqueName(t)
	parts, created, err := st.EnsurePartitions(context.Background(),
		[]string{q, q, "bad queue", q}, []string{"a", "has space", "b", "a"})
	if err != nil {
		t.Fatal(err)
	}
	if parts[0].ID == 0 || parts[3].ID != parts[0].ID || parts[1].ID != 0 || parts[2].ID != 0 {
		t.Fatalf("ids %d %d %d %d: want a twice (the same) and the refused names 0", parts[0].ID, parts[1].ID, parts[2].ID, parts[3].ID)
	}
	if !created[0] || !created[3] || created[1] || created[2] {
		t.Errorf("created = %v, want a (listed twice) only", created)
	}
	again, created, err := st.EnsurePartitions(context.Background(), []string{q}, []string{"a"})
	if err != nil || again[0] != parts[0] || created[0] {
		t.Errorf("ensuring a again: %+v created %v, %v; want %+v, not created", again[0], created[0], err, parts[0])
	}
}

func TestSchemaRejectsBadNames(t *testing.T) {
	t.Parallel()
	st := pgtest.Store(t, pgtest.SharedURL(t))
	for _, name := range []string{"", "a.b", "has space", "wild*", strings.Repeat("x", 129)} {
		if _, err := st.EnsurePartition(context.Background(), name, "Default"); err == nil {
			t.Errorf("queue name %q accepted", name)
		}
	}
}

func TestMigrateIsIdempotentAndSerialized(t *testing.T) {
	t.Parallel()
	url := pgtest.NewDB(t)
	ctx := context.Background()
	// The template is already migrated: a rerun applies nothing.
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	applied, err := pgstore.Migrate(ctx, conn)
	if err != nil || len(applied) != 0 {
		t.Fatalf("second Migrate applied %v, %v; want nothing", applied, err)
	}
	v, err := pgstore.SchemaVersion(ctx, conn)
	if err != nil || v != pgstore.LatestVersion() || v < 2 {
		t.Errorf("schema version %d, %v; want %d", v, err, pgstore.LatestVersion())
	}

	// From scratch, many gateways starting at once apply each migration
	// exactly once.
	if _, err := conn.Exec(ctx, "DROP SCHEMA queen CASCADE"); err != nil {
		t.Fatal(err)
	}
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		total []int
	)
	for range 6 {
		wg.Go(func() {
			c, err := pgx.Connect(ctx, url)
			if err != nil {
				t.Error(err)
				return
			}
			defer c.Close(ctx)
			applied, err := pgstore.Migrate(ctx, c)
			if err != nil {
				t.Error(err)
				return
			}
			mu.Lock()
			total = append(total, applied...)
			mu.Unlock()
		})
	}
	wg.Wait()
	if len(total) != pgstore.LatestVersion() {
		t.Errorf("concurrent migrators applied %v, want each of 1..%d once", total, pgstore.LatestVersion())
	}
	var rows int
	if err := conn.QueryRow(ctx, "SELECT count(*) FROM queen.migrations").Scan(&rows); err != nil || rows != pgstore.LatestVersion() {
		t.Errorf("migrations table has %d rows, %v", rows, err)
	}

	// A migration applied with an earlier text that made the same tables
	// (comments reworded; 002 when it still defined the push functions,
	// which pgstore/routines now replaces) is still the same schema.
	for version, sum := range map[int]string{
		1: "1c8b8ef20bd125326313e778b7d02e6fe1aa1ad3609bc83366610006c8c941e5",
		2: "d039921ede85db616d250f1dbdef9529481b90ccb74878f2d6853c1a65db14e1",
	} {
		if _, err := conn.Exec(ctx, "UPDATE queen.migrations SET checksum = $1 WHERE version = $2", sum, version); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := pgstore.Migrate(ctx, conn); err != nil {
		t.Errorf("Migrate over superseded migration texts: %v", err)
	}

	// A database migrated with other text for an applied version is refused.
	if _, err := conn.Exec(ctx, "UPDATE queen.migrations SET checksum = 'edited' WHERE version = 1"); err != nil {
		t.Fatal(err)
	}
	if _, err := pgstore.Migrate(ctx, conn); err == nil || !strings.Contains(err.Error(), "applied with different text") {
		t.Errorf("Migrate over an edited migration: err = %v", err)
	}
}

// TestRoutinesAreTheFilesWhateverTheDatabaseHad: routines come from their
// files, re-applied over an older build's set; a routine the
// files no longer have is dropped, an edited one replaced, and a database
// newer than the build is refused.
func TestRoutinesAreTheFilesWhateverTheDatabaseHad(t *testing.T) {
	t.Parallel()
	url := pgtest.NewDB(t)
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	var sum string
	if err := conn.QueryRow(ctx, "SELECT checksum FROM queen.routines").Scan(&sum); err != nil || sum != pgstore.RoutinesChecksum() {
		t.Fatalf("recorded routines checksum %q, %v; want this build's %q", sum, err, pgstore.RoutinesChecksum())
	}
	routineNames := func() []string {
		rows, err := conn.Query(ctx, "SELECT proname FROM pg_proc WHERE pronamespace = 'queen'::regnamespace ORDER BY proname")
		if err != nil {
			t.Fatal(err)
		}
		names, err := pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil {
			t.Fatal(err)
		}
		return names
	}
	want := routineNames()
	rs, err := pgstore.Routines()
	if err != nil || len(rs) != len(want) {
		t.Fatalf("%d routine files, %d routines in the database (%v), %v", len(rs), len(want), want, err)
	}

	// An older build's set: a stray routine, an edited body, a lower
	// version. Migrate puts the files' set back.
	if _, err := conn.Exec(ctx, `
		CREATE FUNCTION queen.stray() RETURNS int LANGUAGE sql AS 'SELECT 1';
		CREATE OR REPLACE FUNCTION queen.log_unnest_hashes(hashes uuid[]) RETURNS TABLE (idx integer, h uuid)
		    LANGUAGE sql AS 'SELECT 0, NULL::uuid';
		UPDATE queen.routines SET checksum = 'older build', version = version - 1`); err != nil {
		t.Fatal(err)
	}
	if _, err := pgstore.Migrate(ctx, conn); err != nil {
		t.Fatal(err)
	}
	if got := routineNames(); strings.Join(got, ",") != strings.Join(want, ",") {
		t.Errorf("routines after Migrate: %v, want %v", got, want)
	}
	var n int
	if err := conn.QueryRow(ctx, "SELECT count(*) FROM queen.log_unnest_hashes(ARRAY[gen_random_uuid(), gen_random_uuid()])").Scan(&n); err != nil || n != 2 {
		t.Errorf("log_unnest_hashes after Migrate gives %d rows, %v: the edited body stayed", n, err)
	}

	if _, err := conn.Exec(ctx, "INSERT INTO queen.migrations (version, name, checksum) VALUES ($1, 'future', 'x')", pgstore.LatestVersion()+1); err != nil {
		t.Fatal(err)
	}
	if _, err := pgstore.Migrate(ctx, conn); err == nil || !strings.Contains(err.Error(), "newer than this build") {
		t.Errorf("Migrate over a newer schema: err = %v", err)
	}
}
