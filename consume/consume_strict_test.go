package consume_test

import (
	"encoding/json"
	"strings"
	"testing"

	queengate "github.com/queengate/queengate"
)

// TestConsumeBodiesAreStrictAndChangeNothing: the ack, renew, release and
// pop bodies issue 21 found loose are 400s naming the problem, and none
// of them touches the lease or the cursor. Before, a repeated status
// settled as the last one, field names matched in any case, a malformed
// leaseId was a leaseNotHeld result or a 409, and a release took leaseMs.
func TestConsumeBodiesAreStrictAndChangeNothing(t *testing.T) {
	t.Parallel()
	e, c := consuming(t, 2, "p")
	ctx := t.Context()
	a, err := c.Pop(ctx, e.Queue, "p", queengate.PopRequest{Group: "g", Max: 2})
	if err != nil || len(a.Messages) != 2 {
		t.Fatalf("pop: %+v, %v", a, err)
	}
	lease := `"leaseId":"` + a.LeaseID + `"`
	subject := func(op string) string { return e.Prefix + ".consume." + op + "." + e.Queue + ".p" }
	for _, c := range []struct{ subject, body, says string }{
		{subject("ack"), `{"group":"g",` + lease + `,"items":[{"offset":0,"status":"completed","status":"failed"}]}`, `item 0: field "status" is given twice`},
		{subject("ack"), `{"group":"g",` + lease + `,"items":[{"offset":0,"STATUS":"completed"}]}`, `item 0: unknown field "STATUS"`},
		{subject("ack"), `{"group":"g",` + lease + `,"items":[{"OFFSET":0,"status":"completed"}]}`, `item 0: unknown field "OFFSET"`},
		{subject("ack"), `{"group":"g",` + lease + `,"items":[{"transactionID":"p-0","status":"completed"}]}`, `unknown field "transactionID"`},
		{subject("ack"), `{"group":"g","LeaseID":"` + a.LeaseID + `","items":[{"offset":0,"status":"completed"}]}`, `unknown field "LeaseID"`},
		{subject("ack"), `{"group":"g",` + lease + `,"items":[{"offset":"0","status":"completed"}]}`, `"offset" must be a whole number, not a string "0"`},
		{subject("ack"), `{"group":"g",` + lease + `,"items":{"offset":0,"status":"completed"}}`, `"items" must be an array`},
		{subject("ack"), `{"group":"g","leaseId":"not-a-lease","items":[{"offset":0,"status":"completed"}]}`, `"leaseId" must be the UUID a pop answered`},
		{subject("renew"), `{"group":"g","leaseId":"not-a-lease","leaseMs":1000}`, `"leaseId" must be the UUID a pop answered`},
		{subject("release"), `{"group":"g","leaseId":"not-a-lease"}`, `"leaseId" must be the UUID a pop answered`},
		{subject("release"), `{"group":"g",` + lease + `,"leaseMs":1000}`, `"leaseMs": a release takes none`},
		{e.Prefix + ".consume.pop." + e.Queue, `{"group":"g","ack":{"partition":"p",` + lease + `,"items":[{"offset":0,"status":"completed","status":"failed"}]}}`, `"ack": item 0: field "status" is given twice`},
	} {
		msg := e.Request(t, c.subject, c.body)
		var eb queengate.ErrorBody
		if json.Unmarshal(msg.Data, &eb) != nil || eb.Error.Code != 400 || !strings.Contains(eb.Error.Text, c.says) {
			t.Errorf("%s %s: %s; want 400 saying %q", c.subject, c.body, msg.Data, c.says)
		}
	}
	// The lease is still held and nothing was settled: acking both now
	// acks both.
	ack, err := c.Ack(ctx, e.Queue, "p", queengate.AckRequest{Group: "g", LeaseID: a.LeaseID, Items: completeAll(a)})
	if err != nil || len(ack.Items) != 2 || ack.Items[0].Result != "acked" || ack.Items[1].Result != "acked" || ack.NextOffset != 2 {
		t.Fatalf("the ack after the refused ones: %+v, %v", ack, err)
	}
}
