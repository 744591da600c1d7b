package timers_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/queengate/queengate/internal/checkfor"
	"github.com/queengate/queengate/internal/pgtest"
	"github.com/queengate/queengate/model"
	"github.com/queengate/queengate/pgstore"
	"github.com/queengate/queengate/timers"
)

func TestMain(m *testing.M) { pgtest.Run(m) }

type env struct {
	t     *testing.T
	store *pgstore.Store
	queue string
}

// newEnv gives a test its own database: fire loops take every due timer
// of a database.
func newEnv(t *testing.T) *env {
	t.Helper()
	return &env{t: t, store: pgtest.Store(t, pgtest.NewDB(t)), queue: pgtest.UniqueName(t)}
}

func (e *env) service(cfg timers.Config) *timers.Service {
	e.t.Helper()
	s, err := timers.New(e.store, cfg, zerolog.New(zerolog.NewTestWriter(e.t)).Level(zerolog.WarnLevel), nil)
	if err != nil {
		e.t.Fatal(err)
	}
	return s
}

func (e *env) start(s *timers.Service) {
	e.t.Helper()
	if err := s.Start(context.Background()); err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(s.Stop)
}

// stored counts the messages of txnID in the queue's log.
func (e *env) stored(txnID string) int {
	e.t.Helper()
	var n int
	if err := e.store.Pool().QueryRow(context.Background(), `
		SELECT count(*) FROM queen.log_segments s
		  JOIN queen.log_partitions p ON p.id = s.partition_id
		  JOIN queen.queues q ON q.id = p.queue_id,
		  unnest(s.txn_ids) AS x(id)
		 WHERE q.name = $1 AND x.id = $2`, e.queue, txnID).Scan(&n); err != nil {
		e.t.Fatal(err)
	}
	return n
}

func (e *env) pending() int64 {
	e.t.Helper()
	n, err := e.store.PendingTimers(context.Background())
	if err != nil {
		e.t.Fatal(err)
	}
	return n
}

func TestScheduleFireIsExactlyOnce(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	s := e.service(timers.Config{})
	past, err := s.Schedule(ctx, e.queue, "p", "past", []byte(`{"n":1}`), nil, time.Now().Add(-time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	if past.Status != "scheduled" || past.TxnID != "past" || len(past.TimerID) != 36 {
		t.Errorf("answer %+v", past)
	}
	if _, err := s.Schedule(ctx, e.queue, "p", "soon", nil, nil, time.Now().Add(300*time.Millisecond)); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Schedule(ctx, e.queue, "p", "later", nil, nil, time.Now().Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	e.start(s)
	checkfor.Check(t, 60*time.Second, checkfor.Cond("past and soon fired", func() bool { return e.stored("past") > 0 && e.stored("soon") > 0 }))
	// A fire deletes the row it fires from in the same transaction: with one
	// row left ("later"), neither can fire again, so these counts are final.
	if e.stored("past") != 1 || e.stored("soon") != 1 || e.stored("later") != 0 || e.pending() != 1 {
		t.Errorf("past %d, soon %d, later %d stored, %d pending; want 1, 1, 0, 1",
			e.stored("past"), e.stored("soon"), e.stored("later"), e.pending())
	}
	var data string
	if err := e.store.Pool().QueryRow(ctx, `SELECT s.data[1]::text FROM queen.log_segments s
		JOIN queen.log_partitions p ON p.id = s.partition_id JOIN queen.queues q ON q.id = p.queue_id
		WHERE q.name = $1 AND s.txn_ids[1] = 'past'`, e.queue).Scan(&data); err != nil || data != `{"n":1}` {
		t.Errorf("fired data %q, %v", data, err)
	}
}

// TestScheduleIsIdempotentWhilePending: a retried schedule finds the
// pending timer; after the fire, scheduling the same transactionId again
// makes a second timer and a second message (docs/protocol.md's stated
// consequence: the fire does not probe the window).
func TestScheduleIsIdempotentWhilePendingAndRescheduleAfterFireIsASecondMessage(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	s := e.service(timers.Config{})
	a, err := s.Schedule(ctx, e.queue, "p", "again", nil, nil, time.Now().Add(400*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	b, err := s.Schedule(ctx, e.queue, "p", "again", nil, nil, time.Now().Add(time.Hour))
	if err != nil || b.TimerID != a.TimerID || !b.FireAt.Equal(a.FireAt) || e.pending() != 1 {
		t.Fatalf("retried schedule: %+v, %v (first %+v), %d pending; want the same timer", b, err, a, e.pending())
	}
	e.start(s)
	checkfor.Check(t, 60*time.Second, checkfor.Cond("first fire", func() bool { return e.stored("again") == 1 }))
	c, err := s.Schedule(ctx, e.queue, "p", "again", nil, nil, time.Now())
	if err != nil || c.TimerID == a.TimerID {
		t.Fatalf("re-schedule after the fire: %+v, %v; want a new timer", c, err)
	}
	checkfor.Check(t, 60*time.Second, checkfor.Cond("second fire", func() bool { return e.stored("again") == 2 }))
}

// TestFireDoesNotProbeTheWindow: a timer whose transactionId is already
// in the partition's window is still written: its guarantee is its own
// transaction, not the window.
func TestFireDoesNotProbeTheWindow(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	p, err := e.store.EnsurePartition(ctx, e.queue, "p")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.store.Push(ctx, []model.Frame{{PartitionID: p.ID, Verified: -1, TxnIDs: []string{"x"},
		Hashes: []model.Hash{model.HashTxnID("x")}, Data: [][]byte{[]byte("1")}}}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.store.ScheduleTimer(ctx, p.ID, "x", nil, nil, time.Now().Add(-time.Second)); err != nil {
		t.Fatal(err)
	}
	fired, err := e.store.FireDue(ctx, 10, nil)
	if err != nil || len(fired) != 1 || fired[0].Offset != 1 {
		t.Fatalf("fired %+v, %v; want one message at offset 1", fired, err)
	}
	if e.stored("x") != 2 {
		t.Errorf("x stored %d times, want 2: the fire writes whatever the window holds", e.stored("x"))
	}
}

func TestTwoFireLoopsFireEachTimerOnce(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	const n = 3000
	var pids []int64
	for i := range 5 {
		p, err := e.store.EnsurePartition(ctx, e.queue, fmt.Sprint("p", i))
		if err != nil {
			t.Fatal(err)
		}
		pids = append(pids, p.ID)
	}
	// Due now and during the run, over five partitions.
	now := time.Now()
	for i := range n {
		at := now.Add(time.Duration(i%500) * time.Millisecond)
		if _, err := e.store.ScheduleTimer(ctx, pids[i%len(pids)], fmt.Sprint("t-", i), nil, nil, at); err != nil {
			t.Fatal(err)
		}
	}
	var fired [2]atomic.Int64
	for g := range 2 {
		s := e.service(timers.Config{BatchSize: 100, BeforeCommit: func(f []model.FiredTimer) error {
			fired[g].Add(int64(len(f))) // counted before commit; no fault injected here
			return nil
		}})
		e.start(s)
	}
	checkfor.Check(t, 60*time.Second, checkfor.Cond("every timer fired", func() bool { return e.pending() == 0 }))
	var dups, missing int
	if err := e.store.Pool().QueryRow(ctx, `
		WITH x AS (SELECT id, count(*) AS c FROM queen.log_segments s, unnest(s.txn_ids) AS u(id)
		            WHERE s.partition_id = ANY ($1) GROUP BY id)
		SELECT (SELECT count(*) FROM x WHERE c > 1), $2 - (SELECT count(*) FROM x)`, pids, n).Scan(&dups, &missing); err != nil {
		t.Fatal(err)
	}
	if dups != 0 || missing != 0 {
		t.Errorf("%d timers fired twice, %d never", dups, missing)
	}
	t.Logf("fire loops fired %d and %d", fired[0].Load(), fired[1].Load())
	if fired[0].Load()+fired[1].Load() != n {
		t.Errorf("fires counted %d + %d, want %d", fired[0].Load(), fired[1].Load(), n)
	}
}

// TestRolledBackFireLeavesTheTimerPending: a failure after the delete and
// the push, before COMMIT, undoes both; the timer fires later, once.
func TestRolledBackFireLeavesTheTimerPending(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	var attempts atomic.Int64
	injected := errors.New("injected failure before commit")
	s := e.service(timers.Config{BeforeCommit: func(f []model.FiredTimer) error {
		if len(f) > 0 && attempts.Add(1) == 1 {
			return injected
		}
		return nil
	}})
	if _, err := s.Schedule(ctx, e.queue, "p", "fragile", nil, nil, time.Now()); err != nil {
		t.Fatal(err)
	}
	// The first fire by hand, to observe the state between the two.
	if _, err := e.store.FireDue(ctx, 10, func(f []model.FiredTimer) error {
		if len(f) != 1 || e.stored("fragile") != 0 {
			t.Errorf("inside the fire: %+v", f)
		}
		return injected
	}); !errors.Is(err, injected) {
		t.Fatalf("fire: %v, want the injected failure", err)
	}
	if e.pending() != 1 || e.stored("fragile") != 0 {
		t.Fatalf("after the rollback: %d pending, %d stored; want 1 and 0", e.pending(), e.stored("fragile"))
	}
	e.start(s) // its first fire fails too (injected), the next one commits
	checkfor.Check(t, 60*time.Second, checkfor.Cond("the fire after the rollbacks", func() bool { return e.stored("fragile") == 1 }))
	// Its row went with that commit (pending 0): no later fire is possible.
	if e.stored("fragile") != 1 || e.pending() != 0 || attempts.Load() < 2 {
		t.Errorf("%d stored, %d pending after %d attempts; want 1, 0, at least 2", e.stored("fragile"), e.pending(), attempts.Load())
	}
}

func TestCancelBeforeAndAfterTheFire(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	s := e.service(timers.Config{})
	early, err := s.Schedule(ctx, e.queue, "p", "cancelled-early", nil, nil, time.Now().Add(500*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	if got, err := s.Cancel(ctx, early.TimerID); err != nil || got != "cancelled" {
		t.Fatalf("cancel before the fire: %q, %v", got, err)
	}
	if got, _ := s.Cancel(ctx, early.TimerID); got != "absent" {
		t.Errorf("second cancel: %q, want absent", got)
	}
	fires, err := s.Schedule(ctx, e.queue, "p", "fires", nil, nil, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	e.start(s)
	checkfor.Check(t, 60*time.Second, checkfor.Cond("the fire", func() bool { return e.stored("fires") == 1 }))
	if got, _ := s.Cancel(ctx, fires.TimerID); got != "absent" {
		t.Errorf("cancel after the fire: %q, want absent (no longer pending)", got)
	}
	if got, _ := s.Cancel(ctx, "00000000-0000-4000-8000-000000000000"); got != "absent" {
		t.Errorf("cancel of an unknown timer: %q, want absent", got)
	}
	// Nothing is pending: the cancelled timer's row is gone, and a timer
	// fires only from its row, so it never will.
	if e.pending() != 0 || e.stored("cancelled-early") != 0 {
		t.Errorf("%d pending, cancelled timer stored %d times; want 0 and 0", e.pending(), e.stored("cancelled-early"))
	}
}

// TestCancelRacingTheFire: whatever the interleaving, a timer is either
// cancelled (and never fires) or fired once (and the cancel says absent).
func TestCancelRacingTheFire(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	s := e.service(timers.Config{BatchSize: 50})
	const n = 400
	ids := make([]string, n)
	for i := range n {
		x, err := s.Schedule(ctx, e.queue, "p", fmt.Sprint("race-", i), nil, nil, time.Now().Add(100*time.Millisecond))
		if err != nil {
			t.Fatal(err)
		}
		ids[i] = x.TimerID
	}
	e.start(s)
	answers := make([]string, n)
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Go(func() {
			for i := w; i < n; i += 4 {
				a, err := s.Cancel(ctx, ids[i])
				if err != nil {
					t.Error(err)
				}
				answers[i] = a
			}
		})
	}
	wg.Wait()
	checkfor.Check(t, 60*time.Second, checkfor.Cond("nothing pending", func() bool { return e.pending() == 0 }))
	cancelled := 0
	for i, a := range answers {
		got := e.stored(fmt.Sprint("race-", i))
		if a == "cancelled" {
			cancelled++
		}
		if (a == "cancelled") != (got == 0) || got > 1 {
			t.Errorf("timer %d: cancel said %q, stored %d times", i, a, got)
		}
	}
	t.Logf("%d of %d cancelled before their fire", cancelled, n)
}

// TestFireTakesAtMostTheByteBudget: one fire takes timers until their data
// would pass the budget, and always at least one.
func TestFireTakesAtMostTheByteBudget(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	p, err := e.store.EnsurePartition(ctx, e.queue, "p")
	if err != nil {
		t.Fatal(err)
	}
	// Highly compressible data: the budget must count its size as sent
	// (200 KiB each), not as stored.
	data := []byte(`"` + strings.Repeat("a", 200<<10) + `"`)
	for i := range 3 {
		if _, err := e.store.ScheduleTimer(ctx, p.ID, fmt.Sprint("b-", i), data, nil, time.Now().Add(-time.Second)); err != nil {
			t.Fatal(err)
		}
	}
	tx, err := e.store.Pool().Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	var n int
	if err := tx.QueryRow(ctx, "SELECT count(*) FROM queen.timer_fire(10, 1)").Scan(&n); err != nil || n != 1 {
		t.Errorf("a 1-byte budget fired %d timers (%v), want 1", n, err)
	}
	if err := tx.QueryRow(ctx, "SELECT count(*) FROM queen.timer_fire(10, 300 << 10)").Scan(&n); err != nil || n != 1 {
		t.Errorf("then a 300 KiB budget fired %d (%v), want 1 (of 200 KiB each, as sent)", n, err)
	}
	if err := tx.QueryRow(ctx, "SELECT count(*) FROM queen.timer_fire(10, 1 << 20)").Scan(&n); err != nil || n != 1 {
		t.Errorf("then a 1 MiB budget fired %d (%v), want the last one", n, err)
	}
}

// sleeps records the fire loop's sleeps and wake-ups (Config.OnSleep).
type sleeps struct {
	mu     sync.Mutex
	events []timers.Sleep
}

func (l *sleeps) note(e timers.Sleep) {
	l.mu.Lock()
	l.events = append(l.events, e)
	l.mu.Unlock()
}

func (l *sleeps) since(i int) []timers.Sleep {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]timers.Sleep(nil), l.events[min(i, len(l.events)):]...)
}

// TestFireLoopNeitherSpinsNorWakesForLaterTimers: a due timer held by
// another gateway's fire is backed off from, not retried in a tight loop;
// schedules due after the loop's planned wake-up do not wake it.
func TestFireLoopNeitherSpinsNorWakesForLaterTimers(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	var log sleeps
	svc := e.service(timers.Config{OnSleep: log.note})
	held, err := svc.Schedule(ctx, e.queue, "p", "held", nil, nil, time.Now().Add(-time.Second))
	if err != nil {
		t.Fatal(err)
	}
	tx, err := e.store.Pool().Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(ctx, "SELECT 1 FROM queen.timers WHERE id = $1 FOR UPDATE", held.TimerID); err != nil {
		t.Fatal(err)
	}
	e.start(svc)
	// Due but held: each sleep is twice the last (from 10 ms, up to
	// 250 ms), so the loop backs off instead of spinning.
	var planned []time.Duration
	checkfor.Check(t, 30*time.Second, func() error {
		planned = planned[:0]
		for _, ev := range log.since(0) {
			if ev.Woken == "" {
				planned = append(planned, ev.Planned)
			}
		}
		if len(planned) < 6 {
			return fmt.Errorf("%d sleeps so far: %v", len(planned), planned)
		}
		return nil
	})
	for i := 1; i < len(planned); i++ {
		if want := min(2*planned[i-1], 250*time.Millisecond); planned[i] != want {
			t.Fatalf("sleeps while the due timer is held: %v; want each twice the last, up to 250ms", planned)
		}
	}
	if err := tx.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	checkfor.Check(t, 60*time.Second, checkfor.Cond("the held timer fires once released", func() bool { return e.stored("held") == 1 }))

	// Next due in 20 s: the loop goes to sleep until then. 100 schedules
	// due later than that must not wake it (another gateway's, through
	// LISTEN, included); one due sooner does.
	if _, err := svc.Schedule(ctx, e.queue, "p", "next", nil, nil, time.Now().Add(20*time.Second)); err != nil {
		t.Fatal(err)
	}
	var mark int
	checkfor.Check(t, 10*time.Second, func() error {
		all := log.since(0)
		for i := len(all) - 1; i >= 0; i-- {
			// Planned for the next timer, not the 30 s of nothing due.
			if all[i].Woken == "" && all[i].Planned > 15*time.Second && all[i].Planned <= 20*time.Second {
				mark = i
				return nil
			}
		}
		return errors.New("the loop has not gone to sleep until the next timer")
	})
	other := e.service(timers.Config{NoFire: true})
	for i := range 100 {
		if _, err := other.Schedule(ctx, e.queue, "p", fmt.Sprint("later-", i), nil, nil, time.Now().Add(25*time.Second)); err != nil {
			t.Fatal(err)
		}
	}
	soonerAt := time.Now()
	if _, err := other.Schedule(ctx, e.queue, "p", "sooner", nil, nil, soonerAt); err != nil {
		t.Fatal(err)
	}
	checkfor.Check(t, 60*time.Second, checkfor.Cond("the sooner timer fires on its notification", func() bool { return e.stored("sooner") == 1 }))
	woke := log.since(mark + 1)
	if len(woke) == 0 || woke[0].Woken != "schedule" || woke[0].For > soonerAt.Add(time.Second).UnixMilli() {
		t.Errorf("after going to sleep until the next timer, the loop's first wake-up was %+v; want one for the sooner schedule only", woke)
	}
}
