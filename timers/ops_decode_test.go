package timers

import (
	"bytes"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	queengate "github.com/queengate/queengate"
	"github.com/queengate/queengate/internal/bodyref"
	"github.com/queengate/queengate/model"
)

func FuzzDecodeTimer(f *testing.F) {
	now := time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)
	tenYears := 10 * 365 * 24 * time.Hour
	ref := bodyref.Object{
		Fields: map[string]bodyref.Rule{"transactionId": bodyref.TxnID, "data": bodyref.AnyValue,
			"fireAt": func(raw json.RawMessage) bool {
				s, ok := bodyref.String(raw)
				at, err := time.Parse(time.RFC3339Nano, s)
				return string(raw) == "null" || ok && err == nil && at.Sub(now) <= tenYears
			},
			"delayMs": func(raw json.RawMessage) bool {
				return string(raw) == "null" || bodyref.WholeFrom(0, int64(tenYears/time.Millisecond))(raw)
			}},
		Across: func(m map[string]json.RawMessage) bool {
			given := func(k string) bool { v, ok := m[k]; return ok && string(v) != "null" }
			return given("fireAt") != given("delayMs")
		},
	}
	decode := func(b []byte) (timerRequest, *queengate.Error) { return decodeTimer(b, now) }
	bodyref.FuzzDecoder(f, ref, false, decode, func(r timerRequest, vals map[string]json.RawMessage) string {
		if ms, ok := bodyref.Whole(vals["delayMs"]); ok && !r.fireAt.Equal(now.Add(time.Duration(ms)*time.Millisecond)) {
			return fmt.Sprintf("fireAt %v for delayMs %d", r.fireAt, ms)
		}
		if !bytes.Equal(r.data, vals["data"]) {
			return fmt.Sprintf("data %q, the reference %q", r.data, vals["data"])
		}
		return ""
	})
}

func FuzzDecodeTimerCancel(f *testing.F) {
	bodyref.FuzzDecoder(f, bodyref.Cancel, false, decodeCancel, func(id string, vals map[string]json.RawMessage) string {
		return bodyref.SameString("timerId", id, vals)
	})
}

func FuzzDecodeTimerList(f *testing.F) {
	f.Add([]byte(`{"queue":"q","from":{"fireAt":"2026-12-01T09:00:00.123456Z","timerId":"` + bodyref.TestLease + `"}}`))
	f.Add([]byte(`{"from":{"fireAt":"2026-12-01T09:00:00Z","timerId":"x","fireAt":"2026-12-01T09:00:00Z"}}`))
	bodyref.FuzzDecoder(f, bodyref.TimerList, true, decodeTimerList, func(l timerList, vals map[string]json.RawMessage) string {
		if n, ok := bodyref.Whole(vals["limit"]); ok != (l.limit != nil) || ok && int64(*l.limit) != n {
			return fmt.Sprintf("limit %v, the reference %s", l.limit, vals["limit"])
		}
		if diff := samePosition(l.from, vals["from"]); diff != "" {
			return diff
		}
		return bodyref.SameString("queue", l.queue, vals)
	})
}

func samePosition(got *model.TimerKey, raw json.RawMessage) string {
	if raw == nil {
		if got != nil {
			return fmt.Sprintf("a position %v from no \"from\"", got)
		}
		return ""
	}
	var want struct {
		FireAt  time.Time `json:"fireAt"`
		TimerID string    `json:"timerId"`
	}
	if got == nil || json.Unmarshal(raw, &want) != nil || !got.FireAt.Equal(want.FireAt) || got.ID != want.TimerID {
		return fmt.Sprintf("position %v, the reference %s", got, raw)
	}
	return ""
}

func TestDecodeTimerBodies(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)
	bodyref.RunDecodeCases(t, func(b []byte) *queengate.Error { _, werr := decodeTimer(b, now); return werr }, []decodeCase{
		{"a delay", `{"transactionId":"t","data":1,"delayMs":5}`, ""},
		{"fireAt a number", `{"data":1,"fireAt":5}`, `"fireAt" must be an RFC 3339 string such as "2026-12-01T09:00:00Z", not the JSON number 5`},
		{"DelayMs", `{"DelayMs":5}`, `unknown field "DelayMs": a message has only "transactionId", "data", "headers", "dataEncoding", "fireAt" and "delayMs"; did you mean "delayMs"?`},
	})
	bodyref.RunDecodeCases(t, func(b []byte) *queengate.Error { _, werr := decodeCancel(b); return werr }, []decodeCase{
		{"an id", `{"timerId":"` + bodyref.TestLease + `"}`, ""},
		{"TimerId", `{"TimerId":"` + bodyref.TestLease + `"}`, `unknown field "TimerId": a cancel has only "timerId"; did you mean "timerId"?`},
		{"an id not a string", `{"timerId":[]}`, `"timerId" must be the UUID a schedule answered, not an array`},
	})
	bodyref.RunDecodeCases(t, func(b []byte) *queengate.Error { _, werr := decodeTimerList(b); return werr }, []decodeCase{
		{"empty", ` `, ""},
		{"both", `{"queue":"q","limit":5}`, ""},
		{"a position", `{"from":{"fireAt":"2026-12-01T09:00:00.123456Z","timerId":"` + bodyref.TestLease + `"}}`, ""},
		{"a position without its id", `{"from":{"fireAt":"2026-12-01T09:00:00Z"}}`, `"from" takes both "fireAt" and "timerId": want {"fireAt": "2026-12-01T09:00:00.123456Z", "timerId": "<uuid>"} (a timer list's "next")`},
		{"a position's id not a UUID", `{"from":{"fireAt":"2026-12-01T09:00:00Z","timerId":"x"}}`, `"from": "timerId" must be the UUID a schedule answered, not a string "x"`},
		{"a position a string", `{"from":"` + bodyref.TestLease + `"}`, `"from" must be a JSON object; want {"fireAt": "2026-12-01T09:00:00.123456Z", "timerId": "<uuid>"} (a timer list's "next")`},
		{"limit a string", `{"limit":"5"}`, `"limit" must be a whole number, not a string "5"`},
		{"limit 0", `{"limit":0}`, `"limit" is 0: from 1 to 10000`},
		{"Limit", `{"Limit":5}`, `unknown field "Limit": a timer list has only "queue", "limit" and "from"; did you mean "limit"?`},
	})
}

// decodeCase is one body and what its decoder says (bodyref.DecodeCase).
type decodeCase struct{ Name, Body, Want string }
