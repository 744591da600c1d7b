package pgstore_test

import (
	"context"
	"errors"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/queengate/queengate/internal/checkfor"
	"github.com/queengate/queengate/internal/pgtest"
	"github.com/queengate/queengate/internal/tcpproxy"
	"github.com/queengate/queengate/model"
	"github.com/queengate/queengate/pgstore"
)

// proxied opens a store on a fresh database whose connections all go
// through a proxy the test can freeze and cut; direct is the same
// database without it.
func proxied(t *testing.T) (through *pgstore.Store, direct *pgstore.Store, p *tcpproxy.Proxy) {
	t.Helper()
	dbURL := pgtest.NewDB(t)
	proxyURL, p := proxy(t, dbURL)
	return pgtest.Store(t, proxyURL), pgtest.Store(t, dbURL), p
}

// proxy starts a proxy to dbURL's server and returns the URL through it.
func proxy(t *testing.T, dbURL string) (string, *tcpproxy.Proxy) {
	t.Helper()
	u, err := url.Parse(dbURL)
	if err != nil {
		t.Fatal(err)
	}
	p, err := tcpproxy.Start(u.Host)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Close)
	u.Host = "127.0.0.1:" + strconv.Itoa(p.Port())
	return u.String(), p
}

func frameOf(t *testing.T, s *pgstore.Store, partition string, ids ...string) model.Frame {
	t.Helper()
	p, err := s.EnsurePartition(context.Background(), "q", partition)
	if err != nil {
		t.Fatal(err)
	}
	fr := model.Frame{PartitionID: p.ID, Verified: -1}
	for _, id := range ids {
		fr.TxnIDs = append(fr.TxnIDs, id)
		fr.Hashes = append(fr.Hashes, model.HashTxnID(id))
		fr.Data = append(fr.Data, []byte(`1`))
	}
	return fr
}

// TestAPushWhoseAnswerIsLostIsSettledAsStored: the statement commits but
// its answer never comes back (frozen on its way to the client, then the
// connection is cut): Push settles it and answers where every message is.
func TestAPushWhoseAnswerIsLostIsSettledAsStored(t *testing.T) {
	t.Parallel()
	through, direct, p := proxied(t)
	prior, err := direct.Push(context.Background(), []model.Frame{frameOf(t, direct, "p", "old")})
	if err != nil {
		t.Fatal(err)
	}
	// A push through the proxy first: its connection then has the
	// statement prepared, so the next push is sent in one go (otherwise
	// it would wait, frozen, for the preparation's answer and never run).
	if _, err := through.Push(context.Background(), []model.Frame{frameOf(t, direct, "warm", "w")}); err != nil {
		t.Fatal(err)
	}
	fr := frameOf(t, direct, "p", "a", "old", "b")
	p.Freeze(tcpproxy.ToClient)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	done := make(chan struct{})
	var res []model.FrameResult
	go func() {
		defer close(done)
		res, err = through.Push(ctx, []model.Frame{fr})
	}()
	<-ctx.Done() // the push's deadline ends the wait for an answer held by the proxy
	p.Cut()
	p.Thaw()
	<-done
	if err != nil {
		t.Fatalf("a committed push whose answer was lost: %v, want settled results", err)
	}
	if !res[0].Settled {
		t.Errorf("results not marked settled: %+v", res[0])
	}
	want := []model.Outcome{{Offset: 1, Duplicate: true}, {Offset: prior[0].BaseOffset, Duplicate: true}, {Offset: 2, Duplicate: true}}
	for k, o := range res[0].Outcomes {
		if o != want[k] {
			t.Errorf("message %d: %+v, want %+v (where it is)", k, o, want[k])
		}
	}
	again, err := direct.Push(context.Background(), []model.Frame{frameOf(t, direct, "p", "a", "b")})
	if err != nil || !again[0].Outcomes[0].Duplicate || !again[0].Outcomes[1].Duplicate {
		t.Errorf("a retry after the settled push: %+v, %v; want duplicates (stored once)", again, err)
	}
}

// TestAPushThatCannotBeSettledSaysItMayHaveCommitted: the answer is lost
// and PostgreSQL stays out of reach, so the verification read cannot be
// made: the failure must not claim anything was or was not stored.
func TestAPushThatCannotBeSettledSaysItMayHaveCommitted(t *testing.T) {
	t.Parallel()
	through, direct, p := proxied(t)
	through.SetSettleTimeout(500 * time.Millisecond)
	if _, err := through.Push(context.Background(), []model.Frame{frameOf(t, direct, "warm", "w")}); err != nil {
		t.Fatal(err)
	}
	fr := frameOf(t, direct, "p", "a")
	p.Freeze(tcpproxy.ToClient)
	defer p.Thaw()
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	_, err := through.Push(ctx, []model.Frame{fr})
	if err == nil || model.NotStored(err) || !strings.Contains(err.Error(), "could not settle") {
		t.Fatalf("a push whose outcome could not be settled: %v, want an unknown outcome", err)
	}
	res, err := direct.Push(context.Background(), []model.Frame{fr})
	if err != nil || !res[0].Outcomes[0].Duplicate {
		t.Errorf("the retry: %+v, %v; want a duplicate (the first push did commit)", res, err)
	}
}

// TestAPushThatNeverArrivedIsSettledAsNotStored: the statement is held on
// its way to the server, then the connection is cut: nothing committed,
// and Push says so for certain.
func TestAPushThatNeverArrivedIsSettledAsNotStored(t *testing.T) {
	t.Parallel()
	through, direct, p := proxied(t)
	fr := frameOf(t, direct, "p", "x", "y")
	if err := through.Ping(context.Background()); err != nil {
		t.Fatal(err) // a connection open in the pool before the freeze
	}
	p.Freeze(tcpproxy.ToServer)
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	done := make(chan error, 1)
	go func() {
		_, err := through.Push(ctx, []model.Frame{fr})
		done <- err
	}()
	<-ctx.Done()
	p.Cut()
	p.Thaw()
	err := <-done
	if err == nil || !model.NotStored(err) {
		t.Fatalf("a push that never reached PostgreSQL: %v, want a not-stored error", err)
	}
	res, err := direct.Push(context.Background(), []model.Frame{fr})
	if err != nil || res[0].Outcomes[0].Duplicate || res[0].BaseOffset != 0 {
		t.Errorf("pushing the same ids afterwards: %+v, %v; want them new at offset 0", res, err)
	}
}

// TestAPushWithPostgresAwayIsNotStored: no connection can be had.
func TestAPushWithPostgresAwayIsNotStored(t *testing.T) {
	t.Parallel()
	cluster := pgtest.NewCluster(t)
	fr := frameOf(t, pgtest.Store(t, cluster.URL), "p", "x")
	cluster.Stop()
	s := pgtest.Store(t, cluster.URL) // connects lazily: its pool is empty
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_, err := s.Push(ctx, []model.Frame{fr})
	if err == nil || !model.NotStored(err) || !errors.Is(err, model.ErrNotStored) {
		t.Fatalf("a push with PostgreSQL stopped: %v, want a not-stored error", err)
	}
}

// TestAPushAcrossARestartIsSettled: a push commits, its answer is lost,
// and PostgreSQL is down when the gateway looks: Push keeps trying to
// settle it until the server is back, then answers where it is.
func TestAPushAcrossARestartIsSettled(t *testing.T) {
	t.Parallel()
	cluster := pgtest.NewCluster(t)
	proxyURL, p := proxy(t, cluster.URL)
	through, direct := pgtest.Store(t, proxyURL), pgtest.Store(t, cluster.URL)
	if _, err := through.Push(context.Background(), []model.Frame{frameOf(t, direct, "warm", "w")}); err != nil {
		t.Fatal(err) // prepares the statement on the proxied connection
	}
	fr := frameOf(t, direct, "p", "x")
	p.Freeze(tcpproxy.ToClient)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	done := make(chan error, 1)
	var res []model.FrameResult
	go func() {
		var err error
		res, err = through.Push(ctx, []model.Frame{fr})
		done <- err
	}()
	checkfor.Check(t, 10*time.Second, checkfor.Cond("the push to commit", func() bool {
		var n int
		err := direct.Pool().QueryRow(context.Background(), "SELECT count(*) FROM queen.log_find($1, $2) WHERE h IS NOT NULL", fr.PartitionID, fr.Hashes).Scan(&n)
		return err == nil && n == 1
	}))
	cluster.Stop()
	<-ctx.Done() // the answer is lost; settling meets the server down
	p.Thaw()
	cluster.Start(t)
	if err := <-done; err != nil {
		t.Fatalf("a committed push settled across a restart: %v, want settled results", err)
	}
	if !res[0].Settled || !res[0].Outcomes[0].Duplicate || res[0].Outcomes[0].Offset != 0 {
		t.Errorf("settled results %+v, want x where it is (offset 0)", res[0])
	}
}
