package queengate

import (
	"net/url"
	"slices"
	"strings"
)

// API is one subject of the wire contract: the prefix, the verb, then the
// name tokens. docs/protocol.md writes each as its Template.
type API struct {
	// Verb is the subject's tokens between the prefix and the names:
	// "read", "consume.ack".
	Verb string
	// Names are the tokens after the verb, as documented: "<queue>",
	// "<partition>". A pop's one name stands for one token or two.
	Names []string
}

// Template is the subject as docs/protocol.md writes it under prefix:
// queen.read.<queue>.<partition>.
func (a API) Template(prefix string) string {
	return strings.Join(append([]string{prefix, a.Verb}, a.Names...), ".")
}

// Equal says a and b are the same subject.
func (a API) Equal(b API) bool { return a.Verb == b.Verb && slices.Equal(a.Names, b.Names) }

var (
	queuePartition = []string{"<queue>", "<partition>"}
	queueGroup     = []string{"<queue>", "<group>"}
	queueOnly      = []string{"<queue>"}
)

// The API subjects, each once (as nats-server's jetstream_api.go keeps
// its own): clients publish to them through Subjects, the gateway
// subscribes them and the routing shards map onto them.
var (
	// Pushes; a push to <prefix>.push.<queue> goes to the Default
	// partition.
	APIPush = API{"push", queuePartition}
	// APIPushAnswer is where the answers of fire-and-forget pushes go
	// (its wire token is "ack", for history: a consumer's ack is
	// APIConsumeAck).
	APIPushAnswer = API{"ack", queuePartition}
	// APIAck is APIPushAnswer's name before the project's words were
	// fixed.
	//
	// Deprecated: use APIPushAnswer. APIAck is removed in the release
	// after next.
	APIAck = APIPushAnswer
	// APIJetStream takes a JetStream client's publish as it is sent: the
	// data as the body, Nats-Msg-Id the transactionId, a PubAck the
	// answer (docs/protocol.md, "JetStream publish").
	APIJetStream = API{"jetstream", queuePartition}

	APITimer       = API{"timer", queuePartition}
	APITimerCancel = API{"timer.cancel", nil}
	APITimerList   = API{"timer.list", nil}

	APIRead       = API{"read", queuePartition}
	APIMessageGet = API{"message.get", nil}
	APIExplain    = API{"explain", queuePartition}

	APIPop            = API{"consume.pop", []string{"<queue>[.<partition>]"}}
	APIConsumeAck     = API{"consume.ack", queuePartition}
	APIConsumeAckPush = API{"consume.ackpush", queuePartition}
	APIRenew          = API{"consume.renew", queuePartition}
	APIRelease        = API{"consume.release", queuePartition}
	APIGroups         = API{"consume.groups", queueOnly}
	APIGroupCreate    = API{"consume.create", queueGroup}
	APIGroupSeek      = API{"consume.seek", queueGroup}
	APIGroupDelete    = API{"consume.delete", queueGroup}

	// The operator API (docs/admin-api.md).
	APIConfigure   = API{"configure", nil}
	APIQueuesList  = API{"queues.list", nil}
	APIQueuesGet   = API{"queues.get", queueOnly}
	APIStatus      = API{"status", nil}
	APIOverview    = API{"overview", nil}
	APIDLQList     = API{"dlq.list", queueOnly}
	APIDLQRedrive  = API{"dlq.redrive", queueOnly}
	APIQueueDelete = API{"queues.delete", queueOnly}
	APIQueuePurge  = API{"queues.purge", queueOnly}
)

// The admin HTTP routes of the APIs that have them (docs/admin-api.md),
// as net/http patterns: the gateway serves each (its endpoint's HTTP
// forms, checked against this table), and clients fill them (Path).
var httpRoutes = map[string][]string{
	APIConfigure.Verb:   {"POST /configure"},
	APIQueuesList.Verb:  {"GET /queues"},
	APIQueuesGet.Verb:   {"GET /queues/{queue}"},
	APIStatus.Verb:      {"GET /status"},
	APIOverview.Verb:    {"GET /overview"},
	APITimerList.Verb:   {"GET /timers"},
	APIRead.Verb:        {"GET /queues/{queue}/partitions/{partition}/messages"},
	APIExplain.Verb:     {"GET /queues/{queue}/partitions/{partition}/explain"},
	APIMessageGet.Verb:  {RouteMessage, RouteTransaction},
	APIDLQList.Verb:     {"POST /queues/{queue}/dlq/list"},
	APIDLQRedrive.Verb:  {"POST /queues/{queue}/dlq/redrive"},
	APIGroups.Verb:      {"GET /queues/{queue}/groups"},
	APIGroupCreate.Verb: {"PUT /queues/{queue}/groups/{group}"},
	APIGroupSeek.Verb:   {"POST /queues/{queue}/groups/{group}/seek"},
	APIGroupDelete.Verb: {"DELETE /queues/{queue}/groups/{group}"},
	APIQueueDelete.Verb: {"DELETE /queues/{queue}"},
	APIQueuePurge.Verb:  {"POST /queues/{queue}/purge"},
}

// A message is got over HTTP by its id, or by its transactionId in its
// partition: the two routes of APIMessageGet.
const (
	RouteMessage     = "GET /messages/{messageId}"
	RouteTransaction = "GET /queues/{queue}/partitions/{partition}/transactions/{transactionId}"
)

// HTTP is a's admin HTTP routes (none for most APIs), the first its
// usual one.
func (a API) HTTP() []string { return httpRoutes[a.Verb] }

// Route is a's usual admin HTTP route; "" when it has none.
func (a API) Route() string {
	if r := a.HTTP(); len(r) > 0 {
		return r[0]
	}
	return ""
}

// Path fills route's {names} with values in their order, each escaped as
// one path segment, and splits off its method: "GET /queues/{queue}",
// "orders" is GET and /queues/orders. A value of "." or ".." is escaped
// whole, as it would otherwise name another path.
func Path(route string, values ...string) (method, path string) {
	method, path, _ = strings.Cut(route, " ")
	for _, v := range values {
		open := strings.IndexByte(path, '{')
		end := strings.IndexByte(path, '}')
		if open < 0 || end < open {
			break
		}
		seg := url.PathEscape(v)
		if v == "." || v == ".." {
			seg = strings.ReplaceAll(v, ".", "%2E")
		}
		path = path[:open] + seg + path[end+1:]
	}
	return method, path
}

// APIs are all of the above: the subjects clients send on. Those
// between the NATS server and the gateways, and between gateways, are
// the gateway's own (internal/peers).
var APIs = []API{
	APIPush, APIPushAnswer, APIJetStream, APITimer, APITimerCancel, APITimerList,
	APIRead, APIMessageGet, APIExplain,
	APIPop, APIConsumeAck, APIConsumeAckPush, APIRenew, APIRelease, APIGroups, APIGroupCreate, APIGroupSeek, APIGroupDelete,
	APIConfigure, APIQueuesList, APIQueuesGet, APIStatus, APIOverview, APIDLQList, APIDLQRedrive, APIQueueDelete, APIQueuePurge,
}

// Subjects builds the API subjects under a prefix.
type Subjects struct{ Prefix string }

// Verb is a's subject without its names, <prefix>.<verb>: what the
// gateway subscribes under, and the start of every subject of a.
func (s Subjects) Verb(a API) string { return s.Prefix + "." + a.Verb }

// Wildcard is every subject of a's shape, one wildcard a name:
// <prefix>.read.*.* (what a subscription or a mapping's source takes).
func (s Subjects) Wildcard(a API) string { return s.Verb(a) + strings.Repeat(".*", len(a.Names)) }

// Under is every subject under a's verb, of any shape: <prefix>.push.>.
func (s Subjects) Under(a API) string { return s.Verb(a) + ".>" }

func (s Subjects) with1(a API, name string) string { return s.Prefix + "." + a.Verb + "." + name }

func (s Subjects) with2(a API, first, second string) string {
	return s.Prefix + "." + a.Verb + "." + first + "." + second
}

// Push is the subject of a push to a partition; partition "" is the
// Default partition's short form, <prefix>.push.<queue>.
func (s Subjects) Push(queue, partition string) string {
	if partition == "" {
		return s.with1(APIPush, queue)
	}
	return s.with2(APIPush, queue, partition)
}

// JetStream is the subject a JetStream client publishes to a partition on.
func (s Subjects) JetStream(queue, partition string) string {
	return s.with2(APIJetStream, queue, partition)
}

// PushAnswer is where the answers of fire-and-forget pushes to a partition are
// published.
func (s Subjects) PushAnswer(queue, partition string) string {
	return s.with2(APIPushAnswer, queue, partition)
}

// Ack is PushAnswer's name before the project's words were fixed.
//
// Deprecated: use PushAnswer. Ack is removed in the release after next.
func (s Subjects) Ack(queue, partition string) string { return s.PushAnswer(queue, partition) }

// Timer is the subject that schedules a timer for a partition.
func (s Subjects) Timer(queue, partition string) string { return s.with2(APITimer, queue, partition) }

// TimerCancel cancels a timer; TimerList lists pending ones.
func (s Subjects) TimerCancel() string { return s.Verb(APITimerCancel) }
func (s Subjects) TimerList() string   { return s.Verb(APITimerList) }

// Configure, QueuesList, QueuesGet and Status are the operator API.
func (s Subjects) Configure() string             { return s.Verb(APIConfigure) }
func (s Subjects) QueuesList() string            { return s.Verb(APIQueuesList) }
func (s Subjects) QueuesGet(queue string) string { return s.with1(APIQueuesGet, queue) }
func (s Subjects) Status() string                { return s.Verb(APIStatus) }

// Overview is every queue at a glance.
func (s Subjects) Overview() string { return s.Verb(APIOverview) }

// Read is where a partition's messages are read from an offset.
func (s Subjects) Read(queue, partition string) string { return s.with2(APIRead, queue, partition) }

// MessageGet is where one message is fetched by id or transactionId.
func (s Subjects) MessageGet() string { return s.Verb(APIMessageGet) }

// Explain is where a transactionId's verdict is explained.
func (s Subjects) Explain(queue, partition string) string {
	return s.with2(APIExplain, queue, partition)
}

// Pop is where a consumer asks for messages of a queue: of any
// partition with work, or of one (partition not "").
func (s Subjects) Pop(queue, partition string) string {
	if partition == "" {
		return s.with1(APIPop, queue)
	}
	return s.with2(APIPop, queue, partition)
}

// ConsumeAck, Renew and Release settle and keep a lease on a partition.
func (s Subjects) ConsumeAck(queue, partition string) string {
	return s.with2(APIConsumeAck, queue, partition)
}
func (s Subjects) Renew(queue, partition string) string { return s.with2(APIRenew, queue, partition) }
func (s Subjects) Release(queue, partition string) string {
	return s.with2(APIRelease, queue, partition)
}

// ConsumeAckPush is where a lease's items are completed together with a
// push of derived messages.
func (s Subjects) ConsumeAckPush(queue, partition string) string {
	return s.with2(APIConsumeAckPush, queue, partition)
}

// Groups lists a queue's consumer groups with their lag.
func (s Subjects) Groups(queue string) string { return s.with1(APIGroups, queue) }

// GroupCreate is where a queue's consumer group is created with a start
// position.
func (s Subjects) GroupCreate(queue, group string) string {
	return s.with2(APIGroupCreate, queue, group)
}

// GroupSeek is where an operator moves a queue's consumer group (admin
// token).
func (s Subjects) GroupSeek(queue, group string) string { return s.with2(APIGroupSeek, queue, group) }

// GroupDelete is where an operator deletes a queue's consumer group
// (admin token).
func (s Subjects) GroupDelete(queue, group string) string {
	return s.with2(APIGroupDelete, queue, group)
}

// DLQList is the subject listing queue's dead letters not yet redriven.
func (s Subjects) DLQList(queue string) string { return s.with1(APIDLQList, queue) }

// DLQRedrive is the subject redriving queue's dead letters.
func (s Subjects) DLQRedrive(queue string) string { return s.with1(APIDLQRedrive, queue) }

// QueueDelete is where an operator deletes a queue (admin token).
func (s Subjects) QueueDelete(queue string) string { return s.with1(APIQueueDelete, queue) }

// QueuePurge is where an operator purges a queue (admin token).
func (s Subjects) QueuePurge(queue string) string { return s.with1(APIQueuePurge, queue) }
