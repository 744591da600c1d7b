package timers

import (
	"context"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go"

	queengate "github.com/queengate/queengate"
	"github.com/queengate/queengate/gateway"
	"github.com/queengate/queengate/internal/wire"
	"github.com/queengate/queengate/model"
)

// maxTimerDelay bounds delayMs (and how far ahead fireAt may be): ten years.
const maxTimerDelay = 10 * 365 * 24 * time.Hour

// maxTimerList bounds a timer list's limit.
const maxTimerList = 10000

// timerRequest is a decoded schedule.
type timerRequest struct {
	txnID  string
	data   []byte
	meta   []byte // its headers and data encoding (model.AppendMeta)
	fireAt time.Time
}

// timerFields are a schedule's fields beyond a push message's.
var timerFields = []string{"fireAt", "delayMs"}

// decodeTimer validates a schedule body: a push message (transactionId,
// data: the push's rules, no other field) plus exactly one of fireAt
// (RFC 3339) and delayMs (an integer >= 0, from now).
func decodeTimer(body []byte, now time.Time) (timerRequest, *queengate.Error) {
	m, werr := wire.DecodeOne(body, "a timer", timerFields...)
	if werr != nil {
		return timerRequest{}, werr
	}
	data, meta, werr := m.Payload(0)
	if werr != nil {
		werr.Text = strings.Replace(werr.Text, "message 0: ", "", 1)
		return timerRequest{}, werr
	}
	r := timerRequest{txnID: m.TxnIDOrMint(), data: data, meta: meta}
	fireAt, delayMs := m.Extra[0], m.Extra[1]
	hasAt, hasDelay := fireAt != nil && string(fireAt) != "null", delayMs != nil && string(delayMs) != "null"
	switch {
	case hasAt == hasDelay:
		return timerRequest{}, wire.BadInput(`give exactly one of "fireAt" (RFC 3339) and "delayMs" (milliseconds from now)`)
	case hasAt:
		t, werr := decodeFireAt(fireAt, now)
		if werr != nil {
			return timerRequest{}, werr
		}
		r.fireAt = t
	default:
		d, werr := decodeDelay(delayMs)
		if werr != nil {
			return timerRequest{}, werr
		}
		r.fireAt = now.Add(d)
	}
	return r, nil
}

func decodeFireAt(raw []byte, now time.Time) (time.Time, *queengate.Error) {
	t, werr := parseFireAt(raw)
	if werr != nil {
		return time.Time{}, werr
	}
	if t.Sub(now) > maxTimerDelay {
		s, _ := wire.DecodeString(raw)
		return time.Time{}, wire.BadInput(`"fireAt" %q is more than ten years ahead`, s)
	}
	return t, nil
}

// parseFireAt reads a fireAt: an RFC 3339 string with a zone.
func parseFireAt(raw []byte) (time.Time, *queengate.Error) { return gateway.ParseTime("fireAt", raw) }

func decodeDelay(raw []byte) (time.Duration, *queengate.Error) {
	var ms int64
	// The bound is checked before converting: a Duration of that many ms
	// overflows.
	if werr := wire.WholeNumberInto("delayMs", 0, int64(maxTimerDelay/time.Millisecond), &ms)(raw); werr != nil {
		werr.Text += " (milliseconds from now, up to ten years)"
		return 0, werr
	}
	return time.Duration(ms) * time.Millisecond, nil
}

// Ops serves the timer subjects: producers schedule and cancel timers
// over NATS, and operators list them (also GET /timers on the admin
// HTTP, with the admin token).
type Ops struct {
	svc *Service
	// answerBudget is the most a list's answer may take (the operator
	// API's, operator.Ops.AnswerBudget).
	answerBudget func() int
}

// NewOps serves svc's timers; a list's answer takes at most
// answerBudget bytes.
func NewOps(svc *Service, answerBudget func() int) *Ops {
	return &Ops{svc: svc, answerBudget: answerBudget}
}

// schedule stores a timer; its message is bounded as a push's is, by the
// connection's maxPayload.
func (t *Ops) schedule(ctx context.Context, queue, partition string, body []byte, maxPayload int64) (any, *queengate.Error) {
	if werr := gateway.ValidPlace(queue, partition); werr != nil {
		return nil, werr
	}
	r, werr := decodeTimer(body, time.Now())
	if werr != nil {
		return nil, werr
	}
	if werr := wire.CheckDataSize(r.data, r.meta, maxPayload); werr != nil {
		return nil, werr
	}
	s, err := t.svc.Schedule(ctx, queue, partition, r.txnID, r.data, r.meta, r.fireAt)
	if err != nil {
		return nil, gateway.StoreError(err)
	}
	return queengate.TimerScheduled{TimerID: s.TimerID, Status: s.Status, FireAt: s.FireAt,
		TransactionID: s.TxnID, Existing: s.Existing}, nil
}

var (
	cancelShape        = wire.Shape{Name: "a cancel", Example: `{"timerId": "<uuid>"}`}
	timerListShape     = wire.Shape{Name: "a timer list", Example: `{"queue": "...", "limit": 100, "from": {...}} (each optional; or an empty body)`}
	timerPositionShape = wire.Shape{Name: "a timer position", Example: `{"fireAt": "2026-12-01T09:00:00.123456Z", "timerId": "<uuid>"} (a timer list's "next")`}
)

func (t *Ops) cancel(ctx context.Context, body []byte) (any, *queengate.Error) {
	id, werr := decodeCancel(body)
	if werr != nil {
		return nil, werr
	}
	answer, err := t.svc.Cancel(ctx, id)
	if err != nil {
		return nil, gateway.StoreError(err)
	}
	return queengate.TimerCancelled{Status: answer}, nil
}

// decodeCancel reads a cancel body: the timerId a schedule answered.
func decodeCancel(body []byte) (id string, werr *queengate.Error) {
	werr = wire.DecodeObject(body, wire.TheBody, cancelShape, wire.Field{Name: "timerId", Decode: timerIDInto(&id)})
	if werr == nil && id == "" {
		werr = wire.BadInput(`"timerId" is missing: want %s`, cancelShape.Example)
	}
	return id, werr
}

// timerIDInto decodes a timerId: the UUID a schedule answered.
func timerIDInto(dst *string) func([]byte) *queengate.Error {
	return func(raw []byte) *queengate.Error {
		if s, ok := wire.DecodeString(raw); ok && wire.UUIDText.MatchString(s) {
			*dst = s
			return nil
		}
		return wire.BadInput(`"timerId" must be the UUID a schedule answered, not %s`, wire.Describe(raw))
	}
}

// timerList is a timer list request: a queue ("": every queue), a limit
// (nil: 100) and the position to list from (nil: the first due).
type timerList struct {
	queue string
	limit *int
	from  *model.TimerKey
}

// list lists pending timers in the store's order (fire time, then id);
// an answer with more pending after it names the next page's position.
func (t *Ops) list(ctx context.Context, req timerList) (any, *queengate.Error) {
	if req.queue != "" {
		if werr := gateway.ValidQueue(req.queue); werr != nil {
			return nil, werr
		}
	}
	limit := 100
	if req.limit != nil {
		limit = *req.limit
	}
	if limit < 1 || limit > maxTimerList {
		return nil, wire.BadInput("limit %d: 1 to %d", limit, maxTimerList)
	}
	// One more than asked: whether another page follows.
	ts, err := t.svc.List(ctx, req.queue, limit+1, req.from)
	if err != nil {
		return nil, gateway.StoreError(err)
	}
	out := queengate.TimersAnswer{Timers: make([]queengate.TimerView, 0, len(ts))}
	for _, x := range ts {
		out.Timers = append(out.Timers, queengate.TimerView{TimerID: x.ID, Queue: x.Queue, Partition: x.Partition,
			TransactionID: x.TxnID, FireAt: x.FireAt.UTC(), CreatedAt: x.CreatedAt.UTC()})
	}
	if len(out.Timers) > limit {
		out.Next = timerPosition(out.Timers[limit])
		out.Timers = out.Timers[:limit]
	}
	fitTimers(&out, t.answerBudget())
	return out, nil
}

// timerPosition is where v is in the timer list's order.
func timerPosition(v queengate.TimerView) *queengate.TimerPosition {
	return &queengate.TimerPosition{FireAt: v.FireAt, TimerID: v.TimerID}
}

func (t *Ops) listNATS(ctx context.Context, body []byte) (any, *queengate.Error) {
	req, werr := decodeTimerList(body)
	if werr != nil {
		return nil, werr
	}
	return t.list(ctx, req)
}

// decodeTimerList reads a list body: empty, or a queue, a limit and a
// position to list from.
func decodeTimerList(body []byte) (req timerList, werr *queengate.Error) {
	if wire.Blank(body) {
		return req, nil
	}
	werr = wire.DecodeObject(body, wire.TheBody, timerListShape,
		wire.Field{Name: "queue", Decode: wire.NameInto("queue", &req.queue)},
		wire.Field{Name: "limit", Decode: func(raw []byte) *queengate.Error {
			req.limit = new(int)
			return wire.WholeNumberInto("limit", 1, maxTimerList, req.limit)(raw)
		}},
		wire.Field{Name: "from", Decode: func(raw []byte) *queengate.Error {
			req.from, werr = decodeTimerPosition(raw)
			return werr
		}},
	)
	return req, werr
}

// decodeTimerPosition reads a list's "from": the "next" a list answered.
func decodeTimerPosition(raw []byte) (*model.TimerKey, *queengate.Error) {
	var (
		id     string
		fireAt *time.Time
	)
	werr := wire.DecodeObject(raw, `"from"`, timerPositionShape,
		wire.Field{Name: "fireAt", Decode: func(raw []byte) *queengate.Error {
			at, werr := parseFireAt(raw)
			fireAt = &at
			return werr
		}},
		wire.Field{Name: "timerId", Decode: timerIDInto(&id)},
	)
	if werr == nil && (fireAt == nil || id == "") {
		werr = wire.BadInput(`"from" takes both "fireAt" and "timerId": want %s`, timerPositionShape.Example)
	}
	if werr != nil {
		return nil, werr
	}
	return &model.TimerKey{FireAt: *fireAt, ID: id}, nil
}

// timerListQuery reads GET /timers's parameters: queue, limit, and the
// position to list from as fromFireAt and fromTimerId (both or neither).
func timerListQuery(q url.Values) (req timerList, werr *queengate.Error) {
	if werr := gateway.OnlyParameters(q, "/timers", "queue", "limit", "fromFireAt", "fromTimerId"); werr != nil {
		return req, werr
	}
	req.queue = q.Get("queue")
	if q.Has("limit") {
		s := q.Get("limit")
		n, err := strconv.Atoi(s)
		if err != nil {
			return req, wire.BadInput("limit %q: an integer from 1 to %d", wire.Excerpt([]byte(s)), maxTimerList)
		}
		req.limit = &n
	}
	if q.Has("fromFireAt") != q.Has("fromTimerId") {
		return req, wire.BadInput("give both fromFireAt and fromTimerId (a timer list's next), or neither")
	}
	if q.Has("fromFireAt") {
		body := wire.AppendJSONString([]byte(`{"fireAt":`), q.Get("fromFireAt"))
		body = wire.AppendJSONString(append(body, `,"timerId":`...), q.Get("fromTimerId"))
		req.from, werr = decodeTimerPosition(append(body, '}'))
	}
	return req, werr
}

// Endpoints serves schedule, cancel and list.
func (t *Ops) Endpoints(g *gateway.Gateway) ([]gateway.Endpoint, error) {
	return t.Operations(g.Prefix(), g.Conn()), nil
}

// Operations are the timer entries; list is also GET /timers on the
// admin HTTP (an operator request).
func (t *Ops) Operations(prefix string, nc *nats.Conn) []gateway.Endpoint {
	s := queengate.Subjects{Prefix: prefix}
	timer := s.Verb(queengate.APITimer)
	return gateway.WithSubjects(s, []gateway.Endpoint{
		// A timerId names no queue, but it is a random UUID only its
		// scheduler (or an operator's list) has: holding it is the right
		// to cancel, as a leaseId is to ack (docs/security.md).
		// <prefix>.timer.cancel.x and .list.x are schedules (to queues
		// named cancel and list), and <prefix>.timer.<one token> is
		// cancel, list or nothing: the misshapen subjects left to answer
		// are <prefix>.timer and four tokens or more.
		{Name: "timer-cancel", API: queengate.APITimerCancel, MisshapenOnly: []string{}, Op: func(ctx context.Context, req *gateway.Request) (any, *queengate.Error) {
			return t.cancel(ctx, req.Data)
		}},
		{Name: "timer-list", API: queengate.APITimerList, MisshapenOnly: []string{}, Admin: true, AnswerOnly: true, Op: func(ctx context.Context, req *gateway.Request) (any, *queengate.Error) {
			return t.listNATS(ctx, req.Data)
		}, HTTP: []gateway.HTTPForm{{Route: queengate.APITimerList.Route(), Op: func(r *http.Request, _ []byte) (any, *queengate.Error) {
			req, werr := timerListQuery(r.URL.Query())
			if werr != nil {
				return nil, werr
			}
			return t.list(r.Context(), req)
		}}}},
		{Name: "timer-schedule", API: queengate.APITimer,
			MisshapenOnly: []string{timer, timer + ".*.*.>"}, Op: func(ctx context.Context, req *gateway.Request) (any, *queengate.Error) {
				return t.schedule(ctx, req.Names[0], req.Names[1], req.Data, nc.MaxPayload())
			}},
	})
}

// fitTimers cuts a timer list to what fits budget bytes; a cut list names
// the position of the first timer it leaves out.
func fitTimers(a *queengate.TimersAnswer, budget int) {
	if wire.EncodedLen(a) <= budget {
		return
	}
	a.Truncated = true
	n, _ := wire.Fitting(a.Timers, budget-wire.EncodedLen(queengate.TimersAnswer{Truncated: true, Next: &widestPosition}))
	if n < len(a.Timers) {
		a.Next = timerPosition(a.Timers[n])
	}
	a.Timers = a.Timers[:n]
}

// widestPosition encodes in as many bytes as any timer position.
var widestPosition = queengate.TimerPosition{FireAt: time.Date(9999, 12, 31, 23, 59, 59, 999999999, time.UTC),
	TimerID: "00000000-0000-0000-0000-000000000000"}
