package consume

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"

	queengate "github.com/queengate/queengate"
	"github.com/queengate/queengate/gateway"
	"github.com/queengate/queengate/internal/peers"
	"github.com/queengate/queengate/internal/wire"
	"github.com/queengate/queengate/model"
	"github.com/queengate/queengate/tail"
)

// Store is what consuming needs from the store.
type Store interface {
	EnsureGroup(ctx context.Context, queue, name string) (model.Group, error)
	FindGroup(ctx context.Context, queue, name string) (model.Group, error)
	PartitionID(ctx context.Context, queueID int64, name string) (int64, error)
	Pop(ctx context.Context, r model.PopQuery) (model.PopResult, error)
	PopMore(ctx context.Context, r model.PopQuery, partitions int, leaseEnvelope int64) ([]model.PopResult, error)
	Undo(ctx context.Context, g model.Group, partitionID int64, leaseID string) (bool, error)
	Ack(ctx context.Context, g model.Group, partitionID int64, leaseID string, items []model.Settlement) (model.SettledBatch, error)
	AckMany(ctx context.Context, g model.Group, acks []model.CarriedAck) ([]model.SettledBatch, error)
	Cycle(ctx context.Context, r model.PopQuery, partitionID int64, leaseID string, items []model.Settlement) (model.SettledBatch,
		*model.PopResult, bool, error)
	AckAndPush(ctx context.Context, g model.Group, partitionID int64, leaseID string, items []model.Settlement,
		derived []model.Derived) (model.AckPushResult, error)
	Lease(ctx context.Context, g model.Group, partitionID int64, leaseID string, d time.Duration) (time.Time, bool, error)
	GroupPartitions(ctx context.Context, queueID int64) ([]model.GroupPartition, error)
	RunOutLeases(ctx context.Context, groupIDs []int64) ([]model.GroupPartitionID, error)
	QueueConfig(ctx context.Context, queue string) (model.QueueConfig, error)
	DeleteGroup(ctx context.Context, queue, name string) (model.GroupDeleted, error)
	CreateGroup(ctx context.Context, queue, name string, start model.GroupStart) (model.GroupCreated, error)
	SeekGroup(ctx context.Context, queue, name string, seek model.Seek) (model.Group, []model.GroupMove, error)
	GroupActivity(ctx context.Context, queueID int64) ([]model.GroupActivity, error)
	NoteActive(ctx context.Context, noted []model.GroupNoted) (skipped []int64, err error)
	DeleteQueue(ctx context.Context, queue string) (model.QueueDeleted, error)
	PurgeQueue(ctx context.Context, queue, partition string) (model.QueuePurged, error)
}

// Consumers serves consumer groups (docs/protocol.md, "Consuming"): pops
// with long polling, acks, lease renewal and release, and group lists.
// Every gateway serves every request: the store's row locks decide.
type Consumers struct {
	store Store
	log   zerolog.Logger
	// metrics count what consumers do; nil until the gateway serves them.
	metrics *consumeMetrics
	// maxPayload is the NATS connection's: every answer fits in it.
	maxPayload func() int64
	// publish announces commits (and leases ended early) to every
	// gateway; nil until the endpoints are served.
	publish func(queues []string)
	// publishDeleted announces a deleted group to every gateway
	// (groupdelete.go); nil until the endpoints are served.
	publishDeleted func(queue, group string)
	// publishQueueDeleted announces a deleted queue to every gateway
	// (queuedelete.go); nil until the endpoints are served.
	publishQueueDeleted func(queue string, id int64)
	// forgetIngested drops a deleted queue from the gateway's ingester.
	forgetIngested func(queue string)

	waits      *waits          // the long polls waiting (longpoll.go)
	draining   <-chan struct{} // closed when the gateway stops: waiting pops answer at once
	checkEvery time.Duration   // how often run-out leases are looked for while pops wait
	checks     atomic.Int64    // looks for run-out leases so far
	// activity is what the groups' consumers did, noted for the
	// ActivityFlusher (activity.go).
	activity *activity

	// Once found, ids are remembered, saving a round trip to PostgreSQL
	// per request. A deleted group's id is forgotten when its delete is
	// announced or the store finds it gone (groupdelete.go); a deleted
	// queue's groups and partitions when its delete is announced
	// (queuedelete.go).
	knownGroups     sync.Map // queue + "/" + group -> model.Group
	knownPartitions sync.Map // queue id + "/" + partition -> int64

	// tail serves the usual cycle from memory (tail.go); nil: never.
	tail *tail.Server
}

// group finds (create: or creates) queue's group name.
func (c *Consumers) group(ctx context.Context, queue, name string, create bool) (model.Group, error) {
	key := queue + "/" + name
	if g, ok := c.knownGroups.Load(key); ok {
		return g.(model.Group), nil
	}
	find := c.store.FindGroup
	if create {
		find = c.store.EnsureGroup
	}
	g, err := find(ctx, queue, name)
	if err == nil {
		c.knownGroups.Store(key, g)
	}
	return g, err
}

// partition finds the id of a queue's partition.
func (c *Consumers) partition(ctx context.Context, queueID int64, name string) (int64, error) {
	key := strconv.FormatInt(queueID, 10) + "/" + name
	if id, ok := c.knownPartitions.Load(key); ok {
		return id.(int64), nil
	}
	id, err := c.store.PartitionID(ctx, queueID, name)
	if err == nil {
		c.knownPartitions.Store(key, id)
	}
	return id, err
}

// New builds the consuming endpoints over store.
func New(store Store) *Consumers {
	return &Consumers{store: store, waits: newWaits(), checkEvery: checkEvery, activity: newActivity()}
}

// RegisterMetrics registers the consume metrics on reg (nil: none).
func (c *Consumers) RegisterMetrics(reg prometheus.Registerer) (err error) {
	c.metrics, err = newConsumeMetrics(reg)
	return err
}

// Endpoints serves the consuming subjects, and listens for commits
// announced by every gateway.
func (c *Consumers) Endpoints(g *gateway.Gateway) ([]gateway.Endpoint, error) {
	c.log = g.Logger()
	ops := c.Operations(g.Prefix(), g.Conn())
	if err := c.listen(g); err != nil {
		return nil, err
	}
	return ops, nil
}

// Operations are the consuming entries: pops, acks, leases on NATS, and
// the groups' list, creation, seek and delete, also admin HTTP routes (the
// groups answer paged the same way, its body's fields taken from the
// URL parameters). Their answers fit nc's max payload.
func (c *Consumers) Operations(prefix string, nc *nats.Conn) []gateway.Endpoint {
	if c.maxPayload == nil { // the first face to list them: the same connection
		c.maxPayload = nc.MaxPayload
	}
	s := queengate.Subjects{Prefix: prefix}
	return gateway.WithSubjects(s, append([]gateway.Endpoint{
		{Name: "consume-pop", API: queengate.APIPop, AnyTokens: true, AnswerOnly: true,
			ShardVerb: s.Verb(peers.PopShard), Op: func(ctx context.Context, req *gateway.Request) (any, *queengate.Error) {
				return c.pop(ctx, strings.Join(req.Names, "."), req.Data)
			}},
		{Name: "consume-ack", API: queengate.APIConsumeAck, Op: func(ctx context.Context, req *gateway.Request) (any, *queengate.Error) {
			queue, partition := req.Names[0], req.Names[1]
			return c.ack(ctx, queue, partition, req.Data)
		}},
		{Name: "consume-ackpush", API: queengate.APIConsumeAckPush, Op: func(ctx context.Context, req *gateway.Request) (any, *queengate.Error) {
			queue, partition := req.Names[0], req.Names[1]
			return c.ackPush(ctx, queue, partition, req.Data)
		}},
		{Name: "consume-renew", API: queengate.APIRenew, Op: func(ctx context.Context, req *gateway.Request) (any, *queengate.Error) {
			queue, partition := req.Names[0], req.Names[1]
			return c.lease(ctx, queue, partition, req.Data, true)
		}},
		{Name: "consume-release", API: queengate.APIRelease, Op: func(ctx context.Context, req *gateway.Request) (any, *queengate.Error) {
			queue, partition := req.Names[0], req.Names[1]
			return c.lease(ctx, queue, partition, req.Data, false)
		}},
	}, c.groupOperations()...))
}

// groupOperations are the entries that serve the admin HTTP too.
func (c *Consumers) groupOperations() []gateway.Endpoint {
	return []gateway.Endpoint{
		{Name: "consume-groups", API: queengate.APIGroups, AnswerOnly: true, Op: func(ctx context.Context, req *gateway.Request) (any, *queengate.Error) {
			return c.groups(ctx, req.Names[0], req.Data)
		}, HTTP: []gateway.HTTPForm{{Route: queengate.APIGroups.Route(), Op: c.groupsQuery}}},
		{Name: "consume-delete", API: queengate.APIGroupDelete, Admin: true, AnswerOnly: true, Op: func(ctx context.Context, req *gateway.Request) (any, *queengate.Error) {
			queue, group := req.Names[0], req.Names[1]
			return c.deleteGroup(ctx, queue, group, req.Data)
		}, HTTP: groupRoute(queengate.APIGroupDelete.Route(), c.deleteGroup)},
		{Name: "consume-create", API: queengate.APIGroupCreate, AnswerOnly: true, Op: func(ctx context.Context, req *gateway.Request) (any, *queengate.Error) {
			queue, group := req.Names[0], req.Names[1]
			return c.createGroup(ctx, queue, group, req.Data)
		}, HTTP: groupRoute(queengate.APIGroupCreate.Route(), c.createGroup)},
		{Name: "consume-seek", API: queengate.APIGroupSeek, Admin: true, AnswerOnly: true, Op: func(ctx context.Context, req *gateway.Request) (any, *queengate.Error) {
			queue, group := req.Names[0], req.Names[1]
			return c.seekGroup(ctx, queue, group, req.Data)
		}, HTTP: groupRoute(queengate.APIGroupSeek.Route(), c.seekGroup)},
	}
}

// groupsQuery is GET /queues/<queue>/groups: the NATS body's fields taken
// from the URL parameters.
func (c *Consumers) groupsQuery(r *http.Request, _ []byte) (any, *queengate.Error) {
	q := r.URL.Query()
	if werr := gateway.OnlyParameters(q, "/queues/<queue>/groups", "group", "from"); werr != nil {
		return nil, werr
	}
	var body []byte
	if len(q) > 0 {
		fields := map[string]string{}
		for name := range q {
			fields[name] = q.Get(name)
		}
		body, _ = json.Marshal(fields) // strings: cannot fail
	}
	return c.groups(r.Context(), r.PathValue("queue"), body)
}

// groupRoute is the HTTP form of an operation on a queue's group, named
// by the path as the subject names it on NATS; it takes no parameters.
func groupRoute(route string, op func(ctx context.Context, queue, group string, body []byte) (any, *queengate.Error)) []gateway.HTTPForm {
	return []gateway.HTTPForm{gateway.PathForm(route, func(r *http.Request, body []byte) (any, *queengate.Error) {
		return op(r.Context(), r.PathValue("queue"), r.PathValue("group"), body)
	})}
}

// listen subscribes to the commits and deletes every gateway announces,
// and watches the connection's reconnects.
func (c *Consumers) listen(g *gateway.Gateway) error {
	committed := peers.Subject(g.Prefix(), peers.Committed) + "."
	nc := g.Conn()
	if _, err := nc.Subscribe(committed+"*", func(m *nats.Msg) { c.committed(strings.TrimPrefix(m.Subject, committed)) }); err != nil {
		return err
	}
	if err := c.listenDeletes(g); err != nil {
		return err
	}
	if err := c.listenQueueDeletes(g); err != nil {
		return err
	}
	c.publish = g.PublishCommitted
	c.draining = g.Draining()
	go c.watch(g.Stopped(), func() uint64 { return nc.Stats().Reconnects })
	return nil
}

func (c *Consumers) pop(ctx context.Context, place string, body []byte) (any, *queengate.Error) {
	queue, partition, _ := strings.Cut(place, ".")
	if !queengate.ValidName(queue) || (partition != "" && !queengate.ValidName(partition)) {
		return nil, wire.BadInput("pop subject %q: <prefix>.consume.pop.<queue>[.<partition>], names of %s", place, queengate.NameRule)
	}
	req, werr := decodePop(body)
	if werr != nil {
		return nil, werr
	}
	// Everything the pop names is found before the ack it carries is
	// settled: a 4xx changes nothing. A group the pop is the first of is
	// created only then (its queue's id comes with ErrGroupNotFound).
	g, err := c.group(ctx, queue, req.Group, false)
	newGroup := errors.Is(err, model.ErrGroupNotFound)
	if err != nil && !newGroup {
		return nil, consumeError(err)
	}
	var pid int64
	if partition != "" {
		if req.Partitions > 1 {
			return nil, wire.BadInput(`"partitions" is %d, but this pop names partition %s: "partitions" is for a pop of any partition`, req.Partitions, partition)
		}
		if pid, err = c.partition(ctx, g.QueueID, partition); err != nil {
			return nil, consumeError(err)
		}
	}
	ans := popAnswer{c: c, group: g, more: max(req.Partitions, 1) - 1, ackField: "ack"}
	if req.Acks != nil {
		ans.ackField = "acks"
		if ans.acked, werr = c.settleAll(ctx, queue, req.Group, req.Acks); werr != nil {
			return nil, werr
		}
	} else if req.Ack != nil {
		var popped *model.PopResult
		if ans.acked, popped, werr = c.settleCarried(ctx, queue, g, pid, newGroup, req); werr != nil {
			return nil, werr
		}
		if popped != nil { // the ack and the pop's first partition in one statement
			pr := c.popRequest(g, pid, req, len(ans.acked))
			return ans.answer(queue, g, popped, c.popMore(ctx, queue, pr, popped, ans.more)), nil
		}
	}
	acked := ans.acked
	if newGroup {
		if g, err = c.group(ctx, queue, req.Group, true); err != nil {
			return nil, consumeError(err)
		}
	}
	pr := c.popRequest(g, pid, req, len(acked))
	// Beside a large ack answer the next message may not fit: waiting
	// could not deliver it either, and the next pop, carrying none, will.
	wait := pr.Room >= largestDelivery(c.maxPayload())
	// A pop that settled an ack or made its group may have changed what
	// its wait list knows: it pops first whatever the list says.
	trusted := acked == nil && !newGroup
	return c.longPoll(ctx, queue, pr, time.Duration(req.WaitMs)*time.Millisecond, wait, trusted, &ans)
}

// settleAll settles a pop's list of carried acks in order, in one round
// trip and one commit (the store's AckMany), and answers them as a list.
// As for one ack, everything they name is found, and their answers' size
// checked, before any is settled.
func (c *Consumers) settleAll(ctx context.Context, queue, group string, acks []queengate.PopAck) ([]byte, *queengate.Error) {
	if len(acks) == 0 {
		return []byte("[]"), nil
	}
	var bound int64
	var g model.Group
	reqs := make([]queengate.AckRequest, len(acks))
	carried := make([]model.CarriedAck, len(acks))
	for i, ack := range acks {
		reqs[i] = queengate.AckRequest{Group: group, LeaseID: ack.LeaseID, Items: ack.Items}
		items, b, werr := c.checkAck(reqs[i])
		if werr != nil {
			return nil, werr
		}
		bound += b
		var pid int64
		if g, pid, werr = c.place(ctx, queue, ack.Partition, group); werr != nil {
			return nil, werr
		}
		carried[i] = model.CarriedAck{PartitionID: pid, LeaseID: ack.LeaseID, Items: items}
	}
	if room := c.maxPayload() - popEnvelope; bound > room {
		return nil, &queengate.Error{Code: queengate.CodeTooLarge, Text: fmt.Sprintf(
			"%d acks could take up to %d bytes to answer (each result repeats its transactionId), over the %d an answer may take here: send fewer items with this pop, the rest in acks",
			len(acks), bound, room)}
	}
	c.activity.note(g.ID)
	results, err := c.store.AckMany(ctx, g, carried)
	if err != nil {
		return nil, c.groupFailed(g, err)
	}
	acked := []byte{'['}
	for i := range results {
		ans := c.ackAnswer(queue, g, reqs[i], carried[i].Items, results[i])
		if i > 0 {
			acked = append(acked, ',')
		}
		acked = wire.AppendAckAnswer(acked, &ans)
		c.settled(queue, ans)
	}
	return append(acked, ']'), nil
}

// logDeadLettering says what a pop could not deliver and why.
func (c *Consumers) logDeadLettering(queue string, pr model.PopQuery, res *model.PopResult) {
	if res.DeadLetterErr != nil {
		c.log.Warn().Err(res.DeadLetterErr).Str("queue", queue).Str("group", pr.Group.Name).Msg("dead-lettering failed; a later pop retries")
	}
	if res.TooLarge > 0 {
		c.log.Warn().Str("queue", queue).Str("group", pr.Group.Name).Str("partition", res.Partition).Int("messages", res.TooLarge).
			Int64("max_delivery_bytes", pr.MaxDelivery).Msg("dead-lettered messages too large for any pop's answer")
	}
}

var (
	popShape = wire.Shape{Name: "a pop", Example: `{"group": "...", "consumer": "...", "max": 100, "leaseMs": 30000, "waitMs": 5000, "maxBytes": 1048576, "ack": {...}, "partitions": 10}`}
	// popAckShape is the ack a pop carries.
	popAckShape  = wire.Shape{Name: "a pop's ack", Example: `{"partition": "...", "leaseId": "...", "items": [...]}`}
	ackShape     = wire.Shape{Name: "an ack", Example: `{"group": "...", "leaseId": "...", "items": [{"transactionId": "...", "status": "completed"}]}`}
	ackItemShape = wire.Shape{Name: "an ack item", Example: `{"transactionId": "...", "status": "completed"} or {"offset": 7, "status": "failed", "error": "..."}`}
	renewShape   = wire.Shape{Name: "a renewal", Example: `{"group": "...", "leaseId": "...", "leaseMs": 30000}`}
	releaseShape = wire.Shape{Name: "a release", Example: `{"group": "...", "leaseId": "..."}`}
	groupsShape  = wire.Shape{Name: "a groups request", Example: `{"group": "...", "from": "<partition>"}, or no body`}
)

// popEnvelope bounds what a pop's answer takes beside its messages and
// the answer of the ack it carries: names of up to 128 bytes, ids, the
// lease, the counts and the field names.
const popEnvelope = 1024

// popRoom is what a pop's messages may take in its answer beside an ack
// answer of ackBytes (room), and what they take at most when asked for
// maxBytes (0: as much as fits).
func (c *Consumers) popRoom(ackBytes int, maxBytes int64) (room, limit int64) {
	room = max(0, c.maxPayload()-popEnvelope-int64(ackBytes))
	if maxBytes > 0 {
		return room, min(maxBytes, room)
	}
	return room, room
}

// largestDelivery bounds what the largest message a push accepts takes
// in a pop's answer.
func largestDelivery(maxPayload int64) int64 {
	return queengate.MaxDataBytes(maxPayload) + 6*(queengate.MaxTxnIDBytes+queengate.MaxAckErrorSize) + model.DeliveryEnvelope
}

// popAnswer is a pop's answer; when it is never sent, it takes its
// leases and deliveries back (the gateway's Undoable).
type popAnswer struct {
	c     *Consumers
	group model.Group
	// more is how many further partitions the pop may lease.
	more int
	// acked is the answer of the acks the pop carried, under ackField.
	ackField string
	acked    []byte

	body   wire.RawAnswer
	leases []takenLease
}

// takenLease is a lease a pop's answer delivers under.
type takenLease struct {
	pid   int64
	lease string
}

// answer encodes the answer of a pop that delivered r, and further leases
// more.
func (a *popAnswer) answer(queue string, g model.Group, r *model.PopResult, more []model.PopResult) *popAnswer {
	a.group = g
	a.c.metrics.popped(queue, a.group.Name, r)
	a.leases = nil
	if r.LeaseID != "" {
		a.leases = append(a.leases, takenLease{r.PartitionID, r.LeaseID})
		a.c.tail.Remember(g.ID, r)
	}
	for i := range more {
		a.c.metrics.popped(queue, a.group.Name, &more[i])
		a.leases = append(a.leases, takenLease{more[i].PartitionID, more[i].LeaseID})
		a.c.tail.Remember(g.ID, &more[i])
	}
	a.body = wire.EncodePopLeases(queue, a.group.Name, r, more, a.ackField, a.acked)
	return a
}

// A pop's answer is encoded by hand and undone when never published: the
// gateway finds both by type assertion, so the compiler checks them here.
var (
	_ wire.Encoded     = (*popAnswer)(nil)
	_ gateway.Undoable = (*popAnswer)(nil)
)

func (a *popAnswer) Encoded() []byte { return a.body }

// Undo: nobody got the messages, so they cost no attempt and the
// partitions are free again at once.
func (a *popAnswer) Undo() {
	if len(a.leases) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	anyUndone := false
	for _, l := range a.leases {
		a.c.tail.Forget(l.lease)
		undone, err := a.c.store.Undo(ctx, a.group, l.pid, l.lease)
		if err != nil {
			// Then the lease runs out unheard: the next pop takes it back.
			a.c.log.Warn().Err(err).Str("queue", a.group.Queue).Str("group", a.group.Name).Msg("could not take back an unsent pop")
			continue
		}
		anyUndone = anyUndone || undone
		a.c.log.Warn().Str("queue", a.group.Queue).Str("group", a.group.Name).Bool("undone", undone).
			Msg("a pop's answer was not sent: its lease and attempts are taken back")
	}
	if anyUndone {
		a.c.announce(a.group.Queue)
	}
}

// decodePop reads a pop body strictly, the ack it carries included: every
// problem is a 400 naming it, found before anything is done.
func decodePop(body []byte) (queengate.PopRequest, *queengate.Error) {
	req := queengate.PopRequest{Max: queengate.DefaultPopMax, LeaseMs: queengate.DefaultLeaseMs}
	werr := wire.DecodeObject(body, wire.TheBody, popShape,
		wire.Field{Name: "group", Decode: wire.NameInto("group", &req.Group)},
		wire.Field{Name: "consumer", Decode: consumerInto(&req.Consumer)},
		wire.Field{Name: "max", Decode: wire.WholeNumberInto("max", 1, queengate.MaxPopMax, &req.Max)},
		wire.Field{Name: "leaseMs", Decode: wire.WholeNumberInto("leaseMs", 1, queengate.MaxLeaseMs, &req.LeaseMs)},
		wire.Field{Name: "waitMs", Decode: wire.WholeNumberInto("waitMs", 0, queengate.MaxWaitMs, &req.WaitMs)},
		wire.Field{Name: "maxBytes", Decode: wire.WholeNumberInto("maxBytes", 1, gateway.MaxPopBytes, &req.MaxBytes)},
		wire.Field{Name: "maxAckPending", Decode: wire.WholeNumberInto("maxAckPending", 1, model.MaxAckPendingLimit, &req.MaxAckPending)},
		wire.Field{Name: "ack", Decode: func(raw []byte) *queengate.Error {
			req.Ack = &queengate.PopAck{}
			return decodePopAck(raw, `"ack"`, req.Ack)
		}},
		wire.Field{Name: "acks", Decode: popAcksInto(&req.Acks)},
		wire.Field{Name: "partitions", Decode: wire.WholeNumberInto("partitions", 1, queengate.MaxPopPartitions, &req.Partitions)},
	)
	switch {
	case werr != nil:
		return req, werr
	case req.Group == "":
		return req, wire.BadInput(`"group" is missing: want %s`, popShape.Example)
	case req.MaxAckPending > 0 && req.Consumer == "":
		return req, wire.BadInput(`"maxAckPending" bounds what one consumer holds: name it in "consumer"`)
	case req.Ack != nil && req.Acks != nil:
		return req, wire.BadInput(`give "ack" (one batch's) or "acks" (several batches'), not both`)
	}
	for i, ack := range carriedAcks(req) {
		if _, werr := ackItems(queengate.AckRequest{Group: req.Group, LeaseID: ack.LeaseID, Items: ack.Items}); werr != nil {
			werr.Text = carriedName(req.Acks != nil, i) + ": " + werr.Text
			return req, werr
		}
	}
	return req, nil
}

// carriedAcks are the acks a pop carries: its ack, or its list.
func carriedAcks(req queengate.PopRequest) []queengate.PopAck {
	if req.Ack != nil {
		return []queengate.PopAck{*req.Ack}
	}
	return req.Acks
}

// carriedName names a pop's carried ack in a 400: "ack", or "acks" and
// its index.
func carriedName(list bool, i int) string {
	if list {
		return `"acks" ` + strconv.Itoa(i)
	}
	return `"ack"`
}

// popAcksInto decodes a pop's list of carried acks: 1 to
// MaxPopPartitions objects, each as "ack".
func popAcksInto(dst *[]queengate.PopAck) func([]byte) *queengate.Error {
	return func(raw []byte) *queengate.Error {
		elems, ok := wire.ScanArray(raw)
		if !ok || len(elems) == 0 || len(elems) > queengate.MaxPopPartitions {
			return wire.BadInput(`"acks" must be an array of 1 to %d acks such as %s, not %s`, queengate.MaxPopPartitions,
				popAckShape.Example, wire.Describe(raw))
		}
		acks := make([]queengate.PopAck, len(elems))
		for i, e := range elems {
			if werr := decodePopAck(e, carriedName(true, i), &acks[i]); werr != nil {
				return werr
			}
		}
		*dst = acks
		return nil
	}
}

// consumerInto decodes a pop's consumer label: any string up to 128 bytes.
func consumerInto(dst *string) func([]byte) *queengate.Error {
	return func(raw []byte) *queengate.Error {
		s, ok := wire.DecodeString(raw)
		if !ok || len(s) > 128 {
			return wire.BadInput(`"consumer" must be a string of up to 128 bytes, not %s`, wire.Describe(raw))
		}
		*dst = s
		return nil
	}
}

// decodePopAck reads an ack a pop carries, named where.
func decodePopAck(raw []byte, where string, ack *queengate.PopAck) *queengate.Error {
	werr := wire.DecodeObject(raw, where, popAckShape,
		wire.Field{Name: "partition", Decode: wire.NameInto("partition", &ack.Partition)},
		wire.Field{Name: "leaseId", Decode: wire.LeaseIDInto(&ack.LeaseID)},
		wire.Field{Name: "items", Decode: ackItemsInto(&ack.Items)},
	)
	if werr == nil && ack.Partition == "" {
		werr = wire.BadInput(`%s: "partition" is missing: the partition of the batch it settles`, where)
	}
	return werr
}

// decodeAck reads an ack body: every problem is a 400 naming it.
func decodeAck(body []byte) (queengate.AckRequest, *queengate.Error) {
	var req queengate.AckRequest
	werr := wire.DecodeObject(body, wire.TheBody, ackShape,
		wire.Field{Name: "group", Decode: wire.NameInto("group", &req.Group)},
		wire.Field{Name: "leaseId", Decode: wire.LeaseIDInto(&req.LeaseID)},
		wire.Field{Name: "items", Decode: ackItemsInto(&req.Items)},
	)
	if werr == nil {
		_, werr = ackItems(req)
	}
	return req, werr
}

// ackItemsInto decodes an ack's items, each an object of ackItemShape.
func ackItemsInto(dst *[]queengate.AckItem) func([]byte) *queengate.Error {
	return func(raw []byte) *queengate.Error {
		elems, ok := wire.ScanArray(raw)
		if !ok {
			return wire.BadInput(`"items" must be an array of items such as %s, not %s`, ackItemShape.Example, wire.Describe(raw))
		}
		items := make([]queengate.AckItem, len(elems))
		// One set of fields for all items, decoding into the current one:
		// not four closures per item.
		var it *queengate.AckItem
		fields := ackItemFields(&it)
		for i, e := range elems {
			it = &items[i]
			where := func() string { return "item " + strconv.Itoa(i) }
			if werr := wire.DecodeObjectAt(e, where, ackItemShape, fields...); werr != nil {
				return werr
			}
		}
		*dst = items
		return nil
	}
}

// ackItemFields are an ack item's fields, decoded into *it.
func ackItemFields(it **queengate.AckItem) []wire.Field {
	return []wire.Field{
		{Name: "transactionId", Decode: func(raw []byte) *queengate.Error {
			if err := wire.StringInto("transactionId", &(*it).TransactionID)(raw); err != nil {
				return err
			}
			if (*it).TransactionID == "" {
				return wire.BadInput(`"transactionId" is empty: 1-%d bytes`, queengate.MaxTxnIDBytes)
			}
			return nil
		}},
		{Name: "offset", Decode: func(raw []byte) *queengate.Error {
			(*it).Offset = new(int64)
			return wire.WholeNumberInto("offset", 0, math.MaxInt64, (*it).Offset)(raw)
		}},
		{Name: "status", Decode: func(raw []byte) *queengate.Error { return wire.StringInto("status", &(*it).Status)(raw) }},
		{Name: "error", Decode: func(raw []byte) *queengate.Error { return wire.StringInto("error", &(*it).Error)(raw) }},
		{Name: "delayMs", Decode: func(raw []byte) *queengate.Error {
			return wire.WholeNumberInto("delayMs", 0, queengate.MaxDelayMs, &(*it).DelayMs)(raw)
		}},
	}
}

func (c *Consumers) ack(ctx context.Context, queue, partition string, body []byte) (any, *queengate.Error) {
	if werr := gateway.ValidPlace(queue, partition); werr != nil {
		return nil, werr
	}
	req, werr := decodeAck(body)
	if werr != nil {
		return nil, werr
	}
	ans, werr := c.settle(ctx, queue, partition, req)
	if werr != nil {
		return nil, werr
	}
	c.settled(queue, ans)
	return wire.RawAnswer(wire.AppendAckAnswer(nil, &ans)), nil
}

// settle carries out an ack, alone or carried by a pop.
func (c *Consumers) settle(ctx context.Context, queue, partition string, req queengate.AckRequest) (queengate.AckAnswer, *queengate.Error) {
	items, _, werr := c.checkAck(req)
	if werr != nil {
		return queengate.AckAnswer{}, werr
	}
	g, pid, werr := c.place(ctx, queue, partition, req.Group)
	if werr != nil {
		return queengate.AckAnswer{}, werr
	}
	c.activity.note(g.ID)
	c.tail.Forget(req.LeaseID)
	res, err := c.store.Ack(ctx, g, pid, req.LeaseID, items)
	if err != nil {
		return queengate.AckAnswer{}, c.groupFailed(g, err)
	}
	return c.ackAnswer(queue, g, req, items, res), nil
}

// popRequest is req's pop of group g (partition pid, 0 for any), its
// answer beside an ack answer of ackBytes.
func (c *Consumers) popRequest(g model.Group, pid int64, req queengate.PopRequest, ackBytes int) model.PopQuery {
	pr := model.PopQuery{Group: g, PartitionID: pid, Max: req.Max, Lease: time.Duration(req.LeaseMs) * time.Millisecond,
		Consumer: req.Consumer, MaxAckPending: req.MaxAckPending}
	pr.Room, pr.MaxBytes = c.popRoom(ackBytes, req.MaxBytes)
	// What a pop carrying no ack has room for: a message taking more
	// could never be delivered, and is dead-lettered instead of stalling
	// its partition.
	pr.MaxDelivery, _ = c.popRoom(0, 0)
	return pr
}

// checkAck checks an ack's items, and that its answer, at most bound
// bytes, fits beside a pop's envelope.
func (c *Consumers) checkAck(req queengate.AckRequest) (items []model.Settlement, bound int64, werr *queengate.Error) {
	if items, werr = ackItems(req); werr != nil {
		return nil, 0, werr
	}
	bound = ackAnswerBound(req.Items)
	if room := c.maxPayload() - popEnvelope; bound > room {
		return nil, 0, &queengate.Error{Code: queengate.CodeTooLarge, Text: fmt.Sprintf(
			"an ack of %d items could take up to %d bytes to answer (each result repeats its transactionId), over the %d an answer may take here: send the items in smaller acks",
			len(req.Items), bound, room)}
	}
	return items, bound, nil
}

// ackAnswer counts what the ack of items to group g settled and answers it.
func (c *Consumers) ackAnswer(queue string, g model.Group, req queengate.AckRequest, items []model.Settlement, res model.SettledBatch) queengate.AckAnswer {
	c.metrics.acked(queue, g.Name, items, &res)
	c.metrics.deadLettered(&c.log, res.DeadLetters)
	ans := queengate.AckAnswer{Items: make([]queengate.AckResult, len(items)), NextOffset: res.NextOffset,
		LeaseEnded: res.LeaseEnded, DeadLettered: res.DeadLettered}
	c.freedRoom(queue, res)
	for i, o := range res.Items {
		r := queengate.AckResult{Index: i, TransactionID: req.Items[i].TransactionID, Result: o.Result}
		if o.Offset >= 0 {
			off := o.Offset
			r.Offset = &off
		}
		ans.Items[i] = r
	}
	return ans
}

// ackAnswerBound is the most an ack's answer can take, encoded: each
// result repeats its item's transactionId.
func ackAnswerBound(items []queengate.AckItem) int64 {
	// An item's result without its id: index, offset and the longest
	// result name with their field names; the envelope: nextOffset and
	// the flags.
	const envelope, perItem = 128, 112
	n := int64(envelope)
	for _, it := range items {
		n += perItem + wire.MarshalledStringBound(it.TransactionID)
	}
	return n
}

// ackItems checks an ack's items: each names one message, by
// transactionId or offset, with status completed or failed.
func ackItems(req queengate.AckRequest) ([]model.Settlement, *queengate.Error) {
	switch {
	case !queengate.ValidName(req.Group):
		return nil, wire.BadInput(`"group" must name the consumer group: %s`, queengate.NameRule)
	case req.LeaseID == "":
		return nil, wire.BadInput(`"leaseId" is missing: the lease the messages were popped under`)
	case !wire.UUIDText.MatchString(req.LeaseID):
		return nil, wire.BadInput(`"leaseId" %q is not a lease id: the UUID a pop answered`, wire.Excerpt([]byte(req.LeaseID)))
	case len(req.Items) == 0 || len(req.Items) > queengate.MaxAckItems:
		return nil, wire.BadInput(`"items" has %d entries: 1 to %d`, len(req.Items), queengate.MaxAckItems)
	}
	items := make([]model.Settlement, len(req.Items))
	for i, it := range req.Items {
		switch {
		case (it.TransactionID == "") == (it.Offset == nil):
			return nil, wire.BadInput("item %d: give transactionId or offset, one of them", i)
		case it.Offset != nil && *it.Offset < 0:
			return nil, wire.BadInput("item %d: offset %d is negative", i, *it.Offset)
		case len(it.TransactionID) > queengate.MaxTxnIDBytes:
			return nil, wire.BadInput("item %d: transactionId over %d bytes", i, queengate.MaxTxnIDBytes)
		case it.Status == "":
			return nil, wire.BadInput(`item %d: "status" is missing: "completed" or "failed"`, i)
		case it.Status != queengate.AckCompleted && it.Status != queengate.AckFailed:
			return nil, wire.BadInput(`item %d: status %q: "completed" or "failed"`, i, wire.Excerpt([]byte(it.Status)))
		case len(it.Error) > queengate.MaxAckErrorSize:
			return nil, wire.BadInput("item %d: error over %d bytes", i, queengate.MaxAckErrorSize)
		case it.DelayMs != 0 && it.Status != queengate.AckFailed:
			return nil, wire.BadInput(`item %d: "delayMs" is for a failed item: it says how long the message waits before it is delivered again`, i)
		case it.DelayMs < 0 || it.DelayMs > queengate.MaxDelayMs:
			return nil, wire.BadInput(`item %d: "delayMs" is %d: from 0 to %d`, i, it.DelayMs, queengate.MaxDelayMs)
		}
		items[i] = model.Settlement{Offset: -1, TxnID: it.TransactionID, Completed: it.Status == queengate.AckCompleted, Error: it.Error,
			DelayMs: it.DelayMs}
		if it.Offset != nil {
			items[i].Offset = *it.Offset
		}
	}
	return items, nil
}

// place resolves an existing group and partition: 404 for either unknown.
func (c *Consumers) place(ctx context.Context, queue, partition, group string) (model.Group, int64, *queengate.Error) {
	g, err := c.group(ctx, queue, group, false)
	if err != nil {
		return g, 0, consumeError(err)
	}
	pid, err := c.partition(ctx, g.QueueID, partition)
	if err != nil {
		return g, 0, consumeError(err)
	}
	return g, pid, nil
}

func (c *Consumers) lease(ctx context.Context, queue, partition string, body []byte, renew bool) (any, *queengate.Error) {
	if werr := gateway.ValidPlace(queue, partition); werr != nil {
		return nil, werr
	}
	req, werr := decodeLease(body, renew)
	if werr != nil {
		return nil, werr
	}
	g, pid, werr := c.place(ctx, queue, partition, req.Group)
	if werr != nil {
		return nil, werr
	}
	c.activity.note(g.ID)
	until, ok, err := c.store.Lease(ctx, g, pid, req.LeaseID, time.Duration(req.LeaseMs)*time.Millisecond)
	if err == nil {
		c.metrics.leased(queue, g.Name, renew, ok)
	}
	switch {
	case err != nil:
		return nil, c.groupFailed(g, err)
	case !ok:
		return nil, &queengate.Error{Code: queengate.CodeConflict, Text: "lease " + req.LeaseID +
			" is not held: it ran out, was released, or another consumer's lease replaced it"}
	}
	ans := queengate.LeaseAnswer{LeaseID: req.LeaseID, Released: !renew}
	if renew {
		ans.LeaseUntil = &until
		c.tail.Renewed(req.LeaseID, until)
	} else {
		c.tail.Forget(req.LeaseID)
		c.announce(queue) // what the lease left is poppable now
	}
	return ans, nil
}

// decodeLease reads a renewal (renew) or a release body.
func decodeLease(body []byte, renew bool) (queengate.LeaseRequest, *queengate.Error) {
	var req queengate.LeaseRequest
	shape := releaseShape
	leaseMs := wire.Field{Name: "leaseMs", Refusal: "a release takes none: it ends the lease now"}
	if renew {
		shape = renewShape
		leaseMs = wire.Field{Name: "leaseMs", Decode: wire.WholeNumberInto("leaseMs", 1, queengate.MaxLeaseMs, &req.LeaseMs)}
	}
	werr := wire.DecodeObject(body, wire.TheBody, shape,
		wire.Field{Name: "group", Decode: wire.NameInto("group", &req.Group)},
		wire.Field{Name: "leaseId", Decode: wire.LeaseIDInto(&req.LeaseID)},
		leaseMs,
	)
	switch {
	case werr != nil:
		return req, werr
	case req.Group == "":
		return req, wire.BadInput(`"group" is missing: want %s`, shape.Example)
	case req.LeaseID == "":
		return req, wire.BadInput(`"leaseId" is missing: want %s`, shape.Example)
	case renew && req.LeaseMs == 0:
		return req, wire.BadInput(`"leaseMs" is missing: a renewal runs 1 to %d ms from now`, queengate.MaxLeaseMs)
	}
	return req, nil
}

func (c *Consumers) groups(ctx context.Context, queue string, body []byte) (any, *queengate.Error) {
	if werr := gateway.ValidQueue(queue); werr != nil {
		return nil, werr
	}
	page, werr := decodeGroups(body)
	if werr != nil {
		return nil, werr
	}
	q, err := c.store.QueueConfig(ctx, queue)
	if err != nil {
		return nil, consumeError(err)
	}
	gps, err := c.store.GroupPartitions(ctx, q.ID)
	if err != nil {
		return nil, gateway.StoreError(err)
	}
	activity, err := c.store.GroupActivity(ctx, q.ID)
	if err != nil {
		return nil, gateway.StoreError(err)
	}
	views := gateway.GroupViews(gps, activity)
	if page.Group != "" {
		if views, werr = groupPage(views, queue, page); werr != nil {
			return nil, werr
		}
	}
	fitPartitions(views, c.maxPayload()-groupsEnvelope)
	return queengate.GroupsAnswer{Queue: queue, Groups: views}, nil
}

// decodeGroups reads a groups request's optional body strictly.
func decodeGroups(body []byte) (queengate.GroupsRequest, *queengate.Error) {
	var req queengate.GroupsRequest
	if wire.Blank(body) {
		return req, nil
	}
	werr := wire.DecodeObject(body, wire.TheBody, groupsShape,
		wire.Field{Name: "group", Decode: wire.NameInto("group", &req.Group)},
		wire.Field{Name: "from", Decode: wire.NameInto("from", &req.From)},
	)
	if werr == nil && req.Group == "" {
		werr = wire.BadInput(`"group" is missing: want %s`, groupsShape.Example)
	}
	return req, werr
}

// groupPage keeps the group asked for, its partitions from page.From on.
func groupPage(views []queengate.GroupView, queue string, page queengate.GroupsRequest) ([]queengate.GroupView, *queengate.Error) {
	i := slices.IndexFunc(views, func(v queengate.GroupView) bool { return v.Group == page.Group })
	if i < 0 {
		return nil, &queengate.Error{Code: queengate.CodeNotFound, Text: fmt.Sprintf("no consumer group %q of queue %s", page.Group, queue)}
	}
	v := views[i]
	if page.From != "" {
		j := slices.IndexFunc(v.Partitions, func(p queengate.GroupPartitionView) bool { return p.Partition == page.From })
		if j < 0 {
			return nil, &queengate.Error{Code: queengate.CodeNotFound, Text: fmt.Sprintf("no partition %q of queue %s", page.From, queue)}
		}
		v.Partitions = v.Partitions[j:]
	}
	return []queengate.GroupView{v}, nil
}

// groupsEnvelope bounds what a groups answer takes beside its groups: the
// queue's name and the field names.
const groupsEnvelope = 512

// groupTotalsSize bounds what a group takes in a groups answer without
// its partitions: its name, totals and next partition (2 names of up to
// 128 bytes, 8 fields and their numbers).
const groupTotalsSize = 576

// fitPartitions keeps every group's totals, and partitions in order while
// the answer stays within room bytes; each group cut short names the first
// partition it leaves out.
func fitPartitions(views []queengate.GroupView, room int64) {
	room -= int64(len(views)) * groupTotalsSize
	for i := range views {
		v := &views[i]
		n, used := wire.Fitting(v.Partitions, int(max(room, 0)))
		room -= int64(used)
		if n < len(v.Partitions) {
			v.NextPartition = v.Partitions[n].Partition
			v.Partitions = v.Partitions[:n]
			room = 0 // the groups after it list none: a page continues one group
		}
	}
}

// consumeError maps unknown queues, groups and partitions to 404s.
func consumeError(err error) *queengate.Error {
	switch {
	case errors.Is(err, model.ErrQueueNotFound):
		return gateway.NotFound(err, model.ErrQueueNotFound, "unknown queue ")
	case errors.Is(err, model.ErrNotFound):
		return gateway.NotFound(err, model.ErrNotFound, "unknown ")
	case errors.Is(err, model.ErrGroupNotFound):
		return &queengate.Error{Code: queengate.CodeNotFound, Text: err.Error()}
	}
	return gateway.StoreError(err)
}
