package operator_test

import (
	"encoding/json"
	"io"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/queengate/queengate/ingest"
	"github.com/queengate/queengate/internal/ctl/admin"
)

// placeholders fill an operation's subject tokens and path values: the
// env's queue, and a valid name or id for the rest (the body limit comes
// before any of them is looked up).
func placeholders(queue string) map[string]string {
	return map[string]string{"queue": queue, "partition": "p", "group": "g",
		"messageId": "00000000-0000-0001-0000-000000000000", "transactionId": "t-1"}
}

var pathValue = regexp.MustCompile(`\{([A-Za-z]+)\}`)

// TestAdminBodyLimitOnBothTransports: every operation with an HTTP form
// (listed from the endpoints' own declarations, so a new one is covered)
// answers a body over 64 KiB with the same 413 over NATS as over HTTP,
// while a push and a pop, bounded by the NATS max payload alone, still
// take one.
func TestAdminBodyLimitOnBothTransports(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	g := e.startOpsGateway("", ingest.Config{})
	names := placeholders(e.Queue)
	oversized := `{"start":"latest"` + strings.Repeat(" ", 70<<10) + `}`
	var covered int
	for _, table := range g.Tables {
		for _, ep := range table.Operations(e.Prefix, e.Client) {
			if len(ep.HTTP) == 0 {
				continue
			}
			subject := ep.Verb
			for _, n := range ep.API.Names {
				subject += "." + names[strings.Trim(n, "<>")]
			}
			natsCode, natsBody := requestRaw(t, e.Client, subject, oversized)
			for _, form := range ep.HTTP {
				method, path, _ := strings.Cut(form.Route, " ")
				path = pathValue.ReplaceAllStringFunc(path, func(m string) string { return names[strings.Trim(m, "{}")] })
				httpCode, httpBody := g.ViaHTTP(t, method, path, "", oversized)
				if natsCode != 413 || httpCode != 413 || errMessage(natsBody) != errMessage(httpBody) || errMessage(httpBody) == "" {
					t.Errorf("%s: NATS %s answers %d %.200s, HTTP %s %s answers %d %.200s; want the same 413 on both",
						ep.Name, subject, natsCode, natsBody, method, path, httpCode, httpBody)
				}
				covered++
			}
		}
	}
	if covered < 18 { // the routes of docs/admin-api.md's table
		t.Fatalf("%d HTTP forms checked: the tables list fewer operations than the admin API has", covered)
	}
	e.Push(t, e.Subject("p"), []msg{{TransactionID: "big", Data: strings.Repeat("x", 70<<10)}})
	if code, body := requestRaw(t, e.Client, "queen.consume.pop."+e.Queue+".p", `{"group":"g"`+strings.Repeat(" ", 70<<10)+`}`); code != 200 {
		t.Fatalf("a pop with a 70 KiB body: %d %.300s; want 200 (a pop is bounded by the max payload alone)", code, body)
	}
}

// requestRaw sends body on subject and answers the status (200 or the
// micro error code) and the answer's body.
func requestRaw(t *testing.T, nc *nats.Conn, subject, body string) (int, []byte) {
	t.Helper()
	m, err := nc.Request(subject, []byte(body), 30*time.Second)
	if err != nil {
		t.Fatalf("request %s: %v", subject, err)
	}
	var werr wireErr
	if m.Header.Get("Nats-Service-Error-Code") != "" && json.Unmarshal(m.Data, &werr) == nil {
		return werr.Error.Code, m.Data
	}
	return 200, m.Data
}

// errMessage is an error answer's message ("" for another answer).
func errMessage(body []byte) string {
	var werr wireErr
	_ = json.Unmarshal(body, &werr)
	return werr.Error.Message
}

// TestAdminAnswersUncleanPathsInJSON: a path with an empty, "." or ".."
// segment, which http.ServeMux would redirect with an HTML body, is a 400
// in the API's JSON format; a subtree's path without its slash is a JSON
// 404; a transactionId of dots, escaped (as the admin client does), is
// looked up as any other.
func TestAdminAnswersUncleanPathsInJSON(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	g := e.startOpsGateway("", ingest.Config{})
	e.Push(t, e.Subject("p"), []msg{{TransactionID: ".."}})
	client := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	cases := []struct {
		path string
		code int
		want string
	}{
		{"/queues/../status", 400, "bad path"},
		{"/queues//payments", 400, "bad path"},
		{"/queues/" + e.Queue + "/.", 400, "bad path"},
		{"/queues/" + e.Queue + "/groups/.", 400, "bad path"},
		{"/queues/" + e.Queue + "/partitions/p/transactions/..", 400, "bad path"},
		{"/./status", 400, "bad path"},
		{"//status", 400, "bad path"},
		{"/debug/pprof", 404, "did you mean /debug/pprof/?"},
		{"/queues/" + e.Queue + "/partitions/p/transactions/%2E%2E", 200, `"transactionId":".."`},
		{admin.OpGetTransaction(e.Queue, "p", "..").Path, 200, `"transactionId":".."`}, // as queenctl sends it
	}
	for _, c := range cases {
		resp, err := client.Get(g.HTTP + c.path)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != c.code || resp.Header.Get("Content-Type") != "application/json" || !strings.Contains(string(body), c.want) {
			t.Errorf("GET %s: %d %s %.300s; want %d, JSON, naming %s", c.path, resp.StatusCode, resp.Header.Get("Content-Type"), body, c.code, c.want)
		}
	}
}

// TestTransactionIDNotUTF8IsBadInput: a transactionId in a URL that is
// not UTF-8 is one no push could carry: a 400 saying so, not a 404.
func TestTransactionIDNotUTF8IsBadInput(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	g := e.startOpsGateway("", ingest.Config{})
	e.Push(t, e.Subject("p"), msgs("t-1"))
	for _, path := range []string{
		"/queues/" + e.Queue + "/partitions/p/transactions/%FF%FE",
		"/queues/" + e.Queue + "/partitions/p/transactions/a%C3",
		"/queues/" + e.Queue + "/partitions/p/explain?transactionId=%FF%FE",
	} {
		code, body := g.ViaHTTP(t, "GET", path, "", "")
		if code != 400 || !strings.Contains(errMessage(body), "not valid UTF-8") {
			t.Errorf("GET %s: %d %.300s; want 400 saying the transactionId is not valid UTF-8", path, code, body)
		}
	}
}
