package operator_test

import (
	"encoding/json"
	"net/url"
	"regexp"
	"strings"
	"testing"

	"github.com/queengate/queengate/ingest"
	"github.com/queengate/queengate/internal/gatewaytest"
	"github.com/queengate/queengate/model"
)

// explainAnswer is the part of an explain answer these tests read.
type explainAnswer struct {
	Verdict          string `json:"verdict"`
	Answer           string `json:"answer"`
	Conflict         bool   `json:"conflict"`
	DependsOnData    bool   `json:"dependsOnData"`
	OriginalDataGone bool   `json:"originalDataGone"`
	Explanation      string `json:"explanation"`
}

// explainBoth asks explain over NATS (body) and HTTP (parameters) and
// requires both faces to answer the same.
func (g *opsGateway) explainBoth(t *testing.T, txnID string, data *string) (int, string) {
	t.Helper()
	body := map[string]any{"transactionId": txnID}
	q := url.Values{"transactionId": {txnID}}
	if data != nil {
		q.Set("data", *data)
	}
	raw := mustJSON(t, body)
	if data != nil { // byte exact: json.Marshal compacts a RawMessage
		raw = []byte(`{"transactionId":` + string(mustJSON(t, txnID)) + `,"data":` + *data + `}`)
	}
	status, viaNATS := g.ViaNATS(t, "explain."+g.e.Queue+".p", "", string(raw))
	httpStatus, viaHTTP := g.ViaHTTP(t, "GET", "/queues/"+g.e.Queue+"/partitions/p/explain?"+q.Encode(), "", "")
	if httpStatus != status || !sameExplain(viaNATS, viaHTTP) {
		t.Fatalf("explain %q over NATS: %d %s; over HTTP: %d %s", txnID, status, viaNATS, httpStatus, viaHTTP)
	}
	return status, string(viaNATS)
}

func mustJSON(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// sameExplain compares two answers but for the cache's view, which is
// this gateway's and may move between the two requests.
func sameExplain(a, b []byte) bool {
	var x, y map[string]any
	if json.Unmarshal(a, &x) != nil || json.Unmarshal(b, &y) != nil {
		return false
	}
	delete(x, "cache")
	delete(y, "cache")
	for _, m := range []map[string]any{x, y} {
		// A body's error names the byte of the body; HTTP has parameters.
		if e, ok := m["error"].(map[string]any); ok {
			e["message"] = regexp.MustCompile(` at byte [0-9]+`).ReplaceAllString(e["message"].(string), "")
		}
		if s, ok := m["explanation"].(string); ok {
			s = s[:strings.Index(s+" This gateway's cache", " This gateway's cache")] // the cache's sentence
			// "(59m59s from now)": the clock may pass a second between the two requests
			m["explanation"] = fromNow.ReplaceAllString(s, "(… from now)")
		}
	}
	return string(mustMarshalAny(x)) == string(mustMarshalAny(y))
}

var fromNow = regexp.MustCompile(`\([0-9hms]+ from now\)`)

func mustMarshalAny(v any) []byte {
	b, _ := json.Marshal(v)
	return b
}

// TestExplainChecksTheIdAsPushDoes: an id a push refuses is refused by
// explain, over NATS and HTTP, with the push's own words (less its
// message index); before, a NUL or a 300-byte id was explained as "new".
func TestExplainChecksTheIdAsPushDoes(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	g := e.startOpsGateway("", ingest.Config{})
	for _, id := range []string{"a\x00b", strings.Repeat("x", 300), "", "\x00"} {
		pushStatus, pushBody := g.ViaNATS(t, "push."+e.Queue+".p", "", string(mustJSON(t, map[string]string{"transactionId": id})))
		var pushErr wireErr
		if pushStatus != 400 || json.Unmarshal(pushBody, &pushErr) != nil {
			t.Fatalf("push of %q: %d %s", id, pushStatus, pushBody)
		}
		status, body := g.explainBoth(t, id, nil)
		var werr wireErr
		if status != 400 || json.Unmarshal([]byte(body), &werr) != nil {
			t.Fatalf("explain of %q: %d %s, where a push answers %s", id, status, body, pushBody)
		}
		if want := strings.TrimPrefix(pushErr.Error.Message, "message 0: "); werr.Error.Message != want { // the NATS face's
			t.Errorf("explain of %q says %q, a push %q", id, werr.Error.Message, pushErr.Error.Message)
		}
	}
}

// TestExplainPredictsTheConflict: on each onConflict mode, explain with
// data says what the push with that data is then answered, conflict
// included; without data, on a queue that compares payloads, it says the
// answer depends on the data.
func TestExplainPredictsTheConflict(t *testing.T) {
	t.Parallel()
	for _, mode := range []model.ConflictMode{model.ConflictIgnore, model.ConflictFlag, model.ConflictReject} {
		t.Run(string(mode), func(t *testing.T) {
			t.Parallel()
			e := newEnv(t)
			e.SetOnConflict(t, mode)
			g := e.startOpsGateway("", ingest.Config{})
			original := `{"amount": 10}`
			wantStatus(t, e.Push(t, e.Subject("p"), `{"transactionId":"pay-1","data":`+original+`}`), "queued")

			status, body := g.explainBoth(t, "pay-1", nil)
			var ex explainAnswer
			if status != 200 || json.Unmarshal([]byte(body), &ex) != nil {
				t.Fatalf("explain without data: %d %s", status, body)
			}
			if compares := mode != model.ConflictIgnore; ex.DependsOnData != compares || compares != (ex.Answer == "") ||
				compares && !strings.Contains(ex.Explanation, "give data to know which") {
				t.Errorf("without data: %s", body)
			}

			for _, data := range []string{original, `{"amount":10}`, `{"amount": 99}`, `null`} {
				status, body := g.explainBoth(t, "pay-1", &data)
				var ex explainAnswer
				if status != 200 || json.Unmarshal([]byte(body), &ex) != nil {
					t.Fatalf("explain with %s: %d %s", data, status, body)
				}
				pushed := e.PushRaw(t, e.Subject("p"), `{"transactionId":"pay-1","data":`+data+`}`)
				if got := gatewaytest.Summary([]gatewaytest.ConflictAnswer{{Answer: answer{Status: ex.Answer}, Conflict: ex.Conflict}}); got != gatewaytest.Summary(pushed) {
					t.Errorf("data %s: explain says %s (%s), the push answered %s", data, got, ex.Explanation, gatewaytest.Summary(pushed))
				}
			}
		})
	}
}

// TestExplainWithBadDataIsA400: data is checked as a push checks it.
func TestExplainWithBadDataIsA400(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	g := e.startOpsGateway("", ingest.Config{})
	for data, says := range map[string]string{
		`"\ud800"`: `the data parameter: unpaired UTF-16 surrogate \ud800`,
		`{"a":`:    "the data parameter is malformed JSON: unexpected end of input at byte 5",
		`1,"x":2`:  "the data parameter is malformed JSON: unexpected data after the JSON value at byte 1",
	} {
		q := url.Values{"transactionId": {"t"}, "data": {data}}
		status, body := g.ViaHTTP(t, "GET", "/queues/"+e.Queue+"/partitions/p/explain?"+q.Encode(), "", "")
		var werr wireErr
		if status != 400 || json.Unmarshal(body, &werr) != nil || !strings.Contains(werr.Error.Message, says) {
			t.Errorf("data %s: %d %s; want 400 saying %q", data, status, body, says)
		}
	}
	status, body := g.ViaHTTP(t, "GET", "/queues/"+e.Queue+"/partitions/p/explain?transactionId=t&txn=1", "", "")
	if status != 400 || !strings.Contains(string(body), `unknown parameter \"txn\"`) {
		t.Errorf("an unknown parameter: %d %s", status, body)
	}
}
