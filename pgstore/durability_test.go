package pgstore_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/queengate/queengate/internal/checkfor"
	"github.com/queengate/queengate/internal/pgcluster"
	"github.com/queengate/queengate/internal/pgtest"
	"github.com/queengate/queengate/pgstore"
)

// TestDurabilityLevels: the level and whether commits wait, for each
// combination of settings that decides them.
func TestDurabilityLevels(t *testing.T) {
	t.Parallel()
	sync := func(state string) []pgstore.Standby { return []pgstore.Standby{{Name: "s1", SyncState: state}} }
	for _, c := range []struct {
		name       string
		d          pgstore.Durability
		want       pgstore.DurabilityLevel
		wait, know bool
	}{
		{"fsync off", pgstore.Durability{SynchronousCommit: "remote_apply", SynchronousStandbyNames: "s1", Standbys: sync("sync")}, pgstore.DurabilityNone, false, true},
		{"commit off", pgstore.Durability{SynchronousCommit: "off", Fsync: true, SynchronousStandbyNames: "s1", Standbys: sync("sync")}, pgstore.DurabilityNone, false, true},
		{"on, no standbys named", pgstore.Durability{SynchronousCommit: "on", Fsync: true, Standbys: sync("async")}, pgstore.DurabilityLocalDisk, false, true},
		{"local with a sync standby", pgstore.Durability{SynchronousCommit: "local", Fsync: true, SynchronousStandbyNames: "s1", Standbys: sync("sync")}, pgstore.DurabilityLocalDisk, false, true},
		{"remote_write", pgstore.Durability{SynchronousCommit: "remote_write", Fsync: true, SynchronousStandbyNames: "s1", Standbys: sync("sync")}, pgstore.DurabilityStandbyWritten, false, true},
		{"on", pgstore.Durability{SynchronousCommit: "on", Fsync: true, SynchronousStandbyNames: "s1", Standbys: sync("sync")}, pgstore.DurabilityStandbyDisk, false, true},
		{"remote_apply", pgstore.Durability{SynchronousCommit: "remote_apply", Fsync: true, SynchronousStandbyNames: "s1", Standbys: sync("sync")}, pgstore.DurabilityStandbyApplied, false, true},
		{"named standby not streaming", pgstore.Durability{SynchronousCommit: "on", Fsync: true, SynchronousStandbyNames: "s1", Standbys: []pgstore.Standby{}}, pgstore.DurabilityLocalDisk, true, true},
		{"only a potential standby", pgstore.Durability{SynchronousCommit: "on", Fsync: true, SynchronousStandbyNames: "s0, s1", Standbys: sync("potential")}, pgstore.DurabilityLocalDisk, true, true},
		{"FIRST 2 with one", pgstore.Durability{SynchronousCommit: "on", Fsync: true, SynchronousStandbyNames: "FIRST 2 (s1, s2)", Standbys: sync("sync")}, pgstore.DurabilityLocalDisk, true, true},
		{"ANY 1 with one", pgstore.Durability{SynchronousCommit: "on", Fsync: true, SynchronousStandbyNames: "any 1 (s1, s2)", Standbys: sync("quorum")}, pgstore.DurabilityStandbyDisk, false, true},
		{"2 (…) with one", pgstore.Durability{SynchronousCommit: "on", Fsync: true, SynchronousStandbyNames: "2(s1, s2)", Standbys: sync("sync")}, pgstore.DurabilityLocalDisk, true, true},
		{"names that are numbers", pgstore.Durability{SynchronousCommit: "on", Fsync: true, SynchronousStandbyNames: "2, 3", Standbys: sync("sync")}, pgstore.DurabilityStandbyDisk, false, true},
		{"standbys unreadable", pgstore.Durability{SynchronousCommit: "on", Fsync: true, SynchronousStandbyNames: "s1"}, pgstore.DurabilityStandbyDisk, false, false},
	} {
		wait, know := c.d.CommitsWait()
		if got := c.d.Level(); got != c.want || wait != c.wait || know != c.know {
			t.Errorf("%s: level %s, commits wait %v (known %v); want %s, %v (%v)", c.name, got, wait, know, c.want, c.wait, c.know)
		}
		if warned := strings.Contains(c.d.Warning(), "commits wait"); warned != c.wait {
			t.Errorf("%s: warning %q; want one about waiting commits: %v", c.name, c.d.Warning(), c.wait)
		}
	}
}

// TestDurabilityOfTheTestServer: the test server runs with fsync and
// synchronous_commit off; the store says an acknowledgement survives no
// crash, and warns.
func TestDurabilityOfTheTestServer(t *testing.T) {
	t.Parallel()
	s := pgtest.Store(t, pgtest.SharedURL(t))
	d, err := s.Durability(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if d.Level() != pgstore.DurabilityNone || d.Fsync || d.InRecovery || !strings.Contains(d.Warning(), "fsync is off") {
		t.Errorf("read %+v, level %s, warning %q; want none, fsync off, a warning about fsync", d, d.Level(), d.Warning())
	}
}

// TestDurabilityFromAReplicatedServer: each level read from a real
// primary with a real standby, as its replication is changed; a URL's
// synchronous_commit counts; a role that may not see the standbys' state
// gets them unknown, not an error.
func TestDurabilityFromAReplicatedServer(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	primary := pgtest.DurablePrimary(ctx, t, "primary")
	store := pgtest.Store(t, primary.URL("postgres"))
	// The walsenders and sessions take a reload in on their own time:
	// each state is waited for, read again until it shows.
	until := func(what string, s *pgstore.Store, check func(d pgstore.Durability) string) {
		t.Helper()
		checkfor.Check(t, time.Minute, func() error {
			d, err := s.Durability(ctx)
			if err != nil {
				return err
			}
			if problem := check(d); problem != "" {
				return fmt.Errorf("%s: %s", what, problem)
			}
			return nil
		})
	}
	want := func(what string, level pgstore.DurabilityLevel, standbys ...pgstore.Standby) {
		t.Helper()
		until(what, store, func(d pgstore.Durability) string {
			if d.Level() != level || !slices.Equal(d.Standbys, standbys) || d.Warning() != "" {
				return fmt.Sprintf("level %s, standbys %v, warning %q; want %s, %v, none", d.Level(), d.Standbys, d.Warning(), level, standbys)
			}
			return ""
		})
	}
	want("alone", pgstore.DurabilityLocalDisk)

	standby, err := pgcluster.StartStandby(ctx, primary, pgcluster.StandbyOptions{Dir: pgtest.ServerDir(t), Name: "standby1"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(standby.Stop)
	want("with an async standby", pgstore.DurabilityLocalDisk, pgstore.Standby{Name: "standby1", SyncState: "async"})
	// remote_apply last: the checks below expect it.
	for _, c := range []struct {
		commit string
		level  pgstore.DurabilityLevel
	}{{"on", pgstore.DurabilityStandbyDisk}, {"remote_write", pgstore.DurabilityStandbyWritten}, {"remote_apply", pgstore.DurabilityStandbyApplied}} {
		if err := primary.SetSync(ctx, c.commit, "standby1"); err != nil {
			t.Fatal(err)
		}
		want("synchronous_commit "+c.commit, c.level, pgstore.Standby{Name: "standby1", SyncState: "sync"})
	}

	off := pgtest.Store(t, primary.URL("postgres")+"&synchronous_commit=off")
	until("synchronous_commit=off in the URL", off, func(d pgstore.Durability) string {
		if d.Level() != pgstore.DurabilityNone || !strings.Contains(d.Warning(), "synchronous_commit is off") {
			return fmt.Sprintf("level %s, warning %q; want none and a warning", d.Level(), d.Warning())
		}
		return ""
	})

	execAs(ctx, t, primary.URL("postgres"), "CREATE ROLE watcher LOGIN")
	watcher := pgtest.Store(t, strings.Replace(primary.URL("postgres"), "//postgres@", "//watcher@", 1))
	until("a role without pg_monitor", watcher, func(d pgstore.Durability) string {
		if _, known := d.CommitsWait(); d.Standbys != nil || known || d.Level() != pgstore.DurabilityStandbyApplied {
			return fmt.Sprintf("standbys %v, commits wait known %v, level %s; want unknown (nil), unknown, standby-applied", d.Standbys, known, d.Level())
		}
		return ""
	})

	standby.Stop()
	until("synchronous standby stopped", store, func(d pgstore.Durability) string {
		if wait, known := d.CommitsWait(); !wait || !known || d.Level() != pgstore.DurabilityLocalDisk || !strings.Contains(d.Warning(), "commits wait") {
			return fmt.Sprintf("commits wait %v (known %v), level %s, warning %q; want waiting, local-disk, a warning", wait, known, d.Level(), d.Warning())
		}
		return ""
	})
}

func execAs(ctx context.Context, t *testing.T, url, sql string) {
	t.Helper()
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, sql); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
}
