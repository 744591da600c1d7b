package ingest

import (
	"sync"
	"testing"

	"github.com/queengate/queengate/model"
)

// TestTalliesCountEveryPartitionAndItsQueue: partitions counted from many
// goroutines at once, across several slabs, each keep their own counts,
// and each queue's tally is the sum of its partitions'.
func TestTalliesCountEveryPartitionAndItsQueue(t *testing.T) {
	in := &Ingester{}
	const partitions = 3*tallySlab + 17
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Go(func() {
			for pid := int64(1); pid <= partitions; pid++ {
				c := in.tallyOf(pid, pid%3)
				c.addN(model.StatusQueued, pid)
				if w == 0 {
					c.addN(model.StatusDuplicate, 1)
					c.probed(model.ProbeSkipped)
				}
			}
		})
	}
	wg.Wait()
	want := map[int64]PartitionCounts{}
	for pid := int64(1); pid <= partitions; pid++ {
		if got := in.Counts(pid); got != (PartitionCounts{Queued: 4 * pid, Duplicate: 1, ProbeSkipped: 1}) {
			t.Fatalf("partition %d: %+v, want %d queued, 1 duplicate, 1 probe skipped", pid, got, 4*pid)
		}
		q := want[pid%3]
		q.Queued, q.Duplicate, q.ProbeSkipped = q.Queued+4*pid, q.Duplicate+1, q.ProbeSkipped+1
		want[pid%3] = q
	}
	got := map[int64]PartitionCounts{}
	in.EachQueueCounts(func(queueID int64, c PartitionCounts) { got[queueID] = c })
	if len(got) != 3 || got[0] != want[0] || got[1] != want[1] || got[2] != want[2] {
		t.Errorf("queue tallies %+v, want %+v", got, want)
	}
	for q := range int64(3) {
		if c := in.QueueCounts(q); c != want[q] {
			t.Errorf("QueueCounts(%d) = %+v, want %+v", q, c, want[q])
		}
	}
	if c := in.QueueCounts(7); c != (PartitionCounts{}) {
		t.Errorf("a queue never answered: %+v, want nothing counted", c)
	}
	if c := in.tallyOf(0, 5); c.partition != nil {
		t.Error("an unresolved partition (id 0) got a tally")
	}
}
