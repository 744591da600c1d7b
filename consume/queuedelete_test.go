package consume_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	queengate "github.com/queengate/queengate"
	"github.com/queengate/queengate/consume"
	"github.com/queengate/queengate/ingest"
	"github.com/queengate/queengate/internal/checkfor"
	"github.com/queengate/queengate/internal/pgtest"
	"github.com/queengate/queengate/model"
)

// TestQueuePurgeAndDeleteOverNATSAndHTTP: with the admin token, an
// operator purges a partition, then the whole queue (the transactionIds
// stay: a retry is a duplicate), then deletes the queue, its dead-letter
// queue along; each answer says what it removed. Bad names, bodies and
// parameters, unknown queues and partitions are refused naming what to
// fix and change nothing. After the delete the name makes a new queue:
// the same transactionIds are queued from offset 0.
func TestQueuePurgeAndDeleteOverNATSAndHTTP(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	g := e.startOpsGateway("tok-1", ingest.Config{})
	e.Push(t, e.Subject("p1"), msgs("a-1", "a-2"))
	e.Push(t, e.Subject("p2"), msgs("b-1"))
	wantStatus(t, e.Push(t, e.Prefix+".push."+model.DeadLetterQueue(e.Queue)+".p1", msgs("dead-1")), "queued")
	_, raw := g.ViaNATS(t, "consume.pop."+e.Queue+".p1", "", `{"group":"g1","consumer":"c","leaseMs":60000,"max":1}`)
	var popped queengate.PopAnswer
	if err := json.Unmarshal(raw, &popped); err != nil || len(popped.Messages) != 1 {
		t.Fatalf("pop: %s, %v", raw, err)
	}
	long := strings.Repeat("q", 129)
	for _, c := range []struct {
		via, method, where, token, body string
		code                            int
		says                            string
	}{
		{"nats", "", "queues.delete." + e.Queue, "", "", 401, "unauthorized"},
		{"nats", "", "queues.purge." + e.Queue, "nope", "", 401, "unauthorized"},
		{"http", "DELETE", "/queues/" + e.Queue, "", "", 401, "unauthorized"},
		{"http", "POST", "/queues/" + e.Queue + "/purge", "nope", "", 401, "unauthorized"},
		{"nats", "", "queues.delete.bad!q", "tok-1", "", 400, `bad queue name \"bad!q\"`},
		{"http", "DELETE", "/queues/" + long, "tok-1", "", 400, "bad queue name"},
		{"http", "POST", "/queues/bad!q/purge", "tok-1", "", 400, `bad queue name \"bad!q\"`},
		{"nats", "", "queues.delete." + e.Queue, "tok-1", `{"queue":"x"}`, 400, "takes no body"},
		{"http", "DELETE", "/queues/" + e.Queue, "tok-1", `{}`, 400, "takes no body"},
		{"http", "DELETE", "/queues/" + e.Queue + "?force=1", "tok-1", "", 400, `unknown parameter \"force\"`},
		{"http", "POST", "/queues/" + e.Queue + "/purge?partition=p1", "tok-1", "", 400, `unknown parameter \"partition\"`},
		{"nats", "", "queues.purge." + e.Queue, "tok-1", `{"partition":5}`, 400, `\"partition\" must be a name, a string`},
		{"http", "POST", "/queues/" + e.Queue + "/purge", "tok-1", `{"partitions":"p1"}`, 400, `\"partitions\"`},
		{"http", "POST", "/queues/" + e.Queue + "/purge", "tok-1", `["p1"]`, 400, "want {"},
		{"nats", "", "queues.purge." + e.Queue, "tok-1", `{"partition":"nosuch"}`, 404, `"message":"partition ` + e.Queue + `/nosuch does not exist"`},
		{"nats", "", "queues.delete." + e.Queue + "-none", "tok-1", "", 404, e.Queue + "-none"},
		{"http", "POST", "/queues/" + e.Queue + "-none/purge", "tok-1", "", 404, e.Queue + "-none"},
	} {
		var code int
		var body []byte
		if c.via == "nats" {
			code, body = g.ViaNATS(t, c.where, c.token, c.body)
		} else {
			code, body = g.ViaHTTP(t, c.method, c.where, c.token, c.body)
		}
		if code != c.code || !strings.Contains(string(body), c.says) {
			t.Errorf("%s %s %s (token %q, body %q): %d %s; want %d saying %s", c.via, c.method, c.where, c.token, c.body, code, body, c.code, c.says)
		}
	}
	if n := e.StoredCount(t); n != 3 {
		t.Fatalf("refused requests changed the queue: %d messages stored; want 3", n)
	}

	var purged queengate.QueuePurgeAnswer
	code, raw := g.ViaHTTP(t, "POST", "/queues/"+e.Queue+"/purge", "tok-1", `{"partition":"p2"}`)
	if err := json.Unmarshal(raw, &purged); code != 200 || err != nil {
		t.Fatalf("purge of p2: %d %s", code, raw)
	}
	want := queengate.QueuePurgeAnswer{Queue: e.Queue, Partition: "p2", Partitions: 1, Messages: 1, Bytes: purged.Bytes, Groups: 1, Unconsumed: 1}
	if purged != want || purged.Bytes == 0 {
		t.Errorf("purge of p2 answered %+v; want %+v with bytes", purged, want)
	}
	purged = queengate.QueuePurgeAnswer{}
	code, raw = g.ViaNATS(t, "queues.purge."+e.Queue, "tok-1", "")
	if err := json.Unmarshal(raw, &purged); code != 200 || err != nil {
		t.Fatalf("purge: %d %s", code, raw)
	}
	want = queengate.QueuePurgeAnswer{Queue: e.Queue, Partitions: 2, Messages: 2, Bytes: purged.Bytes, Groups: 1, LeasesEnded: 1, Unconsumed: 2}
	if purged != want || purged.Bytes == 0 {
		t.Errorf("purge answered %+v; want %+v with bytes", purged, want)
	}
	if n := e.StoredCount(t); n != 0 {
		t.Errorf("%d messages stored after the purge", n)
	}
	if got := e.Push(t, e.Subject("p1"), msgs("a-1")); got[0].Status != "duplicate" || off(got[0]) != 0 {
		t.Errorf("a retry after the purge: %v; want duplicate of offset 0 (transactionIds stay)", got)
	}

	var deleted queengate.QueueDeleteAnswer
	code, raw = g.ViaNATS(t, "queues.delete."+e.Queue, "tok-1", "")
	if err := json.Unmarshal(raw, &deleted); code != 200 || err != nil {
		t.Fatalf("delete: %d %s", code, raw)
	}
	wantDeleted := queengate.QueueDeleteAnswer{Queue: e.Queue, Deleted: true, Partitions: 2, Groups: 1,
		DeadLetterQueue: model.DeadLetterQueue(e.Queue), DeadLetters: 1}
	if deleted != wantDeleted {
		t.Errorf("delete answered %+v; want %+v", deleted, wantDeleted)
	}
	if code, body := g.ViaHTTP(t, "DELETE", "/queues/"+e.Queue, "tok-1", ""); code != 404 || !strings.Contains(string(body), e.Queue) {
		t.Errorf("deleting it again: %d %s; want 404 naming the queue", code, body)
	}
	if code, body := g.ViaHTTP(t, "GET", "/queues/"+model.DeadLetterQueue(e.Queue), "tok-1", ""); code != 404 {
		t.Errorf("the dead-letter queue after the delete: %d %s; want 404", code, body)
	}
	got := e.Push(t, e.Subject("p1"), msgs("a-1", "a-2"))
	if wantStatus(t, got, "queued", "queued"); off(got[0]) != 0 {
		t.Errorf("the same transactionIds after the delete: %v; want queued from offset 0", got)
	}
}

// TestADeletedQueueIsForgottenByEveryGateway: two gateways have cached
// the queue's group and partitions, and a pop waits on one of them. The
// delete, through either, is announced: both forget the group and their
// dedup cache entries, the
// waiting pop answers that the queue does not exist, the old lease's ack
// answers 404, and pushes through either gateway (whose ingest memo
// names the deleted partition) go to the queue made afresh, their same
// transactionIds queued, not duplicates.
func TestADeletedQueueIsForgottenByEveryGateway(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	consumers := []*consume.Consumers{consume.New(pgtest.Store(t, e.PGURL)), consume.New(pgtest.Store(t, e.PGURL))}
	var ingesters []*ingest.Ingester
	for _, c := range consumers {
		c.SetRevalidate(time.Hour) // the delete wakes the pop, nothing else
		_, ing := e.StartGateway(e.withQueueOps(c))
		ingesters = append(ingesters, ing)
	}
	var p1 int64 // the partition's id before the delete
	client := e.queenClient(t)
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	var leased queengate.PopAnswer
	warm := 0
	checkfor.Check(t, 30*time.Second, func() error {
		warm++ // through either gateway: both resolve the partition
		pushed := e.Push(t, e.Subject("p1"), msgs(fmt.Sprintf("warm-%d", warm)))
		wantStatus(t, pushed, "queued")
		p1 = pushed[0].PartitionID
		for i, ing := range ingesters {
			if ing.CacheState(p1).State == "absent" {
				return fmt.Errorf("gateway %d's dedup cache has no entry for the partition", i+1)
			}
		}
		a, err := client.Pop(ctx, e.Queue, "p1", queengate.PopRequest{Group: "g", Consumer: "c", Max: 1, LeaseMs: 60000})
		if err != nil {
			return err
		}
		if leased.LeaseID == "" {
			leased = a
		}
		for i, c := range consumers {
			if _, ok := c.KnownGroupID(e.Queue, "g"); !ok {
				return fmt.Errorf("gateway %d has not cached the group", i+1)
			}
		}
		return nil
	})
	e.fill(t, 1, "p2")
	if a, err := client.Pop(ctx, e.Queue, "p2", queengate.PopRequest{Group: "g", Consumer: "c", Max: 1, LeaseMs: 60000}); err != nil || len(a.Messages) != 1 {
		t.Fatalf("pop of p2: %+v, %v", a, err)
	}
	waited := make(chan error, 1)
	go func() { // p2 is leased: it waits
		_, err := client.Pop(ctx, e.Queue, "p2", queengate.PopRequest{Group: "g", Consumer: "c", Max: 1, WaitMs: 20000})
		waited <- err
	}()
	checkfor.Check(t, 30*time.Second, checkfor.Cond("the pop sleeps", func() bool {
		select {
		case err := <-waited:
			t.Fatalf("the pop answered before the delete: %v", err)
		default:
		}
		return consumers[0].Sleeping(e.Queue)+consumers[1].Sleeping(e.Queue) == 1
	}))

	ans, err := client.DeleteQueue(ctx, e.Queue)
	if err != nil || !ans.Deleted || ans.Partitions != 2 || ans.Groups != 1 || ans.LeasesEnded != 2 {
		t.Fatalf("delete: %+v, %v; want 2 partitions, 1 group, 2 leases", ans, err)
	}
	checkfor.Check(t, 30*time.Second, checkfor.Cond("both gateways forget the queue's group and cache entry", func() bool {
		_, known1 := consumers[0].KnownGroupID(e.Queue, "g")
		_, known2 := consumers[1].KnownGroupID(e.Queue, "g")
		return !known1 && !known2 && ingesters[0].CacheState(p1).State == "absent" && ingesters[1].CacheState(p1).State == "absent"
	}))
	if err := <-waited; !isCode(err, 404) || !strings.Contains(err.Error(), e.Queue) {
		t.Fatalf("the waiting pop of the deleted queue answered %v; want 404 naming the queue", err)
	}
	for range 4 { // whichever gateway answers
		_, err := client.Ack(ctx, e.Queue, "p1", queengate.AckRequest{Group: "g", LeaseID: leased.LeaseID, Items: completeAll(leased)})
		if !isCode(err, 404) {
			t.Fatalf("an ack under a lease of the deleted queue: %v; want 404", err)
		}
	}
	for i := range 6 { // both gateways' ingest memos name the deleted partition
		id := fmt.Sprintf("p1-%d", i)
		if got := e.Push(t, e.Subject("p1"), msgs(id)); got[0].Status != "queued" || off(got[0]) != int64(i) {
			t.Fatalf("push %s after the delete: %v; want queued at offset %d", id, got, i)
		}
	}
}

// TestPushesRacingADeleteLandBeforeOrAfter: pushes run while the queue
// is deleted. Each is answered queued, and either landed before the
// delete (its partition is one the delete removed, and its message is
// gone) or after it (its message is in the queue made afresh, at the
// offset answered); none is lost or failed, none is half.
func TestPushesRacingADeleteLandBeforeOrAfter(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.StartGateway(e.withQueueOps(consume.New(pgtest.Store(t, e.PGURL))))
	e.StartGateway(e.withQueueOps(consume.New(pgtest.Store(t, e.PGURL))))
	client := e.queenClient(t)
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	e.fill(t, 1, "p0", "p1", "p2")

	var d model.QueueDeleted
	answers := pushesDuring(t, ctx, e, client, func() {
		var err error
		if d, err = e.Store.DeleteQueue(ctx, e.Queue); err != nil {
			t.Fatal(err)
		}
	})

	old := map[int64]bool{}
	for _, id := range d.PartitionIDs {
		old[id] = true
	}
	landedAfter := 0
	for id, a := range answers {
		if a.Status != queengate.StatusQueued {
			t.Errorf("%s answered %+v; want queued", id, a)
			continue
		}
		m, _, _, err := e.Store.MessageAt(ctx, a.PartitionID, a.Offset)
		switch {
		case old[a.PartitionID] && !errorsIsNotFound(err):
			t.Errorf("%s landed before the delete (partition %d) but is still readable: %v", id, a.PartitionID, err)
		case !old[a.PartitionID] && (err != nil || m.TxnID != id):
			t.Errorf("%s landed after the delete at %d/%d, which holds %q (%v)", id, a.PartitionID, a.Offset, m.TxnID, err)
		case !old[a.PartitionID]:
			landedAfter++
		}
	}
	if n := e.StoredCount(t); n != landedAfter {
		t.Errorf("the queue made afresh holds %d messages; %d pushes landed in it", n, landedAfter)
	}
}

// pushesDuring pushes to e's queue (partitions p0 to p2, a new
// transactionId each time) from 4 goroutines while act runs, with pushes
// answered before and after it, and returns every answer by
// transactionId.
func pushesDuring(t *testing.T, ctx context.Context, e *testEnv, client *queengate.Client, act func()) map[string]queengate.Result {
	var (
		mu      sync.Mutex
		answers = map[string]queengate.Result{}
		wg      sync.WaitGroup
		stop    = make(chan struct{})
	)
	answered := func() int { mu.Lock(); defer mu.Unlock(); return len(answers) }
	for w := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				id := fmt.Sprintf("w%d-%d", w, i)
				got, err := client.Push(ctx, e.Queue, fmt.Sprintf("p%d", i%3), queengate.Message{TransactionID: id, Data: []byte(`{}`)})
				if err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				answers[id] = got[0]
				mu.Unlock()
			}
		}()
	}
	checkfor.Check(t, time.Minute, checkfor.Cond("pushes before", func() bool { return answered() > 20 }))
	act()
	before := answered()
	checkfor.Check(t, time.Minute, checkfor.Cond("pushes after", func() bool { return answered() > before+20 }))
	close(stop)
	wg.Wait()
	return answers
}

// TestPushesRacingAPurgeLandBeforeOrAfter: pushes run while the queue is
// purged. Each is answered queued; in each partition the messages gone
// are the ones before a point and those kept the ones after it, and the
// queue keeps exactly the ones kept.
func TestPushesRacingAPurgeLandBeforeOrAfter(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.StartGateway(e.withQueueOps(consume.New(pgtest.Store(t, e.PGURL))))
	client := e.queenClient(t)
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	answers := pushesDuring(t, ctx, e, client, func() {
		if _, err := client.PurgeQueue(ctx, e.Queue, queengate.QueuePurgeRequest{}); err != nil {
			t.Fatal(err)
		}
	})
	lowestKept, highestGone := map[int64]int64{}, map[int64]int64{}
	kept := 0
	for id, a := range answers {
		if a.Status != queengate.StatusQueued {
			t.Fatalf("%s answered %+v; want queued", id, a)
		}
		m, _, _, err := e.Store.MessageAt(ctx, a.PartitionID, a.Offset)
		switch {
		case errorsIsNotFound(err):
			highestGone[a.PartitionID] = max(highestGone[a.PartitionID], a.Offset)
		case err != nil || m.TxnID != id:
			t.Fatalf("%s at %d/%d: %q, %v", id, a.PartitionID, a.Offset, m.TxnID, err)
		default:
			kept++
			if low, ok := lowestKept[a.PartitionID]; !ok || a.Offset < low {
				lowestKept[a.PartitionID] = a.Offset
			}
		}
	}
	for pid, gone := range highestGone {
		if low, ok := lowestKept[pid]; ok && low < gone {
			t.Errorf("partition %d kept offset %d but lost %d, pushed after it", pid, low, gone)
		}
	}
	if n := e.StoredCount(t); n != kept || len(highestGone) == 0 {
		t.Errorf("the queue holds %d messages; %d pushes were kept, purged in %d partitions", n, kept, len(highestGone))
	}
}

func errorsIsNotFound(err error) bool {
	return err != nil && strings.Contains(err.Error(), model.ErrNotFound.Error())
}
