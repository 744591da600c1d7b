package server_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/nats-io/nats.go"

	queengate "github.com/queengate/queengate"
	"github.com/queengate/queengate/internal/checkfor"
	"github.com/queengate/queengate/internal/natsembed"
	"github.com/queengate/queengate/internal/pgtest"
	"github.com/queengate/queengate/server"
)

// sent is one push request of the load and what became of it.
type sent struct {
	ids []string
	// answered: an answer arrived (the messages' statuses); refused: a 503
	// arrived; err: no answer (a timeout, no responders, the connection
	// closed).
	answered bool
	refused  *queengate.Error
	err      error
	// duringStop: sent after Stop began and before it returned.
	duringStop bool
}

// loadOf is what producers pushed at a gateway while it stopped.
type loadOf struct {
	mu       sync.Mutex
	requests []*sent
	count    atomic.Int64
	stopping atomic.Bool
}

func (l *loadOf) add(r *sent) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.requests = append(l.requests, r)
}

// produce pushes batches of 20 new ids to q/p<n>, one request at a time
// with a 3 s timeout, until done is closed.
func (l *loadOf) produce(t *testing.T, url string, n int, done <-chan struct{}) {
	nc, err := nats.Connect(url, nats.MaxReconnects(-1), nats.ReconnectWait(50*time.Millisecond))
	if err != nil {
		t.Error(err)
		return
	}
	defer nc.Close()
	client, err := queengate.NewClient(nc, queengate.WithTimeout(3*time.Second))
	if err != nil {
		t.Error(err)
		return
	}
	defer client.Close()
	for i := 0; ; i++ {
		select {
		case <-done:
			return
		default:
		}
		r := &sent{duringStop: l.stopping.Load()}
		msgs := make([]queengate.Message, 20)
		for j := range msgs {
			id := fmt.Sprintf("p%d-%d-%d", n, i, j)
			r.ids = append(r.ids, id)
			msgs[j] = queengate.Message{TransactionID: id, Data: json.RawMessage(`{}`)}
		}
		_, err := client.Push(context.Background(), "q", fmt.Sprintf("p%d", n), msgs...)
		var qerr *queengate.Error
		switch {
		case err == nil:
			r.answered = true
		case errors.As(err, &qerr):
			r.refused = qerr
		default:
			r.err = err
			select { // no answer: the gateway may be gone; do not spin
			case <-done:
			case <-time.After(10 * time.Millisecond):
			}
		}
		l.add(r)
		l.count.Add(1)
	}
}

// storedIDs is every transactionId stored in the database at url.
func storedIDs(t *testing.T, url string) map[string]bool {
	t.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	rows, err := conn.Query(ctx, "SELECT unnest(txn_ids) FROM queen.log_segments")
	if err != nil {
		t.Fatal(err)
	}
	ids, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	stored := make(map[string]bool, len(ids))
	for _, id := range ids {
		stored[id] = true
	}
	return stored
}

// TestStopUnderLoadAnswersEverythingStored: producers push while the
// gateway stops. Every request whose messages were stored was answered
// (none was left to time out or met a closed connection), and nothing
// refused 503 was stored. With the embedded NATS server, which goes with
// the gateway, and with NATS of its own.
func TestStopUnderLoadAnswersEverythingStored(t *testing.T) {
	t.Parallel()
	for _, embedded := range []bool{true, false} {
		t.Run(fmt.Sprintf("embedded=%v", embedded), func(t *testing.T) {
			t.Parallel()
			cfg := server.Config{PGURL: pgtest.NewDB(t), AdminAddr: "127.0.0.1:0", EmbeddedNATS: server.EmbeddedNATS{Port: -1}}
			if !embedded {
				ns, err := natsembed.Start(natsembed.Config{Port: -1})
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(ns.Shutdown)
				cfg.NATSURL = ns.ClientURL()
			}
			srv := start(t, cfg)
			load := &loadOf{}
			done := make(chan struct{})
			var producers sync.WaitGroup
			for n := range 16 {
				producers.Go(func() { load.produce(t, srv.ClientURL(), n, done) })
			}
			checkfor.Check(t, time.Minute, checkfor.Cond("300 requests pushed", func() bool { return load.count.Load() >= 300 }))
			load.stopping.Store(true)
			if err := srv.Stop(context.Background()); err != nil {
				t.Fatal(err)
			}
			load.stopping.Store(false)
			close(done)
			producers.Wait()
			checkStopAnswers(t, load, storedIDs(t, cfg.PGURL))
		})
	}
}

// checkStopAnswers fails on a request stored and not answered, or
// answered and not stored, or refused and stored.
func checkStopAnswers(t *testing.T, load *loadOf, stored map[string]bool) {
	t.Helper()
	var answered, refused, unanswered, storedUnanswered, refusedStopping int
	for _, r := range load.requests {
		n := 0
		for _, id := range r.ids {
			if stored[id] {
				n++
			}
		}
		switch {
		case r.answered:
			answered++
			if n != len(r.ids) {
				t.Errorf("request %s… answered, %d of its %d messages stored", r.ids[0], n, len(r.ids))
			}
		case r.refused != nil:
			refused++
			if n > 0 {
				t.Errorf("request %s… refused (%v), %d of its messages stored", r.ids[0], r.refused, n)
			}
			if r.duringStop && r.refused.Code == queengate.CodeUnavailable && r.refused.Text == "shutting down: retry on another gateway" {
				refusedStopping++
			}
		default:
			unanswered++
			if n > 0 {
				storedUnanswered++
				t.Errorf("request %s… stored (%d of %d messages) and not answered: %v", r.ids[0], n, len(r.ids), r.err)
			}
		}
	}
	t.Logf("%d requests: %d answered, %d refused (%d shutting down during the stop), %d unanswered (%d of them stored)",
		len(load.requests), answered, refused, refusedStopping, unanswered, storedUnanswered)
}

// push is one push of TestPushesDuringAStopAreRefused, answered on done.
type push struct {
	id   string
	err  error
	done chan struct{}
}

func startPush(client *queengate.Client, id string) *push {
	p := &push{id: id, done: make(chan struct{})}
	go func() {
		defer close(p.done)
		msg := queengate.Message{TransactionID: id, Data: json.RawMessage(`{}`)}
		_, p.err = client.Push(context.Background(), "q", "p", msg)
	}()
	return p
}

// shuttingDown says whether err is the 503 of a stopping gateway.
func shuttingDown(err error) bool {
	var qerr *queengate.Error
	return errors.As(err, &qerr) && qerr.Code == queengate.CodeUnavailable && qerr.Text == "shutting down: retry on another gateway"
}

// TestPushesDuringAStopAreRefused: while a stopping gateway still flushes
// what it accepted (its commit held up here by a lock on the log), a
// push that reaches it is answered 503 shutting down at once, not left
// to time out or to "no responders"; what it accepted is answered and
// stored once the commit goes through, and the stop then completes.
func TestPushesDuringAStopAreRefused(t *testing.T) {
	t.Parallel()
	ns, err := natsembed.Start(natsembed.Config{Port: -1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(ns.Shutdown)
	url := pgtest.NewDB(t)
	srv := start(t, server.Config{PGURL: url, NATSURL: ns.ClientURL(), AdminAddr: "127.0.0.1:0"})
	client := connect(t, srv)
	pushQueued(t, client)
	unlock := lockLog(t, url)
	pushes := []*push{startPush(client, "held")}
	checkfor.Check(t, time.Minute, checkfor.Cond("the first push to wait for the lock", func() bool { return lockWaiters(t, url) > 0 }))
	stopped := make(chan error, 1)
	go func() { stopped <- srv.Stop(context.Background()) }()
	refused := false
	for i := 0; !refused; i++ {
		p := startPush(client, fmt.Sprintf("during-%d", i))
		pushes = append(pushes, p)
		select {
		case <-p.done: // accepted pushes wait for the lock; refused ones are answered at once
			if !shuttingDown(p.err) {
				t.Fatalf("a push during the stop: %v, want 503 shutting down", p.err)
			}
			refused = true
		case <-time.After(time.Second):
		}
	}
	unlock()
	if err := <-stopped; err != nil {
		t.Fatal(err)
	}
	stored := storedIDs(t, url)
	for _, p := range pushes {
		<-p.done
		switch {
		case p.err == nil && !stored[p.id]:
			t.Errorf("push %s answered and not stored", p.id)
		case p.err != nil && !shuttingDown(p.err):
			t.Errorf("push %s: %v, want an answer or 503 shutting down", p.id, p.err)
		case p.err != nil && stored[p.id]:
			t.Errorf("push %s refused and stored", p.id)
		}
	}
}

// lockLog holds the log's segments table locked against writes until
// the function it returns is called (or the test ends).
func lockLog(t *testing.T, url string) (unlock func()) {
	t.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	tx, err := conn.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(ctx, "LOCK TABLE queen.log_segments IN EXCLUSIVE MODE"); err != nil {
		t.Fatal(err)
	}
	var once sync.Once
	unlock = func() {
		once.Do(func() {
			_ = tx.Commit(ctx)
			_ = conn.Close(ctx)
		})
	}
	t.Cleanup(unlock)
	return unlock
}

// lockWaiters counts the sessions waiting for a lock on the log's
// segments table.
func lockWaiters(t *testing.T, url string) int {
	t.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	var n int
	if err := conn.QueryRow(ctx, "SELECT count(*) FROM pg_locks WHERE NOT granted AND relation = 'queen.log_segments'::regclass").Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}
