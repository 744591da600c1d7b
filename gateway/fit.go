package gateway

import (
	"encoding/json"
	"fmt"
	"strings"
	"time"

	queengate "github.com/queengate/queengate"
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

// answerBudget is the most an operator answer may take: the NATS
// connection's max payload (1 MiB unless the server says otherwise), less
// answerRoom. HTTP answers are held to the same bound, so that both faces
// answer alike.
func (o *Ops) answerBudget() int {
	if o != nil && o.nc != nil && o.nc.MaxPayload() > 0 {
		return int(o.nc.MaxPayload()) - answerRoom
	}
	return 1<<20 - answerRoom
}

// encodedLen is the length of v's JSON encoding.
func encodedLen(v any) int {
	b, err := json.Marshal(v)
	if err != nil {
		return 0 // the whole answer's encoding reports it
	}
	return len(b)
}

// fitting is how many of items, from the first, encode in a JSON array
// within budget bytes, and the bytes they take.
func fitting[T any](items []T, budget int) (n, used int) {
	used = 2 // the brackets
	for i := range items {
		size := encodedLen(items[i]) + 1 // and a comma
		if used+size > budget {
			return i, used
		}
		used += size
	}
	return len(items), used
}

// fitQueues cuts a queue list to what fits budget bytes; a cut list names
// the first queue it leaves out.
func fitQueues(a *queengate.QueuesAnswer, budget int) {
	if encodedLen(a) <= budget {
		return
	}
	queues := a.Queues
	n, _ := fitting(queues, budget-encodedLen(queengate.QueuesAnswer{Count: a.Count, Truncated: true, NextQueue: maxName}))
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
	if encodedLen(a) <= budget {
		return
	}
	a.Truncated = true
	dropGroupPartitions(a.Groups)
	if encodedLen(a) <= budget {
		return
	}
	partitions, groups := a.Partitions, a.Groups
	a.Partitions, a.Groups = []queengate.PartitionView{}, []queengate.GroupView{}
	a.NextPartition = maxName // bounds the name's room
	room := budget - encodedLen(a)
	a.NextPartition = ""
	n, used := fitting(groups, room/2)
	a.Groups = groups[:n]
	n, _ = fitting(partitions, room-used)
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

// fitTimers cuts a timer list to what fits budget bytes; a cut list names
// the position of the first timer it leaves out.
func fitTimers(a *queengate.TimersAnswer, budget int) {
	if encodedLen(a) <= budget {
		return
	}
	a.Truncated = true
	n, _ := fitting(a.Timers, budget-encodedLen(queengate.TimersAnswer{Truncated: true, Next: &widestPosition}))
	if n < len(a.Timers) {
		a.Next = timerPosition(a.Timers[n])
	}
	a.Timers = a.Timers[:n]
}

// widestPosition encodes in as many bytes as any timer position.
var widestPosition = queengate.TimerPosition{FireAt: time.Date(9999, 12, 31, 23, 59, 59, 999999999, time.UTC),
	TimerID: "00000000-0000-0000-0000-000000000000"}

// tooLargeToAnswer refuses an answer of one stored message that does not
// fit budget bytes: it was stored under a larger max payload, or before
// its kind was held to the limit (the cause is not known here).
func tooLargeToAnswer(what string, size, budget int) *queengate.Error {
	return &queengate.Error{Code: queengate.CodeTooLarge, Message: fmt.Sprintf(
		"%s takes %d bytes, more than one answer carries on this gateway's NATS connection (%d bytes)",
		what, size, budget)}
}
