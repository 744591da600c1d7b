package operator

import (
	"strings"

	queengate "github.com/queengate/queengate"
	"github.com/queengate/queengate/internal/wire"
)

// Every answer fits one NATS message. Answers of a known size (status,
// a configure, a timer's) fit whatever max payload a gateway runs with;
// lists that can grow with what is stored (queues, a queue's partitions
// and groups, timers) keep what fits and say they were cut; an answer
// carrying stored data is bounded by the data limit pushes are held to
// (queengate.MaxDataBytes).

// answerRoom is the room an answer keeps, within the max payload, for
// what NATS adds around it (headers).
const answerRoom = 4 << 10

// AnswerBudget is the most an operator answer may take: the NATS
// connection's max payload (1 MiB unless the server says otherwise), less
// answerRoom. HTTP answers are held to the same bound, so that both faces
// answer alike.
func (o *Ops) AnswerBudget() int {
	if o != nil && o.nc != nil && o.nc.MaxPayload() > 0 {
		return int(o.nc.MaxPayload()) - answerRoom
	}
	return 1<<20 - answerRoom
}

// fitQueues cuts a queue list to what fits budget bytes; a cut list names
// the first queue it leaves out.
func fitQueues(a *queengate.QueuesAnswer, budget int) {
	if wire.EncodedLen(a) <= budget {
		return
	}
	queues := a.Queues
	n, _ := wire.Fitting(queues, budget-wire.EncodedLen(queengate.QueuesAnswer{Count: a.Count, Truncated: true, NextQueue: maxName}))
	a.Queues = queues[:n]
	if n < len(queues) {
		a.Truncated, a.NextQueue = true, queues[n].Queue
	}
}

// fitQueue cuts a queue's answer to what fits budget bytes: first the
// groups' per-partition positions go (the groups keep their lag; a groups
// request pages them), then the groups and the partitions each keep what
// fits in their share, and a cut partition list names the first
// partition it leaves out.
func fitQueue(a *queengate.QueueAnswer, budget int) {
	if wire.EncodedLen(a) <= budget {
		return
	}
	a.Truncated = true
	dropGroupPartitions(a.Groups)
	if wire.EncodedLen(a) <= budget {
		return
	}
	partitions, groups := a.Partitions, a.Groups
	a.Partitions, a.Groups = []queengate.PartitionView{}, []queengate.GroupView{}
	a.NextPartition = maxName // bounds the name's room
	room := budget - wire.EncodedLen(a)
	a.NextPartition = ""
	n, used := wire.Fitting(groups, room/2)
	a.Groups = groups[:n]
	n, _ = wire.Fitting(partitions, room-used)
	a.Partitions = partitions[:n]
	if n < len(partitions) {
		a.NextPartition = partitions[n].Partition
	}
}

// maxName is a name of the greatest length, to reserve a name's room.
var maxName = strings.Repeat("x", queengate.MaxNameBytes)

// dropGroupPartitions empties the groups' per-partition positions.
func dropGroupPartitions(groups []queengate.GroupView) {
	for i := range groups {
		groups[i].Partitions = []queengate.GroupPartitionView{}
	}
}
