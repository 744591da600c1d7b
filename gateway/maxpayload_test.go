package gateway_test

import (
	"encoding/json"
	"strconv"
	"strings"
	"testing"

	queengate "github.com/queengate/queengate"
	"github.com/queengate/queengate/gateway"
	"github.com/queengate/queengate/ingest"
)

// smallPayload is the max payload of the embedded servers these tests
// start: small, so that answers reach it cheaply.
const smallPayload = 64 << 10

func newSmallPayloadEnv(t *testing.T) *testEnv {
	t.Helper()
	return newEnvWith(t, gateway.EmbeddedNATS{Port: -1, MaxPayload: smallPayload})
}

// wantRefused checks that m is a whole-request error of code whose
// message says each of says.
func wantRefused(t *testing.T, what string, code int, body []byte, says ...string) {
	t.Helper()
	var we wireErr
	if err := json.Unmarshal(body, &we); err != nil || we.Error.Code != code {
		t.Fatalf("%s answered %s, want a %d", what, body, code)
	}
	for _, s := range says {
		if !strings.Contains(we.Error.Message, s) {
			t.Errorf("%s: %q does not say %q", what, we.Error.Message, s)
		}
	}
}

// TestPushRefusesDataNoAnswerCouldCarry: a message whose data is over
// queengate.MaxDataBytes of the connection's max payload is a 413 naming
// the message and the limit, and nothing of its request is stored; data
// of exactly the limit is stored and read back in one answer. A timer's
// message is held to the same limit.
func TestPushRefusesDataNoAnswerCouldCarry(t *testing.T) {
	t.Parallel()
	e := newSmallPayloadEnv(t)
	g := e.startOpsGateway("", ingest.Config{})
	limit := int(queengate.MaxDataBytes(smallPayload))
	fits := `"` + strings.Repeat("a", limit-2) + `"`
	over := `"` + strings.Repeat("a", limit-1) + `"`

	m := e.request(t, e.subject("p"), `[{"transactionId":"small","data":1},{"transactionId":"over","data":`+over+`}]`)
	wantRefused(t, "a push with data over the limit", 413, m.Data, "message 1", strconv.Itoa(limit)+"-byte limit")
	if n := e.storedCount(t); n != 0 {
		t.Errorf("%d messages stored of a refused push, want 0", n)
	}

	wantStatus(t, e.push(t, e.subject("p"), `{"transactionId":"fits","data":`+fits+`}`), "queued")
	status, body := g.viaNATS(t, "read."+e.queue+".p", "", `{}`)
	var read struct {
		Messages []struct {
			Data json.RawMessage `json:"data"`
		} `json:"messages"`
	}
	if status != 200 || json.Unmarshal(body, &read) != nil || len(read.Messages) != 1 || string(read.Messages[0].Data) != fits {
		t.Errorf("read of a message of %d bytes of data: %d, %.200s", limit, status, body)
	}

	status, body = g.viaNATS(t, "timer."+e.queue+".p", "", `{"transactionId":"t","delayMs":60000,"data":`+over+`}`)
	wantRefused(t, "a timer with data over the limit", status, body, strconv.Itoa(limit)+"-byte limit")
	if status != 413 {
		t.Errorf("timer with data over the limit: %d, want 413", status)
	}
	if n := e.pendingTimers(t); n != 0 {
		t.Errorf("%d timers pending after a refused schedule, want 0", n)
	}
}

// TestPushWhoseAnswerCouldNotFitIsRefused: a push of more messages than
// one answer can name on the connection is a 413 naming the max payload,
// and stores nothing; fewer are answered.
func TestPushWhoseAnswerCouldNotFitIsRefused(t *testing.T) {
	t.Parallel()
	e := newSmallPayloadEnv(t)
	e.startGateway(gatewayOpts{})
	many := "[" + strings.Repeat("{},", 999) + "{}]"
	m := e.request(t, e.subject("p"), many)
	wantRefused(t, "1000 messages whose answer could not fit", 413, m.Data, strconv.Itoa(smallPayload)+" bytes", "send fewer")
	if n := e.storedCount(t); n != 0 {
		t.Errorf("%d messages stored of a refused push, want 0", n)
	}
	got := e.push(t, e.subject("p"), "["+strings.Repeat("{},", 99)+"{}]")
	if len(got) != 100 || got[99].Status != "queued" {
		t.Errorf("100 messages answered %d entries, last %v", len(got), got[len(got)-1])
	}
}
