package operator_test

import (
	"strings"
	"testing"

	"github.com/queengate/queengate/ingest"
)

// TestReadMaxBytesHasThePopsBound: a read's maxBytes is held to the
// range a pop's is (1 to 1 GiB), over NATS and HTTP; 0 or absent is the
// default and the bound itself is accepted.
func TestReadMaxBytesHasThePopsBound(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	g := e.startOpsGateway("", ingest.Config{})
	e.Push(t, e.Subject("p"), msgs("t-1"))
	read := "read." + e.Queue + ".p"
	path := "/queues/" + e.Queue + "/partitions/p/messages"
	for _, c := range []struct {
		maxBytes string
		status   int
		want     string
	}{
		{"1073741825", 400, "maxBytes is 1073741825: 1 to 1073741824 (0 or absent: 524288)"},
		{"9223372036854775807", 400, "maxBytes is 9223372036854775807: 1 to 1073741824"},
		{"-1", 400, "maxBytes is -1: 1 to 1073741824"},
		{"1073741824", 200, `"transactionId":"t-1"`},
		{"0", 200, `"transactionId":"t-1"`},
	} {
		status, body := g.ViaNATS(t, read, "", `{"maxBytes":`+c.maxBytes+`}`)
		if status != c.status || !strings.Contains(string(body), c.want) {
			t.Errorf("NATS read maxBytes %s: %d %s; want %d %q", c.maxBytes, status, body, c.status, c.want)
		}
		status, body = g.ViaHTTP(t, "GET", path+"?maxBytes="+c.maxBytes, "", "")
		if status != c.status || !strings.Contains(string(body), c.want) {
			t.Errorf("HTTP read maxBytes %s: %d %s; want %d %q", c.maxBytes, status, body, c.status, c.want)
		}
	}
}
