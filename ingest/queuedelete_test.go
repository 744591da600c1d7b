package ingest_test

import (
	"bytes"
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/queengate/queengate/ingest"
	"github.com/queengate/queengate/internal/checkfor"
	"github.com/queengate/queengate/model"
)

// A push to a queue deleted since the ingester resolved its partition is
// refused by the store (the partition is gone) before anything is
// written: the ingester resolves the name again, to the queue made
// afresh, and the same transactionIds are queued there, not answered
// duplicate. The bundle's other queue is not failed for it. The refusal
// is logged at info, not as a failed push: nothing failed.
func TestPushAfterItsQueueWasDeletedGoesToTheQueueMadeAfresh(t *testing.T) {
	t.Parallel()
	var logs lockedBuffer
	b := setupLogged(t, ingest.Config{Shards: 1, FlushSize: 2, Linger: time.Hour}, zerolog.New(&logs))
	first := wait(t, b.submit(t, "p", "a", "b"))
	if s := statuses(first); s != "queued,queued" {
		t.Fatalf("before the delete: %s", s)
	}
	if _, err := b.store.DeleteQueue(context.Background(), b.queue); err != nil {
		t.Fatal(err)
	}

	other := make(chan []model.PushOutcome, 1)
	if err := b.ing.Submit(&ingest.Request{Queue: b.queue + "-other", Partition: "p",
		Messages: []model.Incoming{{TxnID: "x", Data: []byte(`{}`)}}, Done: func(r []model.PushOutcome) { other <- r }}); err != nil {
		t.Fatal(err)
	}
	again := wait(t, b.submit(t, "p", "a", "c")) // fills the buffer: one bundle with the other queue
	if s := statuses(again); s != "queued,queued" || again[0].Offset != 0 || again[0].PartitionID == first[0].PartitionID {
		t.Fatalf("after the delete: %s %+v; want both queued from offset 0 of a new partition (was %d)", s, again, first[0].PartitionID)
	}
	if s := statuses(wait(t, other)); s != "queued" {
		t.Fatalf("the other queue's message in the same bundle: %s; want queued", s)
	}
	if n := b.store.pushes.Load(); n != 3 {
		t.Fatalf("%d pushes; want 3 (the first, the refused bundle, its retry)", n)
	}
	log := logs.String()
	if strings.Contains(log, `"level":"warn"`) || strings.Contains(log, `"level":"error"`) ||
		!strings.Contains(log, `{"level":"info","error":`) || !strings.Contains(log, "pushing once more") {
		t.Errorf("the log of a push refused and retried; want it at info, no warning or error:\n%s", log)
	}
}

// lockedBuffer is a log the ingester's goroutines write while the test
// reads it.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.String()
}

// A queue's delete announced to the ingester: its memos and cache
// entries go, and the next push resolves the name at once, with no
// refused bundle first.
func TestForgetQueueDropsMemosAndCacheEntries(t *testing.T) {
	t.Parallel()
	b := setup(t, ingest.Config{Shards: 2})
	first := wait(t, b.submit(t, "p", "a", "b"))
	if s := statuses(first); s != "queued,queued" {
		t.Fatalf("before the delete: %s", s)
	}
	pid := first[0].PartitionID
	if st := b.ing.CacheState(pid); st.State != "vouching" {
		t.Fatalf("the partition's cache entry before: %+v", st)
	}
	if _, err := b.store.DeleteQueue(context.Background(), b.queue); err != nil {
		t.Fatal(err)
	}
	b.ing.ForgetQueue(b.queue)
	checkfor.Check(t, 30*time.Second, checkfor.Cond("the entry is forgotten", func() bool { return b.ing.CacheState(pid).State == "absent" }))
	again := wait(t, b.submit(t, "p", "a"))
	if s := statuses(again); s != "queued" || again[0].PartitionID == pid || again[0].Offset != 0 {
		t.Fatalf("after the delete: %s %+v; want queued at offset 0 of a new partition", s, again)
	}
	if n := b.store.pushes.Load(); n != 2 {
		t.Fatalf("%d pushes; want 2 (no bundle refused for the deleted partition)", n)
	}
}
