package sidebyside

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/queengate/queengate"
	"github.com/queengate/queengate/internal/bench"
	"github.com/queengate/queengate/internal/bench/proc"
)

// readerRole is the reader the read scenario runs beside the pushes, in
// a process of its own: in one process with the producers, its decoding
// took the Go scheduler the producers' answers wait on, and the push
// latency measured was partly the load generator's own (p99 about twice
// what it is with the reader apart). A reader is another program in any
// deployment.
const readerRole = "reader"

// readerEnv holds the reader's task (readerTask, as JSON).
const readerEnv = "QUEENBENCH_READER"

func init() { proc.AddRole(readerRole, playReader) }

// readerTask is what the reader reads: the queue's partitions p0..pN-1,
// holding Total messages, through the gateways at NATSURL.
type readerTask struct {
	NATSURL, Prefix, Queue string
	Partitions             int
	Total                  int64
}

// playReader reads the task's partitions over and over until ctx ends,
// and says how many messages it read in how long (readerSaid).
func playReader(ctx context.Context, announce func(string) error) (string, error) {
	var task readerTask
	if err := json.Unmarshal([]byte(os.Getenv(readerEnv)), &task); err != nil {
		return "", fmt.Errorf("%s: %w", readerEnv, err)
	}
	nc, err := nats.Connect(task.NATSURL, nats.Name("queenbench-reader"))
	if err != nil {
		return "", err
	}
	defer nc.Close()
	c, err := queengate.NewClient(nc, queengate.WithPrefix(task.Prefix), queengate.WithTimeout(time.Minute))
	if err != nil {
		return "", err
	}
	defer c.Close()
	if err := announce(task.Queue); err != nil {
		return "", err
	}
	w := bench.Workload{Partitions: task.Partitions, Total: task.Total}
	var n int64
	start := time.Now()
	for ctx.Err() == nil {
		r, err := readQueengate(ctx, c, task.Queue, w)
		n += r.Messages
		if err != nil && ctx.Err() == nil {
			return "", err
		}
	}
	return fmt.Sprint(n, " ", time.Since(start).Nanoseconds()), nil
}

// startReader starts the reader role on queue's partitions.
func startReader(ctx context.Context, task readerTask) (*proc.Child, error) {
	b, err := json.Marshal(task)
	if err != nil {
		return nil, err
	}
	return proc.StartRole(ctx, readerRole, readerEnv+"="+string(b))
}

// readerRate stops the reader and returns how many messages a second it
// read.
func readerRate(c *proc.Child) (float64, error) {
	if err := c.Stop(); err != nil {
		return 0, err
	}
	var n, ns int64
	if _, err := fmt.Sscan(c.Said(), &n, &ns); err != nil || ns <= 0 {
		return 0, fmt.Errorf("reader said %q: want messages and nanoseconds", c.Said())
	}
	return float64(n) / time.Duration(ns).Seconds(), nil
}
