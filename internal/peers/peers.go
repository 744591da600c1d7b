// Package peers holds the subjects between the NATS server and the
// gateways, and between gateways: pushes, publishes and pops as NATS maps
// them onto routing shards, heartbeats, the mapping probe, and what one
// gateway tells the others. No client sends on them, so they are not part
// of the contract the root package gives clients; docs/protocol.md lists
// them for operators writing NATS permissions.
package peers

import (
	"strings"

	queengate "github.com/queengate/queengate"
)

// ProbeQueue is the queue token of the routing probe's pushes: not a
// valid queue name, so no gateway ever stores one.
const ProbeQueue = "$qgprobe"

var shardNames = []string{"<k>", "<queue>", "<partition>"}

// The subjects, each once, as queengate.API values: their templates are
// docs/protocol.md's.
var (
	// Shard is a push as NATS maps it onto routing shard <k>; JetStreamShard
	// a JetStream publish, PopShard a pop naming its partition.
	Shard          = queengate.API{Verb: "shard", Names: shardNames}
	PopShard       = queengate.API{Verb: "popshard", Names: shardNames}
	JetStreamShard = queengate.API{Verb: "jsshard", Names: shardNames}
	// Heartbeat carries each gateway's shards and state.
	Heartbeat = queengate.API{Verb: "gateways.heartbeat"}
	// Probe is the mapping probe's pushes, never stored or answered.
	Probe = queengate.API{Verb: queengate.APIPush.Verb + "." + ProbeQueue, Names: []string{"<nonce>"}}
	// Committed says a queue has new messages (waiting pops look again).
	Committed = queengate.API{Verb: "committed", Names: []string{"<queue>"}}
	// QueueDeleted and GroupDeleted tell the others to forget what they
	// hold of a deleted queue or group.
	QueueDeleted = queengate.API{Verb: "queuedeleted", Names: []string{"<queue>"}}
	GroupDeleted = queengate.API{Verb: "groupdeleted", Names: []string{"<queue>", "<group>"}}
)

// APIs are all of the above.
var APIs = []queengate.API{Shard, PopShard, JetStreamShard, Heartbeat, Probe, Committed, QueueDeleted, GroupDeleted}

// Subject is a's subject under prefix with names filled in, in order,
// built in one allocation: gateways announce commits with it after every
// flush.
func Subject(prefix string, a queengate.API, names ...string) string {
	n := len(prefix) + 1 + len(a.Verb)
	for _, name := range names {
		n += 1 + len(name)
	}
	var b strings.Builder
	b.Grow(n)
	b.WriteString(prefix)
	b.WriteByte('.')
	b.WriteString(a.Verb)
	for _, name := range names {
		b.WriteByte('.')
		b.WriteString(name)
	}
	return b.String()
}
