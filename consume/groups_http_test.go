package consume_test

import (
	"bytes"
	"testing"

	"github.com/queengate/queengate/ingest"
)

// TestGroupsOverHTTP: GET /queues/<queue>/groups answers what
// <prefix>.consume.groups.<queue> answers, byte for byte, for the whole
// list and for a page of one group; it takes only group and from, and
// is behind the admin token like every operator route.
func TestGroupsOverHTTP(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	g := e.startOpsGateway("tok-1", ingest.Config{})
	e.Push(t, e.Subject("p1"), msgs("a-1"))
	e.Push(t, e.Subject("p2"), msgs("b-1"))
	g.ViaNATS(t, "consume.pop."+e.Queue+".p1", "", `{"group":"g1","consumer":"c","leaseMs":60000}`)
	subject := "consume.groups." + e.Queue
	path := "/queues/" + e.Queue + "/groups"
	for _, c := range []struct{ query, body string }{
		{"", ""},
		{"?group=g1", `{"group":"g1"}`},
		{"?group=g1&from=p2", `{"group":"g1","from":"p2"}`},
		{"?from=p2", `{"from":"p2"}`},                       // 400: no group
		{"?group=nosuch", `{"group":"nosuch"}`},             // 404
		{"?group=g1&from=p9", `{"group":"g1","from":"p9"}`}, // 404
	} {
		natsStatus, natsBody := g.ViaNATS(t, subject, "", c.body)
		httpStatus, httpBody := g.ViaHTTP(t, "GET", path+c.query, "tok-1", "")
		if httpStatus != natsStatus || !bytes.Equal(bytes.TrimSpace(httpBody), bytes.TrimSpace(natsBody)) {
			t.Errorf("GET %s%s: %d %s\nNATS %s: %d %s", path, c.query, httpStatus, httpBody, c.body, natsStatus, natsBody)
		}
	}
	if status, body := g.ViaHTTP(t, "GET", path+"?group=g1&from=p2", "tok-1", ""); status != 200 ||
		bytes.Contains(body, []byte(`"p1"`)) || !bytes.Contains(body, []byte(`"partition":"p2"`)) {
		t.Errorf("GET %s?group=g1&from=p2: %d %s; want g1 from p2 on", path, status, body)
	}
	if status, body := g.ViaHTTP(t, "GET", path+"?limit=3", "tok-1", ""); status != 400 || !bytes.Contains(body, []byte(`unknown parameter \"limit\"`)) {
		t.Errorf("GET %s?limit=3: %d %s; want 400 naming the parameter", path, status, body)
	}
	if status, body := g.ViaHTTP(t, "GET", path, "", ""); status != 401 {
		t.Errorf("GET %s without the token: %d %s; want 401", path, status, body)
	}
}
