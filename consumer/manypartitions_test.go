package consumer_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	queengate "github.com/queengate/queengate"
	"github.com/queengate/queengate/consumer"
	"github.com/queengate/queengate/internal/gatewaytest"
)

// pushToMany pushes n messages to each of parts partitions p0, p1, …,
// from several goroutines at once.
func pushToMany(t *testing.T, r *gatewaytest.Running, n, parts int) {
	t.Helper()
	var wg sync.WaitGroup
	next := make(chan int)
	for range 32 {
		wg.Go(func() {
			for i := range next {
				p := fmt.Sprint("p", i)
				var msgs []queengate.Message
				for k := range n {
					msgs = append(msgs, msg(fmt.Sprintf("%s-%d", p, k), fmt.Sprint(k)))
				}
				if _, err := r.Client.Push(t.Context(), r.Queue, p, msgs...); err != nil {
					t.Error(err)
				}
			}
		})
	}
	for i := range parts {
		next <- i
	}
	close(next)
	wg.Wait()
	if t.Failed() {
		t.FailNow()
	}
}

// Run consumes a queue of 10,000 partitions of two messages each with
// its default pops over several partitions: every message is handled
// once, each partition's in offset order, and the group is left with no
// lag.
func TestConsumeTenThousandPartitionsExactlyOnce(t *testing.T) {
	if testing.Short() {
		t.Skip("10,000 partitions")
	}
	t.Parallel()
	const parts, per = 10000, 2
	r := gatewaytest.Start(t, "")
	pushToMany(t, r, per, parts)
	var mu sync.Mutex
	handled := map[string]int{}
	next := map[string]int64{} // per partition, the offset due next
	err := consumer.Run(t.Context(), r.Client, r.Queue, "g",
		consumer.Options{Concurrency: 4, Max: 100, Wait: time.Second, MaxMessages: parts * per},
		func(_ context.Context, m queengate.Delivery) error {
			mu.Lock()
			defer mu.Unlock()
			p := partitionOf(m)
			if m.Offset != next[p] {
				t.Errorf("partition %s: offset %d handled when %d was due", p, m.Offset, next[p])
			}
			next[p] = m.Offset + 1
			handled[m.TransactionID]++
			return nil
		})
	if err != nil {
		t.Fatal(err)
	}
	for id, n := range handled {
		if n != 1 {
			t.Errorf("%s handled %d times", id, n)
		}
	}
	if len(handled) != parts*per {
		t.Errorf("%d messages handled, want %d", len(handled), parts*per)
	}
	checkLag(t, r, 0)
}
