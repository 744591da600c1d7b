package gateway

import (
	"bytes"
	"context"
	"encoding/json"
	queengate "github.com/queengate/queengate"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/queengate/queengate/timers"
)

// maxTimerDelay bounds delayMs (and how far ahead fireAt may be): ten years.
const maxTimerDelay = 10 * 365 * 24 * time.Hour

// timerIDPattern is a timerId: a UUID as PostgreSQL prints it.
var timerIDPattern = regexp.MustCompile(`^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$`)

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
	if bytes.HasPrefix(bytes.TrimSpace(body), []byte("[")) {
		return timerRequest{}, badInput("a timer is one message object, not an array")
	}
	raw, werr := scanMessages(body, 1, timerFields...)
	if werr != nil {
		return timerRequest{}, werr
	}
	m := &raw[0]
	if werr := m.check(0); werr != nil {
		werr.Message = strings.Replace(werr.Message, "message 0: ", "", 1)
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

func decodeFireAt(raw []byte, now time.Time) (time.Time, *queengate.Error) {
	var s string
	if err := json.Unmarshal(raw, &s); err != nil {
		return time.Time{}, badInput(`"fireAt" must be an RFC 3339 string such as "2026-12-01T09:00:00Z"`)
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
	lit := string(raw)
	if !integerLiteral.MatchString(lit) {
		return 0, badInput(`"delayMs" must be an integer number of milliseconds, got %s`, lit)
	}
	if strings.HasPrefix(lit, "-") {
		return 0, badInput(`"delayMs" %s is negative: 0 or more milliseconds`, lit)
	}
	// Compared before converting: a Duration of that many ms overflows.
	ms, err := strconv.ParseInt(lit, 10, 64)
	if err != nil || ms > int64(maxTimerDelay/time.Millisecond) {
		return 0, badInput(`"delayMs" %s is more than ten years`, lit)
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

func (t *TimerOps) cancel(ctx context.Context, body []byte) (any, *queengate.Error) {
	const shape = `body must be {"timerId": "<uuid>"}`
	fields, err := scanObject(body, "the body")
	if err != nil {
		return nil, badInput("%v; %s", err, shape)
	}
	var id string
	for _, f := range fields {
		if f.key != "timerId" {
			return nil, badInput("unknown field %q: %s", f.key, shape)
		}
		var ok bool
		if id, ok = decodeString(f.raw); !ok || !timerIDPattern.MatchString(id) {
			return nil, badInput(`"timerId" must be the UUID a schedule answered, got %s`, f.raw)
		}
	}
	if id == "" {
		return nil, badInput(`"timerId" is missing: %s`, shape)
	}
	answer, err := t.svc.Cancel(ctx, id)
	if err != nil {
		return nil, storeError(err)
	}
	return queengate.TimerCancelled{Status: answer}, nil
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
	if limit < 1 || limit > 10000 {
		return nil, badInput("limit %d: 1 to 10000", limit)
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
	const shape = `body must be empty or {"queue"?: "...", "limit"?: n}`
	var (
		queue string
		limit *int
	)
	if len(bytes.TrimSpace(body)) > 0 {
		fields, err := scanObject(body, "the body")
		if err != nil {
			return nil, badInput("%v; %s", err, shape)
		}
		for _, f := range fields {
			switch f.key {
			case "queue":
				var ok bool
				if queue, ok = decodeString(f.raw); !ok {
					return nil, badInput(`"queue" must be a string, not %s`, f.raw)
				}
			case "limit":
				n, err := strconv.Atoi(string(f.raw))
				if err != nil || !integerLiteral.Match(f.raw) {
					return nil, badInput(`"limit" must be an integer from 1 to 10000, not %s`, f.raw)
				}
				limit = &n
			default:
				return nil, badInput("unknown field %q: %s", f.key, shape)
			}
		}
	}
	return t.list(ctx, queue, limit)
}

// addEndpoints serves schedule, cancel and list.
func (t *TimerOps) addEndpoints(g *Gateway) error {
	p := g.cfg.Prefix
	return g.addRequestEndpoints([]requestEndpoint{
		{"timer-cancel", p + ".timer.cancel", false, func(ctx context.Context, req *request) (any, *queengate.Error) {
			return t.cancel(ctx, req.Data)
		}},
		{"timer-list", p + ".timer.list", true, func(ctx context.Context, req *request) (any, *queengate.Error) {
			return t.listNATS(ctx, req.Data)
		}},
		{"timer-schedule", p + ".timer.*.*", false, func(ctx context.Context, req *request) (any, *queengate.Error) {
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
