package pgstore_test

import (
	"context"
	"errors"
	"net/url"
	"slices"
	"syscall"
	"testing"
	"time"

	"github.com/queengate/queengate/internal/checkfor"
	"github.com/queengate/queengate/internal/pgtest"
	"github.com/queengate/queengate/model"
	"github.com/queengate/queengate/pgstore"
)

// TestIdentityStartsANewEpochAcrossARestart: a store's epoch names the
// server its connections reach. After a restart (a new postmaster, as
// after a failover or a restore) a push built under the old epoch is
// refused unsent, not stored; one built under the new epoch goes. A
// distrusted epoch is left for the next, with the same identity.
func TestIdentityStartsANewEpochAcrossARestart(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	cluster := pgtest.NewCluster(t)
	store := pgtest.Store(t, cluster.URL)
	n1, was := store.Epoch(ctx)
	id, at, err := store.ServerIdentity(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if n1 != 1 || at != n1 || id.SystemID == 0 || id.Timeline != 1 || id.StartedAt.IsZero() || was != id.String() {
		t.Fatalf("first epoch %d (%s), a connection's %d of %+v; want 1, of a primary on timeline 1", n1, was, at, id)
	}
	fr := frameOf(t, store, "p", "a")
	if _, got, err := store.PushUnder(ctx, n1, []model.Frame{fr}); err != nil || got != n1 {
		t.Fatalf("a push under the current epoch: epoch %d, %v", got, err)
	}

	cluster.Stop()
	cluster.Start(t)
	store.Pool().Reset()                 // the connections to the old postmaster are gone
	stale := frameOf(t, store, "p", "b") // resolving reaches the restarted server
	n2, now := store.Epoch(ctx)
	if n2 != n1+1 || now == was {
		t.Fatalf("after a restart the epoch is %d (%s), want %d with another identity than %s", n2, now, n1+1, was)
	}
	_, got, err := store.PushUnder(ctx, n1, []model.Frame{stale})
	if !errors.Is(err, model.ErrStoreChanged) || !model.NotStored(err) || got != n2 {
		t.Fatalf("a push built under the old epoch: epoch %d, %v; want refused (store changed, not stored) on epoch %d", got, err, n2)
	}
	if res, got, err := store.PushUnder(ctx, n2, []model.Frame{stale}); err != nil || got != n2 || res[0].BaseOffset != 1 {
		t.Fatalf("the same push under the new epoch: %+v, epoch %d, %v; want b stored at 1 (nothing of the refused one)", res, got, err)
	}

	store.Distrust(n1) // not the latest: nothing happens
	if n, _ := store.Epoch(ctx); n != n2 {
		t.Fatalf("distrusting an old epoch moved the latest to %d", n)
	}
	store.Distrust(n2)
	if n, same := store.Epoch(ctx); n != n2+1 || same != now {
		t.Fatalf("distrusting epoch %d: now %d (%s); want %d, same identity %s", n2, n, same, n2+1, now)
	}
	if _, _, err := store.PushUnder(ctx, n2, []model.Frame{frameOf(t, store, "p", "c")}); !errors.Is(err, model.ErrStoreChanged) {
		t.Fatalf("a push under the distrusted epoch: %v, want refused", err)
	}
}

// TestIdentityStartsANewEpochAfterABackendCrash: a backend killed makes
// the postmaster reinitialise and recover, without restarting (same start
// time): commits acknowledged with synchronous_commit off may be gone.
// The statistics reset by the recovery make it a new identity.
func TestIdentityStartsANewEpochAfterABackendCrash(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	cluster := pgtest.NewCluster(t)
	store := pgtest.Store(t, cluster.URL)
	before, n1, err := store.ServerIdentity(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var pid int
	if err := store.Pool().QueryRow(ctx, "SELECT pg_backend_pid()").Scan(&pid); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	var after pgstore.Identity
	var n2 uint64
	checkfor.Check(t, time.Minute, checkfor.Cond("a connection in another epoch after the recovery", func() bool {
		store.Pool().Reset() // the reinitialisation ends every backend
		after, n2, err = store.ServerIdentity(ctx)
		return err == nil && n2 != n1
	}))
	if !after.StartedAt.Equal(before.StartedAt) || after.StatsReset.Equal(before.StatsReset) || n2 != n1+1 {
		t.Fatalf("before the crash %s (epoch %d), after %s (epoch %d); want the same start, statistics reset since, epoch %d",
			before, n1, after, n2, n1+1)
	}
}

// TestIdentityIsReadWithoutSuperuser: a managed PostgreSQL gives no
// superuser; reading a connection's identity must not need one.
func TestIdentityIsReadWithoutSuperuser(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	admin := pgtest.Store(t, pgtest.SharedURL(t))
	role := "plain_" + time.Now().Format("150405_000000")
	if _, err := admin.Pool().Exec(ctx, "CREATE ROLE "+role+" LOGIN PASSWORD 'plain' NOSUPERUSER"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _, _ = admin.Pool().Exec(context.Background(), "DROP ROLE "+role) })
	u, err := url.Parse(pgtest.SharedURL(t))
	if err != nil {
		t.Fatal(err)
	}
	u.User = url.UserPassword(role, "plain")
	plain := pgtest.Store(t, u.String())
	n, id := plain.Epoch(ctx)
	if n == 0 {
		t.Fatalf("a role without superuser could not read the identity (epoch %d, %s)", n, id)
	}
}

// TestPushIgnoresAVouchAboveTheAllocator: a watermark above the
// partition's allocator speaks of a longer log than this one (a cache
// that learned a failed-over server's): SQL probes the whole window, so
// a message stored below it is answered duplicate, not written again.
func TestPushIgnoresAVouchAboveTheAllocator(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.push(t, -1, "x")
	res := b.push(t, 5, "x", "y")
	if !res.Outcomes[0].Duplicate || res.Outcomes[0].Offset != 0 || res.Outcomes[1].Duplicate || res.Outcomes[1].Offset != 1 {
		t.Fatalf("vouched 5 over an allocator at 0: %+v; want x a duplicate of 0, y new at 1", res.Outcomes)
	}
	if res.Probe != model.ProbeFull {
		t.Errorf("probe %v, want full", res.Probe)
	}
}

// TestLacksTellsWhatTheServerDoesNotHold: a message is held only with
// its hash at its offset.
func TestLacksTellsWhatTheServerDoesNotHold(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.push(t, -1, "a", "b")
	x, a, b2 := model.HashTxnID("x"), model.HashTxnID("a"), model.HashTxnID("b")
	pids := []int64{b.part.ID, b.part.ID, b.part.ID, b.part.ID, 1 << 40}
	offsets := []int64{0, 1, 1, 2, 0}
	hashes := []model.Hash{a, b2, x, x, a}
	lacking, n, err := b.store.Lacks(context.Background(), pids, offsets, hashes)
	if err != nil {
		t.Fatal(err)
	}
	if want := []bool{false, false, true, true, true}; n == 0 || !slices.Equal(lacking, want) {
		t.Errorf("lacks %v (epoch %d); want %v: a and b held, x at 1 (b is there), x past the allocator, a partition that does not exist", lacking, n, want)
	}
}
