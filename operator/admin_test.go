package operator_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/queengate/queengate/ingest"
)

// TestAdminAnswersEveryPathInJSON: an unknown path is a 404, a known path
// with another method a 405 naming the methods in Allow, both in the
// API's JSON error format, never the mux's plain text.
func TestAdminAnswersEveryPathInJSON(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	g := e.startOpsGateway("", ingest.Config{})
	messages := "/queues/" + e.Queue + "/partitions/p/messages"
	const id = "/messages/00000000-0000-0001-0000-000000000000"
	cases := []struct {
		method, path string
		code         int
		allow        string
	}{
		{"POST", messages, 405, "GET"},
		{"DELETE", messages, 405, "GET"},
		{"POST", id, 405, "GET"},
		{"PUT", "/configure", 405, "POST"},
		{"GET", "/messages/", 404, ""},
		{"GET", "/queues/", 404, ""},
		{"GET", "/no/such/path", 404, ""},
		{"POST", "/no/such/path", 404, ""},
	}
	for _, c := range cases {
		resp, body := g.Do(t, c.method, c.path, "", "")
		var werr wireErr
		if resp.StatusCode != c.code || json.Unmarshal(body, &werr) != nil || werr.Error.Code != c.code ||
			resp.Header.Get("Content-Type") != "application/json" {
			t.Errorf("%s %s: %d %s; want %d in the API's JSON error format", c.method, c.path, resp.StatusCode, body, c.code)
		}
		if allow := resp.Header.Get("Allow"); c.allow != "" && !strings.Contains(allow, c.allow) {
			t.Errorf("%s %s: Allow %q, want it to name %s", c.method, c.path, allow, c.allow)
		}
	}
}

// TestAdminRefusesBadParameters: the message paths take no parameter, a
// messageId beyond int64 is a 400 (not a negative offset), and an error
// quotes a long input cut short, never whole.
func TestAdminRefusesBadParameters(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	g := e.startOpsGateway("", ingest.Config{})
	e.Push(t, e.Subject("p"), msgs("t-1"))
	long := strings.Repeat("x", 100<<10)
	cases := []struct{ path, want string }{
		{"/messages/00000000-0000-0001-0000-000000000000?foo=1", `"foo"`},
		{"/queues/" + e.Queue + "/partitions/p/transactions/t-1?foo=1", `"foo"`},
		{"/messages/00000000-0000-0001-0000-000000000000?" + long + "=1", "xxx"},
		{"/queues/" + e.Queue + "/partitions/p/messages?foo=" + long, `"foo"`},
		{"/queues/" + e.Queue + "/partitions/p/messages?from=" + long, "from"},
		{"/messages/00000000-0000-0001-8000-000000000000", "offset half"},
		{"/messages/" + long, "bad messageId"},
	}
	for _, c := range cases {
		resp, body := g.Do(t, "GET", c.path, "", "")
		var werr wireErr
		if resp.StatusCode != 400 || json.Unmarshal(body, &werr) != nil || !strings.Contains(werr.Error.Message, c.want) {
			t.Errorf("GET %.100s: %d %.300s; want 400 naming %s", c.path, resp.StatusCode, body, c.want)
		}
		if len(body) > 2<<10 {
			t.Errorf("GET %.100s: a %d-byte answer quotes the input whole", c.path, len(body))
		}
	}
}
