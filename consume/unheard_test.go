package consume_test

import (
	"encoding/json"
	"fmt"
	"testing"
	"time"

	queengate "github.com/queengate/queengate"
	"github.com/queengate/queengate/ingest"
	"github.com/queengate/queengate/internal/checkfor"
)

// A poison message over NATS (docs/protocol.md, "What an attempt is"): a
// queue configured over NATS with maxUnheardDeliveries 2 and maxAttempts
// 2; a consumer pops with leases of 1 ms and never says a word, as one
// that dies on the message would. Its 2nd and 4th leases count an
// attempt each, and the 5th pop dead-letters it, its dead letter saying
// why.
func TestAPoisonMessageIsDeadLetteredOverNATS(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	g := e.startOpsGateway("", ingest.Config{})
	q := e.Queue
	if status, body := g.ViaNATS(t, "configure", "",
		fmt.Sprintf(`{"queue":%q,"options":{"maxAttempts":2,"maxUnheardDeliveries":2}}`, q)); status != 200 {
		t.Fatalf("configure: %d %s", status, body)
	}
	wantStatus(t, e.Push(t, e.Subject("p"), msgs("poison")), "queued")
	var attempts []int
	for len(attempts) < 5 {
		var a queengate.PopAnswer
		// The last lease, 1 ms long, runs out on its own: pop until it has.
		checkfor.Check(t, 30*time.Second, checkfor.Cond("a pop past the last lease", func() bool {
			status, body := g.ViaNATS(t, "consume.pop."+q+".p", "", `{"group":"g","consumer":"worker","max":1,"leaseMs":1}`)
			a = queengate.PopAnswer{}
			return status == 200 && json.Unmarshal(body, &a) == nil && (len(a.Messages) > 0 || a.DeadLettered > 0)
		}))
		if a.DeadLettered > 0 {
			break
		}
		attempts = append(attempts, a.Messages[0].Attempts)
	}
	if fmt.Sprint(attempts) != "[1 1 2 2]" {
		t.Fatalf("deliveries at attempts %v, then a dead letter; want [1 1 2 2]", attempts)
	}
	d := decodeDeadLetter(t, g.readOne(t, q+"-dlq"))
	if d.Attempts != 2 || d.Error != "lease ran out unheard 4 times (consumer 'worker', attempt 2)" {
		t.Fatalf("dead letter: attempts %d, error %q", d.Attempts, d.Error)
	}
}
