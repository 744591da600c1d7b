package gateway

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go/micro"
	"github.com/nats-io/nuid"

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

// decodeTimer validates a schedule body: a push message (transactionId,
// data: the push's rules) plus exactly one of fireAt (RFC 3339) and
// delayMs (an integer >= 0, from now).
func decodeTimer(body []byte, now time.Time) (timerRequest, *wireError) {
	msgs, _, werr := decodePush(body, 1)
	if werr != nil {
		if werr.Code == CodeTooLarge {
			return timerRequest{}, badInput("a timer is one message object, not an array")
		}
		return timerRequest{}, werr
	}
	if bytes.HasPrefix(bytes.TrimSpace(body), []byte("[")) {
		return timerRequest{}, badInput("a timer is one message object, not an array")
	}
	var when struct {
		FireAt  json.RawMessage `json:"fireAt"`
		DelayMs json.RawMessage `json:"delayMs"`
	}
	if err := json.Unmarshal(body, &when); err != nil {
		return timerRequest{}, badInput("malformed JSON: %v", err)
	}
	hasAt, hasDelay := len(when.FireAt) > 0 && string(when.FireAt) != "null", len(when.DelayMs) > 0 && string(when.DelayMs) != "null"
	r := timerRequest{txnID: msgs[0].TxnID, data: msgs[0].Data}
	switch {
	case hasAt == hasDelay:
		return timerRequest{}, badInput(`give exactly one of "fireAt" (RFC 3339) and "delayMs" (milliseconds from now)`)
	case hasAt:
		var s string
		if err := json.Unmarshal(when.FireAt, &s); err != nil {
			return timerRequest{}, badInput(`"fireAt" must be an RFC 3339 string such as "2026-12-01T09:00:00Z"`)
		}
		t, err := time.Parse(time.RFC3339Nano, s)
		if err != nil {
			return timerRequest{}, badInput(`"fireAt" %q is not RFC 3339 with a zone, such as "2026-12-01T09:00:00Z"`, s)
		}
		if t.Sub(now) > maxTimerDelay {
			return timerRequest{}, badInput(`"fireAt" %q is more than ten years ahead`, s)
		}
		r.fireAt = t
	default:
		lit := string(bytes.TrimSpace(when.DelayMs))
		if !integerLiteral.MatchString(lit) {
			return timerRequest{}, badInput(`"delayMs" must be an integer number of milliseconds, got %s`, lit)
		}
		if strings.HasPrefix(lit, "-") {
			return timerRequest{}, badInput(`"delayMs" %s is negative: 0 or more milliseconds`, lit)
		}
		// Compared before converting: a Duration of that many ms overflows.
		ms, err := strconv.ParseInt(lit, 10, 64)
		if err != nil || ms > int64(maxTimerDelay/time.Millisecond) {
			return timerRequest{}, badInput(`"delayMs" %s is more than ten years`, lit)
		}
		r.fireAt = now.Add(time.Duration(ms) * time.Millisecond)
	}
	return r, nil
}

// parseTimerSubject splits <prefix>.timer.<queue>.<partition>.
func parseTimerSubject(prefix, subject string) (queue, partition string, werr *wireError) {
	rest, ok := strings.CutPrefix(subject, prefix+".timer.")
	parts := strings.Split(rest, ".")
	if !ok || len(parts) != 2 {
		return "", "", badInput("timer subject %q: want %s.timer.<queue>.<partition>", subject, prefix)
	}
	if !ValidName(parts[0]) {
		return "", "", badInput("bad queue name %q: 1-128 bytes of [A-Za-z0-9_-]", parts[0])
	}
	if !ValidName(parts[1]) {
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

func (t *TimerOps) schedule(ctx context.Context, prefix, subject string, body []byte) (any, *wireError) {
	queue, partition, werr := parseTimerSubject(prefix, subject)
	if werr != nil {
		return nil, werr
	}
	r, werr := decodeTimer(body, time.Now())
	if werr != nil {
		return nil, werr
	}
	if r.txnID == "" {
		r.txnID = "qg-" + nuid.Next()
	}
	s, err := t.svc.Schedule(ctx, queue, partition, r.txnID, r.data, r.fireAt)
	if err != nil {
		return nil, storeError(err)
	}
	return s, nil
}

func (t *TimerOps) cancel(ctx context.Context, body []byte) (any, *wireError) {
	var req map[string]json.RawMessage
	if err := json.Unmarshal(body, &req); err != nil {
		return nil, badInput(`body must be {"timerId": "<uuid>"}`)
	}
	var id string
	if err := json.Unmarshal(req["timerId"], &id); err != nil || !timerIDPattern.MatchString(id) {
		return nil, badInput(`"timerId" must be the UUID a schedule answered, got %s`, req["timerId"])
	}
	answer, err := t.svc.Cancel(ctx, id)
	if err != nil {
		return nil, storeError(err)
	}
	return map[string]string{"status": answer}, nil
}

// TimersAnswer lists pending timers.
type TimersAnswer struct {
	Timers []TimerView `json:"timers"`
}

// TimerView is a pending timer on the wire.
type TimerView struct {
	TimerID       string    `json:"timerId"`
	Queue         string    `json:"queue"`
	Partition     string    `json:"partition"`
	TransactionID string    `json:"transactionId"`
	FireAt        time.Time `json:"fireAt"`
	CreatedAt     time.Time `json:"createdAt"`
}

// list lists pending timers; limit nil takes the default (100).
func (t *TimerOps) list(ctx context.Context, queue string, limitArg *int) (any, *wireError) {
	if queue != "" && !ValidName(queue) {
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
	out := TimersAnswer{Timers: make([]TimerView, 0, len(ts))}
	for _, x := range ts {
		out.Timers = append(out.Timers, TimerView{TimerID: x.ID, Queue: x.Queue, Partition: x.Partition,
			TransactionID: x.TxnID, FireAt: x.FireAt.UTC(), CreatedAt: x.CreatedAt.UTC()})
	}
	return out, nil
}

func (t *TimerOps) listNATS(ctx context.Context, body []byte) (any, *wireError) {
	var req struct {
		Queue string `json:"queue"`
		Limit *int   `json:"limit"`
	}
	if len(bytes.TrimSpace(body)) > 0 {
		dec := json.NewDecoder(bytes.NewReader(body))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&req); err != nil {
			return nil, badInput(`body must be {"queue"?: "...", "limit"?: n}: %v`, err)
		}
	}
	return t.list(ctx, req.Queue, req.Limit)
}

// addEndpoints serves schedule, cancel and list on the service.
func (t *TimerOps) addEndpoints(g *Gateway, svc micro.Service) error {
	p := g.cfg.Prefix
	return g.addRequestEndpoints(svc, []requestEndpoint{
		{"timer-cancel", p + ".timer.cancel", false, func(ctx context.Context, req micro.Request) (any, *wireError) {
			return t.cancel(ctx, req.Data())
		}},
		{"timer-list", p + ".timer.list", true, func(ctx context.Context, req micro.Request) (any, *wireError) {
			return t.listNATS(ctx, req.Data())
		}},
		{"timer-schedule", p + ".timer.*.*", false, func(ctx context.Context, req micro.Request) (any, *wireError) {
			return t.schedule(ctx, p, req.Subject(), req.Data())
		}},
	})
}

// MountTimers serves GET /timers on the admin HTTP (an operator request).
func (a *Admin) MountTimers(t *TimerOps) {
	a.mux.HandleFunc("GET /timers", a.opsHandler(t.ops, func(r *http.Request, _ []byte) (any, *wireError) {
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
		writeError(w, &wireError{Code: CodeMethodNotAllowed, Message: r.Method + " /timers: use GET (schedule and cancel go over NATS)"})
	})
}
