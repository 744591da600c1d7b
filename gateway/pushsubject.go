package gateway

import (
	"strings"

	queengate "github.com/queengate/queengate"
	"github.com/queengate/queengate/internal/peers"
	"github.com/queengate/queengate/internal/wire"
)

// probeQueue is the routing probe's queue token.
const probeQueue = peers.ProbeQueue

// parsePushSubject splits <prefix>.push.<queue>[.<partition>], and the
// routing form NATS maps it onto, <prefix>.shard.<k>.<queue>[.<partition>].
// probe reports the routing probe's own push, which is answered by nobody.
func parsePushSubject(prefix, subject string) (queue, partition string, probe bool, err *queengate.Error) {
	subjects := queengate.Subjects{Prefix: prefix}
	tokens, ok := namesOf(prefix, subject, queengate.APIPush, peers.Shard)
	switch {
	case !ok || len(tokens) > 2: // e.g. the bare <prefix>.push, which names no queue
		return "", "", false, wire.BadInput("subject %q must be %s.<queue> or %s", subject, subjects.Verb(queengate.APIPush), queengate.APIPush.Template(prefix))
	case len(tokens) == 1:
		queue, partition = tokens[0], queengate.DefaultPartition
	default:
		queue, partition = tokens[0], tokens[1]
	}
	if queue == probeQueue {
		return "", "", true, nil
	}
	return queue, partition, false, ValidPlace(queue, partition)
}

// namesOf is the tokens of subject after api's verb, or after
// <shard's verb>.<k> when NATS mapped it onto a routing shard; ok false
// when subject is neither.
func namesOf(prefix, subject string, api, shard queengate.API) (tokens []string, ok bool) {
	s := queengate.Subjects{Prefix: prefix}
	rest, ok := strings.CutPrefix(subject, s.Verb(api)+".")
	if !ok {
		rest, ok = shardNames(subject, s.Verb(shard))
	}
	return strings.Split(rest, "."), ok
}

// shardNames is what follows <shardVerb>.<k>. in a subject NATS mapped
// onto routing shard k: the names its requester sent; ok false for any
// other subject.
func shardNames(subject, shardVerb string) (names string, ok bool) {
	mapped, found := strings.CutPrefix(subject, shardVerb+".")
	_, names, cut := strings.Cut(mapped, ".")
	return names, found && cut
}
