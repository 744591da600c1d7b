package ingest

import (
	"fmt"
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

// TestAFailedPushNamesItsTraceIDs: the trace ids a failed push's log line
// names are those of its messages with a traceparent header, at most
// maxLoggedTraces.
func TestAFailedPushNamesItsTraceIDs(t *testing.T) {
	traced := func(i int) []byte {
		return model.AppendMeta(nil, []model.Header{{Name: "traceparent",
			Values: []string{fmt.Sprintf("00-%032x-00f067aa0ba902b7-01", i)}}}, false)
	}
	s := &sent{frames: []model.Frame{
		{Meta: [][]byte{traced(1), nil, model.AppendMeta(nil, nil, true)}},
		{},
		{Meta: [][]byte{traced(2)}},
	}}
	if got := s.traceIDs(); len(got) != 2 || got[0] != fmt.Sprintf("%032x", 1) || got[1] != fmt.Sprintf("%032x", 2) {
		t.Errorf("trace ids %v, want those of the two traced messages", got)
	}
	many := &sent{frames: []model.Frame{{}}}
	for i := range 2 * maxLoggedTraces {
		many.frames[0].Meta = append(many.frames[0].Meta, traced(i))
	}
	if got := many.traceIDs(); len(got) != maxLoggedTraces {
		t.Errorf("%d trace ids named, want at most %d", len(got), maxLoggedTraces)
	}
}
