package operator

import (
	"net/url"
	"slices"
	"strings"

	queengate "github.com/queengate/queengate"
	"github.com/queengate/queengate/gateway"
	"github.com/queengate/queengate/internal/wire"
)

// A list that grows with what is stored answers what fits, in a fixed
// order, and names where the next page starts: the queue list its
// nextQueue, a queue's partitions their nextPartition (as a groups answer
// does), the timer list its next position. The next page is asked for
// with "from": the NATS body {"from": ...}, the HTTP parameter from=.

var (
	queuesPageShape = wire.Shape{Name: "a queue list", Example: `{"from": "<queue>"} (optional; or an empty body)`}
	queuePageShape  = wire.Shape{Name: "a get queue", Example: `{"from": "<partition>"} (optional; or an empty body)`}
	overviewShape   = wire.Shape{Name: "an overview", Example: `{"from": "<queue>"} (optional; or an empty body)`}
)

// decodeFrom reads a paged list's optional body, {"from": "<name>"}.
func decodeFrom(body []byte, shape wire.Shape) (from string, werr *queengate.Error) {
	if wire.Blank(body) {
		return "", nil
	}
	werr = wire.DecodeObject(body, wire.TheBody, shape, wire.Field{Name: "from", Decode: wire.NameInto("from", &from)})
	return from, werr
}

// fromQuery reads a paged list's URL parameters: from=<name> at most, as
// decodeFrom reads its body.
func fromQuery(q url.Values, path string) (string, *queengate.Error) {
	if werr := gateway.OnlyParameters(q, path, "from"); werr != nil {
		return "", werr
	}
	if !q.Has("from") {
		return "", nil
	}
	var from string
	return from, wire.NameInto("from", &from)(wire.AppendJSONString(nil, q.Get("from")))
}

// byName sorts items by their name in byte order, whatever the
// database's collation: pages cut at a name follow the same order.
func byName[T any](items []T, name func(T) string) {
	slices.SortStableFunc(items, func(a, b T) int { return strings.Compare(name(a), name(b)) })
}

// fromName is the index of the item named from ("": 0), or a 404 saying
// notFound: a page starts at a name that exists, as a groups page does.
func fromName[T any](items []T, name func(T) string, from, notFound string) (int, *queengate.Error) {
	if from == "" {
		return 0, nil
	}
	i := slices.IndexFunc(items, func(x T) bool { return name(x) == from })
	if i < 0 {
		return 0, &queengate.Error{Code: queengate.CodeNotFound, Text: notFound}
	}
	return i, nil
}
