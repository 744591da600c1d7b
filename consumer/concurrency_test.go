package consumer_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	queengate "github.com/queengate/queengate"
	"github.com/queengate/queengate/consumer"
	"github.com/queengate/queengate/internal/checkfor"
	"github.com/queengate/queengate/internal/gatewaytest"
)

// pushTo pushes n messages to each partition, transactionIds <p>-<i>.
func pushTo(t *testing.T, r *gatewaytest.Running, n int, partitions ...string) {
	t.Helper()
	for _, p := range partitions {
		var msgs []queengate.Message
		for i := range n {
			msgs = append(msgs, msg(fmt.Sprintf("%s-%d", p, i), fmt.Sprint(i)))
		}
		if _, err := r.Client.Push(t.Context(), r.Queue, p, msgs...); err != nil {
			t.Fatal(err)
		}
	}
}

// partitionOf is the partition pushTo named a message's transactionId after.
func partitionOf(m queengate.Delivery) string {
	p, _, _ := strings.Cut(m.TransactionID, "-")
	return p
}

// meeting lets handlers of distinct partitions wait until k of them are
// inside at once, and catches two handlers of one partition at once.
type meeting struct {
	t      *testing.T
	k      int
	mu     sync.Mutex
	inside map[string]bool
	met    chan struct{}
	once   sync.Once
}

func newMeeting(t *testing.T, k int) *meeting {
	return &meeting{t: t, k: k, inside: map[string]bool{}, met: make(chan struct{})}
}

// enter marks p's handler inside; leave marks it out.
func (mt *meeting) enter(p string) {
	mt.mu.Lock()
	defer mt.mu.Unlock()
	if mt.inside[p] {
		mt.t.Errorf("two handlers of partition %s at once", p)
	}
	mt.inside[p] = true
	if len(mt.inside) >= mt.k {
		mt.once.Do(func() { close(mt.met) })
	}
}

func (mt *meeting) leave(p string) {
	mt.mu.Lock()
	defer mt.mu.Unlock()
	delete(mt.inside, p)
}

// await waits until k partitions were inside at once; a consumer that
// handles fewer at once never gets there (the bound only ends a failing
// test).
func (mt *meeting) await(ctx context.Context) {
	select {
	case <-mt.met:
	case <-ctx.Done():
	case <-time.After(time.Minute):
		mt.t.Errorf("%d partitions were never handled at once", mt.k)
	}
}

// With Concurrency 4, four partitions are handled at once (their first
// handlers wait until three are inside together), a partition's handler
// never runs twice at once, and each partition's messages come in
// offset order, each once; PartitionOf names each one's partition.
func TestConsumeHandlesPartitionsAtOnceEachInOrder(t *testing.T) {
	t.Parallel()
	r := gatewaytest.Start(t, "")
	parts := []string{"p1", "p2", "p3", "p4"}
	pushTo(t, r, 12, parts...)
	mt := newMeeting(t, 3)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	var mu sync.Mutex
	seen := map[string][]int64{}
	total := 0
	err := consumer.Run(ctx, r.Client, r.Queue, "g", consumer.Options{Concurrency: 4, Max: 4, Wait: time.Second},
		func(hctx context.Context, m queengate.Delivery) error {
			p := partitionOf(m)
			if got := consumer.PartitionOf(hctx); got != p {
				t.Errorf("PartitionOf in the handler of %s: %q", m.TransactionID, got)
			}
			mt.enter(p)
			defer mt.leave(p)
			if m.Offset == 0 {
				mt.await(hctx)
			}
			mu.Lock()
			defer mu.Unlock()
			seen[p] = append(seen[p], m.Offset)
			if total++; total == 12*len(parts) {
				cancel()
			}
			return nil
		})
	if !errors.Is(err, context.Canceled) {
		t.Fatal(err)
	}
	want := []int64{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11}
	for _, p := range parts {
		if !slices.Equal(seen[p], want) {
			t.Errorf("partition %s handled offsets %v, want %v", p, seen[p], want)
		}
	}
	checkLag(t, r, 0)
}

// Drain stops popping and lets the batches in hand finish: each is
// handled to its end and acknowledged, Run returns nil, and nothing else
// was delivered (the rest of each partition comes next, first attempt).
func TestDrainFinishesBatchesInHand(t *testing.T) {
	t.Parallel()
	r := gatewaytest.Start(t, "")
	pushTo(t, r, 10, "p1", "p2")
	mt := newMeeting(t, 2)
	release := make(chan struct{})
	var mu sync.Mutex
	var handled []string
	cs := consumer.New(r.Client, r.Queue, "g", consumer.Options{Concurrency: 2, Max: 5, Wait: time.Second},
		func(hctx context.Context, m queengate.Delivery) error {
			p := partitionOf(m)
			if m.Offset == 0 {
				mt.enter(p)
				mt.await(hctx)
				<-release
			}
			mu.Lock()
			defer mu.Unlock()
			handled = append(handled, m.TransactionID)
			return nil
		})
	ran := make(chan error, 1)
	go func() { ran <- cs.Run(t.Context()) }()
	<-mt.met
	drained := make(chan error, 1)
	go func() { drained <- cs.Drain(t.Context()) }()
	checkfor.Check(t, 10*time.Second, checkfor.Cond("the drain to begin", cs.DrainBegun))
	close(release)
	if err := <-drained; err != nil {
		t.Fatalf("drain: %v", err)
	}
	if err := <-ran; err != nil {
		t.Fatalf("run after a drain: %v", err)
	}
	slices.Sort(handled)
	if want := []string{"p1-0", "p1-1", "p1-2", "p1-3", "p1-4", "p2-0", "p2-1", "p2-2", "p2-3", "p2-4"}; !slices.Equal(handled, want) {
		t.Fatalf("handled %v, want the two batches in hand whole", handled)
	}
	checkLag(t, r, 10)
	for _, p := range []string{"p1", "p2"} {
		a, err := r.Client.Pop(t.Context(), r.Queue, p, queengate.PopRequest{Group: "g", Max: 10})
		if err != nil || len(a.Messages) != 5 || a.Messages[0].Offset != 5 || a.Messages[0].Attempts != 1 {
			t.Errorf("the rest of %s: %+v, %v; want offsets 5 to 9, never delivered", p, a, err)
		}
	}
}

// A drain whose context ends first stops the handlers (their context
// ends): what was handled is acknowledged, the message being handled and
// the rest are released at once, not failed.
func TestDrainPastItsDeadlineReleasesWhatIsNotHandled(t *testing.T) {
	t.Parallel()
	r := gatewaytest.Start(t, "")
	pushN(t, r, 5)
	blocked := make(chan struct{})
	cs := consumer.New(r.Client, r.Queue, "g", consumer.Options{Max: 5, Wait: time.Second},
		func(hctx context.Context, m queengate.Delivery) error {
			if m.Offset == 2 {
				close(blocked)
				<-hctx.Done()
				return hctx.Err()
			}
			return nil
		})
	ran := make(chan error, 1)
	go func() { ran <- cs.Run(t.Context()) }()
	<-blocked
	drainCtx, endDrain := context.WithCancel(t.Context())
	drained := make(chan error, 1)
	go func() { drained <- cs.Drain(drainCtx) }()
	checkfor.Check(t, 10*time.Second, checkfor.Cond("the drain to begin", cs.DrainBegun))
	endDrain()
	if err := <-drained; !errors.Is(err, context.Canceled) {
		t.Fatalf("a drain cut short: %v, want its context's error", err)
	}
	if err := <-ran; err != nil {
		t.Fatalf("run: %v", err)
	}
	checkRestFromM2(t, r)
}

// A handler's Retry fails its message with delayMs on the ack item;
// Run's pops carry its maxBytes and maxAckPending. Read off the wire
// (a second subscriber to the pop subject).
func TestConsumeSendsRetryDelayMaxBytesAndMaxAckPending(t *testing.T) {
	t.Parallel()
	r := gatewaytest.Start(t, "")
	pushN(t, r, 2)
	pops := make(chan *nats.Msg, 64)
	sniffer := r.ClientConn(t)
	sub, err := sniffer.ChanSubscribe(queengate.Subjects{Prefix: "queen"}.Pop(r.Queue, "p"), pops)
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Unsubscribe()
	if err := sniffer.Flush(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	consumed := make(chan error, 1)
	go func() {
		consumed <- consumer.Run(ctx, r.Client, r.Queue, "g", consumer.Options{Partition: "p", Consumer: "c", MaxBytes: 4096,
			MaxAckPending: 50, Wait: time.Second},
			func(_ context.Context, m queengate.Delivery) error {
				if m.TransactionID == "m1" {
					return consumer.Retry(errors.New("not yet"), 1500*time.Millisecond)
				}
				return nil
			})
	}()
	var first queengate.PopRequest
	for req := range pops {
		var pop queengate.PopRequest
		if err := json.Unmarshal(req.Data, &pop); err != nil {
			t.Fatal(err)
		}
		if first.Group == "" {
			first = pop
		}
		if pop.Ack != nil {
			want := []queengate.AckItem{{Offset: ptr(int64(0)), Status: "completed"},
				{Offset: ptr(int64(1)), Status: "failed", Error: "not yet", DelayMs: 1500}}
			if !slices.EqualFunc(pop.Ack.Items, want, sameItem) {
				t.Errorf("the ack sent: %s", req.Data)
			}
			break
		}
	}
	if first.MaxBytes != 4096 || first.MaxAckPending != 50 || first.Consumer != "c" {
		t.Errorf("the first pop: %+v; want maxBytes 4096 and maxAckPending 50 for consumer c", first)
	}
	cancel()
	<-consumed // the ack's fate is the gateway's: delayMs is read there
}

func ptr[T any](v T) *T { return &v }

func sameItem(a, b queengate.AckItem) bool {
	return *a.Offset == *b.Offset && a.Status == b.Status && a.Error == b.Error && a.DelayMs == b.DelayMs
}

// A handler's Retry reaches the gateway: the message it failed is held
// for its group for the delay asked, and no other group waits.
func TestARetryDelayHoldsTheMessageForItsGroup(t *testing.T) {
	t.Parallel()
	r := gatewaytest.Start(t, "")
	pushN(t, r, 1)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	acked := make(chan queengate.AckAnswer, 1)
	consumed := make(chan error, 1)
	go func() {
		consumed <- consumer.Run(ctx, r.Client, r.Queue, "g", consumer.Options{Partition: "p", Wait: time.Second,
			OnAck: func(_ string, a queengate.AckAnswer) { acked <- a }},
			func(context.Context, queengate.Delivery) error {
				return consumer.Retry(errors.New("later"), time.Hour)
			})
	}()
	select {
	case a := <-acked:
		if len(a.Items) != 1 || a.Items[0].Result != "acked" {
			t.Fatalf("the failure's ack: %+v", a)
		}
	case err := <-consumed:
		t.Fatalf("Run returned before its first ack: %v", err)
	}
	cancel()
	<-consumed
	held, err := r.Client.Pop(t.Context(), r.Queue, "p", queengate.PopRequest{Group: "g"})
	if err != nil || len(held.Messages) != 0 {
		t.Fatalf("a pop of the failing group within the hour: %+v, %v; want nothing", held, err)
	}
	other, err := r.Client.Pop(t.Context(), r.Queue, "p", queengate.PopRequest{Group: "other"})
	if err != nil || len(other.Messages) != 1 {
		t.Fatalf("a pop of another group: %+v, %v; want the message", other, err)
	}
}

// With MaxMessages, Run stops once that many are handled, over
// several partitions and workers, and delivers none beyond them: what is
// left comes next at its first attempt.
func TestConsumeStopsAtMaxMessagesDeliveringNoneBeyond(t *testing.T) {
	t.Parallel()
	r := gatewaytest.Start(t, "")
	pushTo(t, r, 3, "p1", "p2", "p3")
	var mu sync.Mutex
	handled := 0
	err := consumer.Run(t.Context(), r.Client, r.Queue, "g", consumer.Options{MaxMessages: 5, Concurrency: 2, Max: 10, Wait: time.Second},
		func(context.Context, queengate.Delivery) error {
			mu.Lock()
			defer mu.Unlock()
			handled++
			return nil
		})
	if err != nil || handled != 5 {
		t.Fatalf("Run with MaxMessages 5: %v, %d handled", err, handled)
	}
	checkLag(t, r, 4)
	for range 4 {
		a, err := r.Client.Pop(t.Context(), r.Queue, "", queengate.PopRequest{Group: "g", Max: 10})
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range a.Messages {
			if m.Attempts != 1 {
				t.Errorf("%s after Run stopped: attempt %d, want 1 (delivered beyond MaxMessages)", m.TransactionID, m.Attempts)
			}
		}
	}
}
