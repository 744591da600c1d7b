package gateway

import (
	"bytes"
	"context"
	queengate "github.com/queengate/queengate"
	"net/http"
	"strconv"
	"strings"
	"time"

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
	if bytes.HasPrefix(bytes.TrimSpace(body), []byte("[")) {
		return nil, badInput("%s is one message object, not an array", what)
	}
	raw, werr := scanMessages(body, 1, extra...)
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
	s, ok := decodeString(raw)
	if !ok {
		return time.Time{}, badInput(`"fireAt" must be an RFC 3339 string such as "2026-12-01T09:00:00Z", not %s`, describe(raw))
	}
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return time.Time{}, badInput(`"fireAt" %q is not RFC 3339 with a zone, such as "2026-12-01T09:00:00Z"`, s)
	}
	if t.Sub(now) > maxTimerDelay {
		return time.Time{}, badInput(`"fireAt" %q is more than ten years ahead`, s)
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
	rest, ok := strings.CutPrefix(subject, prefix+".timer.")
	parts := strings.Split(rest, ".")
	if !ok || len(parts) != 2 {
		return "", "", badInput("timer subject %q: want %s.timer.<queue>.<partition>", subject, prefix)
	}
	if !queengate.ValidName(parts[0]) {
		return "", "", badInput("bad queue name %q: 1-128 bytes of [A-Za-z0-9_-]", parts[0])
	}
	if !queengate.ValidName(parts[1]) {
		return "", "", badInput("bad partition name %q: 1-128 bytes of [A-Za-z0-9_-]", parts[1])
	}
	return parts[0], parts[1], nil
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
	cancelShape    = objectShape{"a cancel", `{"timerId": "<uuid>"}`}
	timerListShape = objectShape{"a timer list", `{"queue": "...", "limit": 100} (both optional; or an empty body)`}
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
	werr = decodeObject(body, theBody, cancelShape, objectField{name: "timerId", decode: func(raw []byte) *queengate.Error {
		if s, ok := decodeString(raw); ok && uuidText.MatchString(s) {
			id = s
			return nil
		}
		return badInput(`"timerId" must be the UUID a schedule answered, not %s`, describe(raw))
	}})
	if werr == nil && id == "" {
		werr = badInput(`"timerId" is missing: want %s`, cancelShape.example)
	}
	return id, werr
}

// list lists pending timers; limit nil takes the default (100).
func (t *TimerOps) list(ctx context.Context, queue string, limitArg *int) (any, *queengate.Error) {
	if queue != "" && !queengate.ValidName(queue) {
		return nil, badInput("bad queue name %q: 1-128 bytes of [A-Za-z0-9_-]", queue)
	}
	limit := 100
	if limitArg != nil {
		limit = *limitArg
	}
	if limit < 1 || limit > maxTimerList {
		return nil, badInput("limit %d: 1 to %d", limit, maxTimerList)
	}
	ts, err := t.svc.List(ctx, queue, limit)
	if err != nil {
		return nil, storeError(err)
	}
	out := queengate.TimersAnswer{Timers: make([]queengate.TimerView, 0, len(ts))}
	for _, x := range ts {
		out.Timers = append(out.Timers, queengate.TimerView{TimerID: x.ID, Queue: x.Queue, Partition: x.Partition,
			TransactionID: x.TxnID, FireAt: x.FireAt.UTC(), CreatedAt: x.CreatedAt.UTC()})
	}
	fitTimers(&out, t.ops.answerBudget())
	return out, nil
}

func (t *TimerOps) listNATS(ctx context.Context, body []byte) (any, *queengate.Error) {
	queue, limit, werr := decodeTimerList(body)
	if werr != nil {
		return nil, werr
	}
	return t.list(ctx, queue, limit)
}

// decodeTimerList reads a list body: empty, or a queue and a limit.
func decodeTimerList(body []byte) (queue string, limit *int, werr *queengate.Error) {
	if jsonBlank(body) {
		return "", nil, nil
	}
	werr = decodeObject(body, theBody, timerListShape,
		objectField{name: "queue", decode: nameInto("queue", &queue)},
		objectField{name: "limit", decode: func(raw []byte) *queengate.Error {
			limit = new(int)
			return wholeNumberInto("limit", 1, maxTimerList, limit)(raw)
		}},
	)
	return queue, limit, werr
}

// addEndpoints serves schedule, cancel and list.
func (t *TimerOps) addEndpoints(g *Gateway) error {
	p := g.cfg.Prefix
	return g.addRequestEndpoints([]requestEndpoint{
		// A timerId names no queue, but it is a random UUID only its
		// scheduler (or an operator's list) has: holding it is the right
		// to cancel, as a leaseId is to ack (docs/security.md).
		// <prefix>.timer.cancel.x and .list.x are schedules (to queues
		// named cancel and list), and <prefix>.timer.<one token> is
		// cancel, list or nothing: the misshapen subjects left to answer
		// are <prefix>.timer and four tokens or more.
		{name: "timer-cancel", verb: p + ".timer.cancel", misshapenOnly: []string{}, op: func(ctx context.Context, req *request) (any, *queengate.Error) {
			return t.cancel(ctx, req.Data)
		}},
		{name: "timer-list", verb: p + ".timer.list", misshapenOnly: []string{}, operator: true, answerOnly: true, op: func(ctx context.Context, req *request) (any, *queengate.Error) {
			return t.listNATS(ctx, req.Data)
		}},
		{name: "timer-schedule", verb: p + ".timer", names: []string{"<queue>", "<partition>"},
			misshapenOnly: []string{p + ".timer", p + ".timer.*.*.>"}, op: func(ctx context.Context, req *request) (any, *queengate.Error) {
				return t.schedule(ctx, p, req.Subject, req.Data, g.nc.MaxPayload())
			}},
	})
}

// MountTimers serves GET /timers on the admin HTTP (an operator request).
func (a *Admin) MountTimers(t *TimerOps) {
	a.mux.HandleFunc("GET /timers", a.opsHandler(t.ops, func(r *http.Request, _ []byte) (any, *queengate.Error) {
		var limit *int
		if r.URL.Query().Has("limit") {
			s := r.URL.Query().Get("limit")
			n, err := strconv.Atoi(s)
			if err != nil {
				return nil, badInput("limit %q: an integer from 1 to 10000", s)
			}
			limit = &n
		}
		return t.list(r.Context(), r.URL.Query().Get("queue"), limit)
	}))
	a.mux.HandleFunc("/timers", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Allow", "GET")
		writeError(w, &queengate.Error{Code: queengate.CodeMethodNotAllowed, Message: r.Method + " /timers: use GET (schedule and cancel go over NATS)"})
	})
}
