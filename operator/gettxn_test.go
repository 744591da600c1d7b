package operator_test

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/queengate/queengate/ingest"
)

// TestMessageByTxnChecksTheIDAsPush: a message get by a transactionId no
// push could carry (too long, NUL) is answered the push's 400, over HTTP
// and NATS; a 404 quotes at most 128 bytes of the id.
func TestMessageByTxnChecksTheIDAsPush(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	g := e.startOpsGateway("", ingest.Config{})
	e.Push(t, e.Subject("p"), msgs("a-1"))
	long := strings.Repeat("x", 300)
	for _, c := range []struct{ name, id, pathID, want string }{
		{"300 bytes", long, long, "transactionId must be 1-256 bytes, got 300"},
		{"NUL", "a\x00b", "a%00b", `\u0000 (NUL) cannot be stored`},
	} {
		push := e.Request(t, e.Subject("p"), []map[string]string{{"transactionId": c.id}})
		if !strings.Contains(string(push.Data), c.want) {
			t.Fatalf("%s: the push answers %s, want %q", c.name, push.Data, c.want)
		}
		body, _ := json.Marshal(map[string]string{"queue": e.Queue, "partition": "p", "transactionId": c.id})
		status, natsBody := g.ViaNATS(t, "message.get", "", string(body))
		if status != 400 || !strings.Contains(string(natsBody), c.want) {
			t.Errorf("%s over NATS: %d %s; want 400 %q", c.name, status, natsBody, c.want)
		}
		status, httpBody := g.ViaHTTP(t, "GET", "/queues/"+e.Queue+"/partitions/p/transactions/"+c.pathID, "", "")
		if status != 400 || !strings.Contains(string(httpBody), c.want) {
			t.Errorf("%s over HTTP: %d %s; want 400 %q", c.name, status, httpBody, c.want)
		}
	}
	absent := strings.Repeat("y", 256)
	status, body := g.ViaHTTP(t, "GET", "/queues/"+e.Queue+"/partitions/p/transactions/"+absent, "", "")
	if status != 404 || bytes.Contains(body, []byte(strings.Repeat("y", 129))) {
		t.Errorf("an absent 256-byte id: %d %s; want 404 quoting at most 128 bytes of it", status, body)
	}
}
