package queengate_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	queengate "github.com/queengate/queengate"
)

// consumerChildEnv makes the test binary a consumer process (for the
// kill -9 test): "<nats url> <queue> <group>".
const consumerChildEnv = "QUEENGATE_TEST_CONSUMER"

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
	err = c.Consume(context.Background(), args[1], args[2], queengate.ConsumeOptions{Max: 10, Consumer: "doomed"},
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

func pushN(t *testing.T, r *running, n int) {
	t.Helper()
	var msgs []queengate.Message
	for i := range n {
		msgs = append(msgs, msg(fmt.Sprint("m", i), fmt.Sprint(i)))
	}
	if _, err := r.client.Push(t.Context(), r.queue, "p", msgs...); err != nil {
		t.Fatal(err)
	}
}

// A consumer process killed with SIGKILL in the middle of a batch loses
// nothing: its lease runs out, and another consumer of the group gets the
// unacknowledged messages again, one attempt further, then the rest.
func TestAKilledConsumerLosesNothing(t *testing.T) {
	t.Parallel()
	r := startGateway(t, "")
	pushN(t, r, 25)
	child := exec.Command(os.Args[0], "-test.run=^$")
	child.Env = append(os.Environ(), consumerChildEnv+"="+r.url+" "+r.queue+" g")
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
	if err := child.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = child.Wait()

	// Nothing of the batch was acknowledged, and the lease holds it.
	groups, err := r.client.Groups(t.Context(), r.queue)
	if err != nil || len(groups.Groups) != 1 || groups.Groups[0].Lag != 25 || groups.Groups[0].Partitions[0].LeaseConsumer != "doomed" {
		t.Fatalf("after the kill: %+v, %v", groups, err)
	}
	// Its lease runs out (backdated, not waited for).
	if _, err := r.store.Pool().Exec(t.Context(), `UPDATE queen.consumer_cursors c SET lease_until = now() - interval '1 second'
		FROM queen.consumer_groups g JOIN queen.queues q ON q.id = g.queue_id
		WHERE c.group_id = g.id AND q.name = $1`, r.queue); err != nil {
		t.Fatal(err)
	}
	var (
		mu       sync.Mutex
		attempts = map[string]int{}
	)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	err = r.client.Consume(ctx, r.queue, "g", queengate.ConsumeOptions{Max: 10, Wait: 200 * time.Millisecond},
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

func checkLag(t *testing.T, r *running, want int64) {
	t.Helper()
	groups, err := r.client.Groups(context.Background(), r.queue)
	if err != nil || groups.Groups[0].Lag != want {
		t.Errorf("groups: %+v, %v; want lag %d", groups, err, want)
	}
}

// Consume completes what its handler returns nil for and fails the rest,
// which come back with their error and attempts, and are dead-lettered
// at maxAttempts.
func TestConsumeFailsWhatTheHandlerRefuses(t *testing.T) {
	t.Parallel()
	r := startGateway(t, "")
	attempts := 2
	if _, err := r.client.Configure(t.Context(), queengate.ConfigureRequest{Queue: r.queue, Options: map[string]int64{"maxAttempts": int64(attempts)}}); err != nil {
		t.Fatal(err)
	}
	pushN(t, r, 3)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	var seen []string
	err := r.client.Consume(ctx, r.queue, "g", queengate.ConsumeOptions{Wait: 200 * time.Millisecond},
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
	dlq, err := r.client.Read(t.Context(), r.queue+"-dlq", "p", queengate.ReadRequest{})
	if err != nil || len(dlq.Messages) != 1 || !strings.Contains(string(dlq.Messages[0].Data), `"transactionId":"m1"`) {
		t.Fatalf("dead-letter queue: %+v, %v", dlq, err)
	}
}

// Stopping Consume midway fails nothing: the handled messages are
// acknowledged, the rest go back to the group at once, without an error.
func TestStoppingConsumeFailsNothing(t *testing.T) {
	t.Parallel()
	r := startGateway(t, "")
	pushN(t, r, 5)
	ctx, cancel := context.WithCancel(t.Context())
	handled := 0
	err := r.client.Consume(ctx, r.queue, "g", queengate.ConsumeOptions{Max: 5, Wait: 200 * time.Millisecond},
		func(context.Context, queengate.Delivery) error {
			if handled++; handled == 2 {
				cancel()
			}
			return nil
		})
	if !errors.Is(err, context.Canceled) || handled != 2 {
		t.Fatalf("consume: %v after %d messages", err, handled)
	}
	checkLag(t, r, 3)
	a, err := r.client.Pop(t.Context(), r.queue, "p", queengate.PopRequest{Group: "g", Max: 5})
	if err != nil || len(a.Messages) != 3 || a.Messages[0].TransactionID != "m2" || a.Messages[0].LastError != "" {
		t.Fatalf("the rest, popped at once: %+v, %v", a, err)
	}
}
