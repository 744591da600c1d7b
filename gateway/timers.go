package gateway

import (
	"bytes"
	"context"
	queengate "github.com/queengate/queengate"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/queengate/queengate/model"
	"github.com/queengate/queengate/timers"
)

// maxTimerDelay bounds delayMs (and how far ahead fireAt may be): ten years.
const maxTimerDelay = 10 * 365 * 24 * time.Hour

// maxTimerList bounds a timer list's limit.
const maxTimerList = 10000

// timerRequest is a decoded schedule.
type timerRequest struct {
	txnID  string
	data   []byte
	fireAt time.Time
}

// timerFields are a schedule's fields beyond a push message's.
var timerFields = []string{"fireAt", "delayMs"}

// decodeTimer validates a schedule body: a push message (transactionId,
// data: the push's rules, no other field) plus exactly one of fireAt
// (RFC 3339) and delayMs (an integer >= 0, from now).
func decodeTimer(body []byte, now time.Time) (timerRequest, *queengate.Error) {
	m, werr := decodeOneMessage(body, "a timer", timerFields...)
	if werr != nil {
		return timerRequest{}, werr
	}
	r := timerRequest{txnID: m.txnIDOrMint(), data: m.data}
	fireAt, delayMs := m.extra[0], m.extra[1]
	hasAt, hasDelay := fireAt != nil && string(fireAt) != "null", delayMs != nil && string(delayMs) != "null"
	switch {
	case hasAt == hasDelay:
		return timerRequest{}, badInput(`give exactly one of "fireAt" (RFC 3339) and "delayMs" (milliseconds from now)`)
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

// decodeOneMessage decodes a body holding one push message (and the
// extra fields named) with the push decoder and its checks. what names
// it ("a timer") where it is refused as an array.
func decodeOneMessage(body []byte, what string, extra ...string) (*rawMessage, *queengate.Error) {
	switch {
	case jsonBlank(body):
		return nil, badInput("empty body: %s is one JSON message object", what)
	case bytes.HasPrefix(bytes.TrimSpace(body), []byte("[")):
		return nil, badInput("%s is one message object, not an array", what)
	}
	raw, werr := scanMessages(body, 1, extra...)
	if werr != nil && werr.Message == notMessages {
		werr.Message = what + " must be one JSON message object"
	}
	if werr == nil {
		werr = raw[0].check(0)
	}
	if werr != nil {
		werr.Message = strings.Replace(werr.Message, "message 0: ", "", 1)
		return nil, werr
	}
	return &raw[0], nil
}

func decodeFireAt(raw []byte, now time.Time) (time.Time, *queengate.Error) {
	t, werr := parseFireAt(raw)
	if werr != nil {
		return time.Time{}, werr
	}
	if t.Sub(now) > maxTimerDelay {
		s, _ := decodeString(raw)
		return time.Time{}, badInput(`"fireAt" %q is more than ten years ahead`, s)
	}
	return t, nil
}

// parseFireAt reads a fireAt: an RFC 3339 string with a zone.
func parseFireAt(raw []byte) (time.Time, *queengate.Error) { return parseTime("fireAt", raw) }

// parseTime reads field name's time: an RFC 3339 string with a zone.
func parseTime(name string, raw []byte) (time.Time, *queengate.Error) {
	s, ok := decodeString(raw)
	if !ok {
		return time.Time{}, badInput(`%q must be an RFC 3339 string such as "2026-12-01T09:00:00Z", not %s`, name, describe(raw))
	}
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return time.Time{}, badInput(`%q %q is not RFC 3339 with a zone, such as "2026-12-01T09:00:00Z"`, name, clip(s))
	}
	return t, nil
}

func decodeDelay(raw []byte) (time.Duration, *queengate.Error) {
	var ms int64
	// The bound is checked before converting: a Duration of that many ms
	// overflows.
	if werr := wholeNumberInto("delayMs", 0, int64(maxTimerDelay/time.Millisecond), &ms)(raw); werr != nil {
		werr.Message += " (milliseconds from now, up to ten years)"
		return 0, werr
	}
	return time.Duration(ms) * time.Millisecond, nil
}

// parseTimerSubject splits <prefix>.timer.<queue>.<partition>.
func parseTimerSubject(prefix, subject string) (queue, partition string, werr *queengate.Error) {
	rest, ok := strings.CutPrefix(subject, queengate.Subjects{Prefix: prefix}.Verb(queengate.APITimer)+".")
	parts := strings.Split(rest, ".")
	if !ok || len(parts) != 2 {
		return "", "", badInput("timer subject %q: want %s", subject, queengate.APITimer.Template(prefix))
	}
	return parts[0], parts[1], validPlace(parts[0], parts[1])
}

// TimerOps serves timers over NATS and lists them over HTTP.
type TimerOps struct {
	svc *timers.Service
	ops *Ops // for the admin token of list
}

// NewTimerOps wires a timers service to the wire.
func NewTimerOps(svc *timers.Service, ops *Ops) *TimerOps { return &TimerOps{svc: svc, ops: ops} }

// schedule stores a timer; its message is bounded as a push's is, by the
// connection's maxPayload.
func (t *TimerOps) schedule(ctx context.Context, prefix, subject string, body []byte, maxPayload int64) (any, *queengate.Error) {
	queue, partition, werr := parseTimerSubject(prefix, subject)
	if werr != nil {
		return nil, werr
	}
	r, werr := decodeTimer(body, time.Now())
	if werr != nil {
		return nil, werr
	}
	if werr := checkDataSize(r.data, maxPayload); werr != nil {
		return nil, werr
	}
	s, err := t.svc.Schedule(ctx, queue, partition, r.txnID, r.data, r.fireAt)
	if err != nil {
		return nil, storeError(err)
	}
	return queengate.TimerScheduled{TimerID: s.TimerID, Status: s.Status, FireAt: s.FireAt,
		TransactionID: s.TransactionID, Existing: s.Existing}, nil
}

var (
	cancelShape        = objectShape{"a cancel", `{"timerId": "<uuid>"}`}
	timerListShape     = objectShape{"a timer list", `{"queue": "...", "limit": 100, "from": {...}} (each optional; or an empty body)`}
	timerPositionShape = objectShape{"a timer position", `{"fireAt": "2026-12-01T09:00:00.123456Z", "timerId": "<uuid>"} (a timer list's "next")`}
)

func (t *TimerOps) cancel(ctx context.Context, body []byte) (any, *queengate.Error) {
	id, werr := decodeCancel(body)
	if werr != nil {
		return nil, werr
	}
	answer, err := t.svc.Cancel(ctx, id)
	if err != nil {
		return nil, storeError(err)
	}
	return queengate.TimerCancelled{Status: answer}, nil
}

// decodeCancel reads a cancel body: the timerId a schedule answered.
func decodeCancel(body []byte) (id string, werr *queengate.Error) {
	werr = decodeObject(body, theBody, cancelShape, objectField{name: "timerId", decode: timerIDInto(&id)})
	if werr == nil && id == "" {
		werr = badInput(`"timerId" is missing: want %s`, cancelShape.example)
	}
	return id, werr
}

// timerIDInto decodes a timerId: the UUID a schedule answered.
func timerIDInto(dst *string) func([]byte) *queengate.Error {
	return func(raw []byte) *queengate.Error {
		if s, ok := decodeString(raw); ok && uuidText.MatchString(s) {
			*dst = s
			return nil
		}
		return badInput(`"timerId" must be the UUID a schedule answered, not %s`, describe(raw))
	}
}

// timerList is a timer list request: a queue ("": every queue), a limit
// (nil: 100) and the position to list from (nil: the first due).
type timerList struct {
	queue string
	limit *int
	from  *model.TimerPosition
}

// list lists pending timers in the store's order (fire time, then id);
// an answer with more pending after it names the next page's position.
func (t *TimerOps) list(ctx context.Context, req timerList) (any, *queengate.Error) {
	if req.queue != "" {
		if werr := validQueue(req.queue); werr != nil {
			return nil, werr
		}
	}
	limit := 100
	if req.limit != nil {
		limit = *req.limit
	}
	if limit < 1 || limit > maxTimerList {
		return nil, badInput("limit %d: 1 to %d", limit, maxTimerList)
	}
	// One more than asked: whether another page follows.
	ts, err := t.svc.List(ctx, req.queue, limit+1, req.from)
	if err != nil {
		return nil, storeError(err)
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
	fitTimers(&out, t.ops.answerBudget())
	return out, nil
}

// timerPosition is where v is in the timer list's order.
func timerPosition(v queengate.TimerView) *queengate.TimerPosition {
	return &queengate.TimerPosition{FireAt: v.FireAt, TimerID: v.TimerID}
}

func (t *TimerOps) listNATS(ctx context.Context, body []byte) (any, *queengate.Error) {
	req, werr := decodeTimerList(body)
	if werr != nil {
		return nil, werr
	}
	return t.list(ctx, req)
}

// decodeTimerList reads a list body: empty, or a queue, a limit and a
// position to list from.
func decodeTimerList(body []byte) (req timerList, werr *queengate.Error) {
	if jsonBlank(body) {
		return req, nil
	}
	werr = decodeObject(body, theBody, timerListShape,
		objectField{name: "queue", decode: nameInto("queue", &req.queue)},
		objectField{name: "limit", decode: func(raw []byte) *queengate.Error {
			req.limit = new(int)
			return wholeNumberInto("limit", 1, maxTimerList, req.limit)(raw)
		}},
		objectField{name: "from", decode: func(raw []byte) *queengate.Error {
			req.from, werr = decodeTimerPosition(raw)
			return werr
		}},
	)
	return req, werr
}

// decodeTimerPosition reads a list's "from": the "next" a list answered.
func decodeTimerPosition(raw []byte) (*model.TimerPosition, *queengate.Error) {
	var (
		id     string
		fireAt *time.Time
	)
	werr := decodeObject(raw, `"from"`, timerPositionShape,
		objectField{name: "fireAt", decode: func(raw []byte) *queengate.Error {
			at, werr := parseFireAt(raw)
			fireAt = &at
			return werr
		}},
		objectField{name: "timerId", decode: timerIDInto(&id)},
	)
	if werr == nil && (fireAt == nil || id == "") {
		werr = badInput(`"from" takes both "fireAt" and "timerId": want %s`, timerPositionShape.example)
	}
	if werr != nil {
		return nil, werr
	}
	return &model.TimerPosition{FireAt: *fireAt, ID: id}, nil
}

// timerListQuery reads GET /timers's parameters: queue, limit, and the
// position to list from as fromFireAt and fromTimerId (both or neither).
func timerListQuery(q url.Values) (req timerList, werr *queengate.Error) {
	if werr := onlyParameters(q, "/timers", "queue", "limit", "fromFireAt", "fromTimerId"); werr != nil {
		return req, werr
	}
	req.queue = q.Get("queue")
	if q.Has("limit") {
		s := q.Get("limit")
		n, err := strconv.Atoi(s)
		if err != nil {
			return req, badInput("limit %q: an integer from 1 to %d", excerpt([]byte(s)), maxTimerList)
		}
		req.limit = &n
	}
	if q.Has("fromFireAt") != q.Has("fromTimerId") {
		return req, badInput("give both fromFireAt and fromTimerId (a timer list's next), or neither")
	}
	if q.Has("fromFireAt") {
		body := appendJSONString([]byte(`{"fireAt":`), q.Get("fromFireAt"))
		body = appendJSONString(append(body, `,"timerId":`...), q.Get("fromTimerId"))
		req.from, werr = decodeTimerPosition(append(body, '}'))
	}
	return req, werr
}

// addEndpoints serves schedule, cancel and list.
func (t *TimerOps) addEndpoints(g *Gateway) error {
	p := g.cfg.Prefix
	s := queengate.Subjects{Prefix: p}
	timer := s.Verb(queengate.APITimer)
	return g.addRequestEndpoints([]requestEndpoint{
		// A timerId names no queue, but it is a random UUID only its
		// scheduler (or an operator's list) has: holding it is the right
		// to cancel, as a leaseId is to ack (docs/security.md).
		// <prefix>.timer.cancel.x and .list.x are schedules (to queues
		// named cancel and list), and <prefix>.timer.<one token> is
		// cancel, list or nothing: the misshapen subjects left to answer
		// are <prefix>.timer and four tokens or more.
		{name: "timer-cancel", verb: s.Verb(queengate.APITimerCancel), misshapenOnly: []string{}, op: func(ctx context.Context, req *request) (any, *queengate.Error) {
			return t.cancel(ctx, req.Data)
		}},
		{name: "timer-list", verb: s.Verb(queengate.APITimerList), misshapenOnly: []string{}, operator: true, answerOnly: true, op: func(ctx context.Context, req *request) (any, *queengate.Error) {
			return t.listNATS(ctx, req.Data)
		}},
		{name: "timer-schedule", verb: timer, names: queengate.APITimer.Names,
			misshapenOnly: []string{timer, timer + ".*.*.>"}, op: func(ctx context.Context, req *request) (any, *queengate.Error) {
				return t.schedule(ctx, p, req.Subject, req.Data, g.nc.MaxPayload())
			}},
	})
}

// MountTimers serves GET /timers on the admin HTTP (an operator request).
func (a *Admin) MountTimers(t *TimerOps) {
	a.mux.HandleFunc("GET /timers", a.opsHandler(t.ops, func(r *http.Request, _ []byte) (any, *queengate.Error) {
		req, werr := timerListQuery(r.URL.Query())
		if werr != nil {
			return nil, werr
		}
		return t.list(r.Context(), req)
	}))
	a.mux.HandleFunc("/timers", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Allow", "GET")
		writeError(w, &queengate.Error{Code: queengate.CodeMethodNotAllowed, Message: r.Method + " /timers: use GET (schedule and cancel go over NATS)"})
	})
}
