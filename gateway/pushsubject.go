package gateway

import (
	"strings"

	queengate "github.com/queengate/queengate"
	"github.com/queengate/queengate/internal/wire"
)

// probeQueue is the routing probe's queue token.
const probeQueue = queengate.ProbeQueue

// parsePushSubject splits <prefix>.push.<queue>[.<partition>], and the
// routing form NATS maps it onto, <prefix>.shard.<k>.<queue>[.<partition>].
// probe reports the routing probe's own push, which is answered by nobody.
func parsePushSubject(prefix, subject string) (queue, partition string, probe bool, err *queengate.Error) {
	subjects := queengate.Subjects{Prefix: prefix}
	rest, ok := strings.CutPrefix(subject, subjects.Verb(queengate.APIPush)+".")
	if !ok {
		shard, found := strings.CutPrefix(subject, subjects.Verb(queengate.APIShard)+".")
		if _, r, cut := strings.Cut(shard, "."); found && cut {
			rest, ok = r, true
		}
	}
	tokens := strings.Split(rest, ".")
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
