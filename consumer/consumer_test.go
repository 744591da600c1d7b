package consumer_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	queengate "github.com/queengate/queengate"
	"github.com/queengate/queengate/consumer"
	"github.com/queengate/queengate/internal/checkfor"
	"github.com/queengate/queengate/internal/gatewaytest"
	"github.com/queengate/queengate/internal/pgtest"
)

// consumerChildEnv makes the test binary a consumer process (for the
// kill -9 test): "<nats url> <queue> <group>".
const consumerChildEnv = "QUEENGATE_TEST_CONSUMER"

func TestMain(m *testing.M) {
	if os.Getenv(consumerChildEnv) != "" {
		os.Exit(runConsumerChild())
	}
	pgtest.Run(m)
}

func msg(id, data string) queengate.Message {
	return queengate.Message{TransactionID: id, Data: json.RawMessage(data)}
}

// runConsumerChild consumes in batches of 10, printing "handling <id>"
// before handling each message; it hangs on the third message of its
// first batch, for its parent to kill it there.
func runConsumerChild() int {
	args := strings.Fields(os.Getenv(consumerChildEnv))
	nc, err := nats.Connect(args[0])
	if err != nil {
		fmt.Println("error", err)
		return 1
	}
	c, err := queengate.NewClient(nc)
	if err != nil {
		fmt.Println("error", err)
		return 1
	}
	handled := 0
	err = consumer.Run(context.Background(), c, args[1], args[2], consumer.Options{Max: 10, Consumer: "doomed"},
		func(_ context.Context, m queengate.Delivery) error {
			fmt.Println("handling", m.TransactionID)
			if handled++; handled == 3 {
				select {} // killed here, mid-batch
			}
			return nil
		})
	fmt.Println("error", err)
	return 1
}

func pushN(t *testing.T, r *gatewaytest.Running, n int) {
	t.Helper()
	var msgs []queengate.Message
	for i := range n {
		msgs = append(msgs, msg(fmt.Sprint("m", i), fmt.Sprint(i)))
	}
	if _, err := r.Client.Push(t.Context(), r.Queue, "p", msgs...); err != nil {
		t.Fatal(err)
	}
}

// A consumer process killed with SIGKILL in the middle of a batch loses
// nothing: its lease runs out, and another consumer of the group gets the
// unacknowledged messages again, one attempt further (the renewal on
// receipt confirmed the delivery), then the rest.
func TestAKilledConsumerLosesNothing(t *testing.T) {
	t.Parallel()
	r := gatewaytest.Start(t, "")
	pushN(t, r, 25)
	child := exec.Command(os.Args[0], "-test.run=^$")
	child.Env = append(os.Environ(), consumerChildEnv+"="+r.URL+" "+r.Queue+" g")
	out, err := child.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := child.Start(); err != nil {
		t.Fatal(err)
	}
	lines := bufio.NewScanner(out)
	for n := 0; n < 3 && lines.Scan(); {
		if strings.HasPrefix(lines.Text(), "handling") {
			n++
		}
	}
	// Run renews a batch's lease at once on receipt: the delivery is
	// confirmed, so the kill costs the batch an attempt.
	checkfor.Check(t, 10*time.Second, func() error {
		var heard bool
		err := r.Store.Pool().QueryRow(t.Context(), `SELECT c.lease_heard FROM queen.consumer_cursors c
			JOIN queen.consumer_groups g ON g.id = c.group_id JOIN queen.queues q ON q.id = g.queue_id
			WHERE q.name = $1`, r.Queue).Scan(&heard)
		if err == nil && !heard {
			err = errors.New("the batch's lease is not heard from yet")
		}
		return err
	})
	if err := child.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = child.Wait()

	// Nothing of the batch was acknowledged, and the lease holds it.
	groups, err := r.Client.Groups(t.Context(), r.Queue)
	if err != nil || len(groups.Groups) != 1 || groups.Groups[0].Lag != 25 || groups.Groups[0].Partitions[0].LeaseConsumer != "doomed" {
		t.Fatalf("after the kill: %+v, %v", groups, err)
	}
	// Its lease runs out (backdated, not waited for).
	if _, err := r.Store.Pool().Exec(t.Context(), `UPDATE queen.consumer_cursors c SET lease_until = now() - interval '1 second'
		FROM queen.consumer_groups g JOIN queen.queues q ON q.id = g.queue_id
		WHERE c.group_id = g.id AND q.name = $1`, r.Queue); err != nil {
		t.Fatal(err)
	}
	var (
		mu       sync.Mutex
		attempts = map[string]int{}
	)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	err = consumer.Run(ctx, r.Client, r.Queue, "g", consumer.Options{Max: 10, Wait: 200 * time.Millisecond},
		func(_ context.Context, m queengate.Delivery) error {
			mu.Lock()
			defer mu.Unlock()
			attempts[m.TransactionID] = m.Attempts
			if len(attempts) == 25 {
				cancel()
			}
			return nil
		})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("consume: %v", err)
	}
	for i := range 25 {
		want := 1
		if i < 10 {
			want = 2 // the killed batch
		}
		if got := attempts[fmt.Sprint("m", i)]; got != want {
			t.Errorf("m%d delivered with attempt %d, want %d", i, got, want)
		}
	}
	checkLag(t, r, 0)
}

func checkLag(t *testing.T, r *gatewaytest.Running, want int64) {
	t.Helper()
	groups, err := r.Client.Groups(context.Background(), r.Queue)
	if err != nil || groups.Groups[0].Lag != want {
		t.Errorf("groups: %+v, %v; want lag %d", groups, err, want)
	}
}

// checkRestFromM2: after a Run stopped two messages into five (m0, m1
// done), the other three are left, and a pop gets them at once, from m2,
// never failed: what Run had taken and not handled went back untouched.
func checkRestFromM2(t *testing.T, r *gatewaytest.Running) {
	t.Helper()
	checkLag(t, r, 3)
	a, err := r.Client.Pop(t.Context(), r.Queue, "p", queengate.PopRequest{Group: "g", Max: 5})
	if err != nil || len(a.Messages) != 3 || a.Messages[0].TransactionID != "m2" || a.Messages[0].LastError != "" {
		t.Fatalf("the rest, popped at once: %+v, %v", a, err)
	}
}

// Run completes what its handler returns nil for and fails the rest,
// which come back with their error and attempts, and are dead-lettered
// at maxAttempts.
func TestConsumeFailsWhatTheHandlerRefuses(t *testing.T) {
	t.Parallel()
	r := gatewaytest.Start(t, "")
	attempts := 2
	if _, err := r.Client.Configure(t.Context(), queengate.ConfigureRequest{Queue: r.Queue, Options: map[string]int64{"maxAttempts": int64(attempts)}}); err != nil {
		t.Fatal(err)
	}
	pushN(t, r, 3)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	var seen []string
	err := consumer.Run(ctx, r.Client, r.Queue, "g", consumer.Options{Wait: 200 * time.Millisecond},
		func(_ context.Context, m queengate.Delivery) error {
			seen = append(seen, fmt.Sprintf("%s#%d%s", m.TransactionID, m.Attempts, m.LastError))
			if len(seen) == 4 {
				cancel() // the batch is still acknowledged
			}
			if m.TransactionID == "m1" {
				return errors.New("poison")
			}
			return nil
		})
	if !errors.Is(err, context.Canceled) {
		t.Fatal(err)
	}
	if want := []string{"m0#1", "m1#1", "m2#1", "m1#2poison"}; !slices.Equal(seen, want) {
		t.Fatalf("handled %v, want %v", seen, want)
	}
	checkLag(t, r, 0) // m1 went to the dead-letter queue at its second failure
	dlq, err := r.Client.Read(t.Context(), r.Queue+"-dlq", "p", queengate.ReadRequest{})
	if err != nil || len(dlq.Messages) != 1 || !strings.Contains(string(dlq.Messages[0].Data), `"transactionId":"m1"`) {
		t.Fatalf("dead-letter queue: %+v, %v", dlq, err)
	}
}

// Stopping Run midway fails nothing: the handled messages are
// acknowledged, the rest go back to the group at once, without an error.
func TestStoppingConsumeFailsNothing(t *testing.T) {
	t.Parallel()
	r := gatewaytest.Start(t, "")
	pushN(t, r, 5)
	ctx, cancel := context.WithCancel(t.Context())
	handled := 0
	err := consumer.Run(ctx, r.Client, r.Queue, "g", consumer.Options{Max: 5, Wait: 200 * time.Millisecond},
		func(context.Context, queengate.Delivery) error {
			if handled++; handled == 2 {
				cancel()
			}
			return nil
		})
	if !errors.Is(err, context.Canceled) || handled != 2 {
		t.Fatalf("consume: %v after %d messages", err, handled)
	}
	checkRestFromM2(t, r)
}

// A lease Run could not renew in time is refused before anything is
// popped: no group is created.
func TestConsumeRefusesALeaseTooShortToRenew(t *testing.T) {
	t.Parallel()
	r := gatewaytest.Start(t, "")
	pushN(t, r, 1)
	err := consumer.Run(t.Context(), r.Client, r.Queue, "g", consumer.Options{Lease: 50 * time.Millisecond},
		func(context.Context, queengate.Delivery) error { return nil })
	if !errors.Is(err, consumer.ErrLeaseTooShort) {
		t.Fatalf("consume with a 50 ms lease: %v, want ErrLeaseTooShort", err)
	}
	if groups, err := r.Client.Groups(t.Context(), r.Queue); err != nil || len(groups.Groups) != 0 {
		t.Errorf("groups after the refusal: %+v, %v; want none (nothing popped)", groups, err)
	}
}

// leaseOf reads the lease a group holds on the queue's partition.
func leaseOf(t *testing.T, r *gatewaytest.Running, group string) string {
	t.Helper()
	var lease string
	if err := r.Store.Pool().QueryRow(t.Context(), `SELECT c.lease_id::text FROM queen.consumer_cursors c
		JOIN queen.consumer_groups g ON g.id = c.group_id JOIN queen.queues q ON q.id = g.queue_id
		WHERE q.name = $1 AND g.name = $2 AND c.lease_id IS NOT NULL`, r.Queue, group).Scan(&lease); err != nil {
		t.Fatal(err)
	}
	return lease
}

// A lease lost while its batch is handled (released by another client)
// reaches the caller: the ack's leaseNotHeld results go to OnAck, and
// OnError hears of the unsettled messages.
func TestConsumeReportsALeaseLostMidBatch(t *testing.T) {
	t.Parallel()
	r := gatewaytest.Start(t, "")
	pushN(t, r, 3)
	other, err := queengate.NewClient(r.ClientConn(t))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	var (
		mu        sync.Mutex
		results   []string
		unsettled *consumer.UnsettledError
		released  bool
	)
	opts := consumer.Options{Max: 3, Wait: 200 * time.Millisecond,
		OnAck: func(partition string, a queengate.AckAnswer) {
			for _, it := range a.Items {
				results = append(results, fmt.Sprintf("%s/%d:%s", partition, *it.Offset, it.Result))
			}
			cancel()
		},
		OnError: func(err error) {
			mu.Lock()
			defer mu.Unlock()
			errors.As(err, &unsettled)
		}}
	err = consumer.Run(ctx, r.Client, r.Queue, "g", opts, func(context.Context, queengate.Delivery) error {
		if !released {
			released = true
			if _, err := other.Release(t.Context(), r.Queue, "p", queengate.LeaseRequest{Group: "g", LeaseID: leaseOf(t, r, "g")}); err != nil {
				t.Error(err)
			}
		}
		return nil
	})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("consume: %v", err)
	}
	if want := []string{"p/0:leaseNotHeld", "p/1:leaseNotHeld", "p/2:leaseNotHeld"}; !slices.Equal(results, want) {
		t.Errorf("ack results %v, want %v", results, want)
	}
	mu.Lock()
	defer mu.Unlock()
	if unsettled == nil || unsettled.Partition != "p" || len(unsettled.Items) != 3 {
		t.Errorf("OnError heard %+v, want the 3 unsettled messages of p", unsettled)
	}
}

// Pops that keep failing (the gateway stopped, then one that never
// answers) are reported to OnError each time, and Run returns after
// MaxPopFailures of them, each pop bounded by the client's timeout even
// under a context with a distant deadline.
func TestConsumeReportsPopsThatKeepFailing(t *testing.T) {
	t.Parallel()
	r := gatewaytest.Start(t, "")
	pushN(t, r, 1) // within the default timeout: a first push makes the queue
	r.StopGateway()
	// Pops that fail fast: no gateway answers them.
	short, err := queengate.NewClient(r.ClientConn(t), queengate.WithTimeout(200*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(short.Close)
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	var reported []error
	err = consumer.Run(ctx, short, r.Queue, "g", consumer.Options{MaxPopFailures: 3, OnError: func(err error) { reported = append(reported, err) }},
		func(context.Context, queengate.Delivery) error { return nil })
	if !errors.Is(err, nats.ErrNoResponders) || ctx.Err() != nil {
		t.Fatalf("consume with no gateway: %v, want the third pop's failure (no responders)", err)
	}
	if len(reported) != 2 || !errors.Is(reported[0], nats.ErrNoResponders) || !errors.Is(reported[1], nats.ErrNoResponders) {
		t.Errorf("OnError heard %v, want the first two failures", reported)
	}

	mute := r.ClientConn(t)
	if _, err := mute.Subscribe(r.Client.Subjects().Pop(r.Queue, ""), func(*nats.Msg) {}); err != nil {
		t.Fatal(err)
	}
	if err := mute.Flush(); err != nil {
		t.Fatal(err)
	}
	err = consumer.Run(ctx, short, r.Queue, "g", consumer.Options{MaxPopFailures: 2, Wait: time.Millisecond},
		func(context.Context, queengate.Delivery) error { return nil })
	if !errors.Is(err, context.DeadlineExceeded) || ctx.Err() != nil {
		t.Fatalf("consume with a gateway that never answers: %v, want the second pop's timeout", err)
	}
}

// Run renews each popped batch's lease at once, while the handler
// starts: that renewal confirms the delivery. The lease is an hour, so no
// renewal is due by the clock.
func TestConsumeRenewsEachBatchAtOnce(t *testing.T) {
	t.Parallel()
	r := gatewaytest.Start(t, "")
	pushN(t, r, 1)
	var renewals atomic.Int32
	watcher := r.ClientConn(t)
	if _, err := watcher.Subscribe(r.Client.Subjects().Renew(r.Queue, "p"), func(*nats.Msg) { renewals.Add(1) }); err != nil {
		t.Fatal(err)
	}
	if err := watcher.Flush(); err != nil { // subscribed before the first pop
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	err := consumer.Run(ctx, r.Client, r.Queue, "g", consumer.Options{Lease: time.Hour},
		func(context.Context, queengate.Delivery) error {
			checkfor.Check(t, 10*time.Second, checkfor.Cond("a renewal of the batch's lease", func() bool { return renewals.Load() > 0 }))
			cancel()
			return nil
		})
	if !errors.Is(err, context.Canceled) {
		t.Fatal(err)
	}
	checkLag(t, r, 0)
}

// OnIdle hears each pop whose wait ended with nothing to consume, and
// only those: a consumer can say it is waiting rather than stay silent.
func TestConsumeSaysWhenThereIsNothingYet(t *testing.T) {
	t.Parallel()
	r := gatewaytest.Start(t, "")
	if _, err := r.Client.Configure(t.Context(), queengate.ConfigureRequest{Queue: r.Queue}); err != nil {
		t.Fatal(err)
	}
	var idle atomic.Int32
	idleAtMessage := int32(-1)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	done := make(chan error, 1)
	go func() {
		done <- consumer.Run(ctx, r.Client, r.Queue, "g", consumer.Options{Wait: 100 * time.Millisecond,
			OnIdle: func() {
				if idle.Add(1) == 1 {
					pushN(t, r, 1) // something arrives after the first empty wait
				}
			}},
			func(context.Context, queengate.Delivery) error {
				idleAtMessage = idle.Load()
				cancel()
				return nil
			})
	}()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatal(err)
	}
	if idleAtMessage < 1 {
		t.Fatalf("the message was handled after %d empty pops; want OnIdle called before it arrived", idleAtMessage)
	}
	if n := idle.Load(); n != idleAtMessage {
		t.Errorf("OnIdle called %d times, %d of them after the message; want none after (the pop that brought it was not empty)", n, n-idleAtMessage)
	}
}
