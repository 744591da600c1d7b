package consume

import (
	"encoding/json"
	"fmt"
	"math"
	"strings"
	"testing"

	queengate "github.com/queengate/queengate"
	"github.com/queengate/queengate/internal/bodyref"
	"github.com/queengate/queengate/model"
)

var (
	// An ack-and-push item is an ack item that completes its message.
	refAckPushItem = bodyref.Object{Fields: map[string]bodyref.Rule{"transactionId": bodyref.StringOfBytes(1, 256), "offset": bodyref.WholeFrom(0, 1<<63-1),
		"status": bodyref.OneOf("completed"), "error": bodyref.StringOfBytes(0, 4096)},
		Required: []string{"status"}, Across: bodyref.AckItem.Across}
	refDerived = bodyref.Object{Fields: map[string]bodyref.Rule{"queue": bodyref.Matching(bodyref.Name), "partition": bodyref.Matching(bodyref.Name),
		"transactionId": bodyref.StringOfBytes(1, 256), "data": bodyref.AnyValue},
		Required: []string{"queue", "transactionId"}}
	refAckPush = bodyref.Object{Fields: map[string]bodyref.Rule{"group": bodyref.Matching(bodyref.Name), "leaseId": bodyref.Matching(bodyref.UUID),
		"items": bodyref.ArrayOf(1, 10000, bodyref.ObjectOf(refAckPushItem)), "push": bodyref.ArrayOf(0, queengate.MaxAckPushMessages, bodyref.ObjectOf(refDerived))},
		Required: []string{"group", "leaseId", "items"}}
)

var ackPushSeeds = []string{
	`{"group":"g","leaseId":"` + bodyref.TestLease + `","items":[{"offset":0,"status":"completed"}],"push":[{"queue":"q","transactionId":"t","data":{"a":1}}]}`,
	`{"group":"g","leaseId":"` + bodyref.TestLease + `","items":[{"offset":0,"status":"failed"}],"push":[]}`,
	`{"group":"g","leaseId":"` + bodyref.TestLease + `","items":[{"offset":0,"status":"completed"}],"push":[{"queue":"q","partition":"p","transactionId":"t"}]}`,
	`{"group":"g","leaseId":"` + bodyref.TestLease + `","items":[{"offset":0,"status":"completed"}],"push":[{"queue":"q"}]}`,
	`{"group":"g","leaseId":"` + bodyref.TestLease + `","items":[{"offset":0,"status":"completed"}],"push":[{"queue":"q","transactionId":"t","Data":1}]}`,
	`{"group":"g","leaseId":"` + bodyref.TestLease + `","items":[{"offset":0,"status":"completed"}],"push":[{"queue":"q.r","transactionId":"t"}]}`,
	`{"group":"g","leaseId":"` + bodyref.TestLease + `","items":[{"offset":0,"status":"completed"}],"push":{"queue":"q","transactionId":"t"}}`,
	`{"group":"g","leaseId":"` + bodyref.TestLease + `","items":[{"offset":0,"status":"completed"}],"push":[{"queue":"q","transactionId":"t","data":"\u0000"}]}`,
	`{"group":"g","leaseId":"` + bodyref.TestLease + `","items":[{"offset":0,"status":"completed"}],"push":[{"queue":"q","transactionId":""}]}`,
}

func FuzzDecodeAckPush(f *testing.F) {
	for _, s := range ackPushSeeds {
		f.Add([]byte(s))
	}
	bodyref.FuzzDecoder(f, refAckPush, false, func(b []byte) (queengate.AckPushRequest, *queengate.Error) { return decodeAckPush(b, 1<<20) },
		func(req queengate.AckPushRequest, vals map[string]json.RawMessage) string {
			var push []map[string]json.RawMessage
			_ = json.Unmarshal(vals["push"], &push)
			if len(push) != len(req.Push) {
				return fmt.Sprintf("%d derived messages, the reference %d", len(req.Push), len(push))
			}
			for i, m := range push {
				got := req.Push[i]
				partition := queengate.DefaultPartition
				if _, given := m["partition"]; given {
					partition, _ = bodyref.String(m["partition"])
				}
				if d := bodyref.SameString("transactionId", got.TransactionID, m) + bodyref.SameString("queue", got.Queue, m); d != "" {
					return fmt.Sprintf("push %d: %s", i, d)
				}
				if got.Partition != partition || string(got.Data) != string(m["data"]) {
					return fmt.Sprintf("push %d: %+v, the reference %v", i, got, m)
				}
			}
			return bodyref.SameString("leaseId", req.LeaseID, vals)
		})
}

// Each problem of an ack-and-push body is a 4xx naming it in the
// protocol's words.
func TestDecodeAckPushNamesTheProblem(t *testing.T) {
	t.Parallel()
	head := `{"group":"g","leaseId":"` + bodyref.TestLease + `","items":[{"offset":0,"status":"completed"}],"push":`
	for _, c := range []struct {
		push string
		code int
		says string
	}{
		{`[{"queue":"q"}]`, 400, `push 0: "transactionId" must be a string of 1-256 bytes`},
		{`[{"transactionId":"t"}]`, 400, `push 0: "queue" is missing`},
		{`[{"queue":"q","transactionId":"t"},{"queue":"q","transactionId":"t","payload":1}]`, 400, `push 1: unknown field "payload"`},
		{`[{"queue":"q","transactionId":7}]`, 400, `"transactionId" must be a string`},
		{`[{"queue":"a.b","transactionId":"t"}]`, 400, `"queue" must be a name`},
		{`{"queue":"q","transactionId":"t"}`, 400, `"push" must be an array`},
		{`[{"queue":"q","transactionId":"t","data":"` + strings.Repeat("x", 1<<20) + `"}]`, 413, "over the"},
		{`[` + strings.Repeat(`{"queue":"q","transactionId":"t"},`, queengate.MaxAckPushMessages) + `{"queue":"q","transactionId":"t"}]`, 413,
			`at most 1000`},
	} {
		_, werr := decodeAckPush([]byte(head+c.push+"}"), 1<<20)
		if werr == nil || werr.Code != c.code || !strings.Contains(werr.Text, c.says) || bodyref.SpeaksGo(werr.Text) {
			t.Errorf("push %.80s: %v; want %d saying %q", c.push, werr, c.code, c.says)
		}
	}
	failed := `{"group":"g","leaseId":"` + bodyref.TestLease + `","items":[{"offset":0,"status":"failed"}]}`
	if _, werr := decodeAckPush([]byte(failed), 1<<20); werr == nil || !strings.Contains(werr.Text, "completes its items") {
		t.Errorf("a failed item: %v", werr)
	}
	long := strings.Repeat("<", 256)
	many := head + `[` + strings.Repeat(`{"queue":"q","transactionId":"`+long+`"},`, 999) + `{"queue":"q","transactionId":"t"}]}`
	if _, werr := decodeAckPush([]byte(many), 64<<10); werr == nil || werr.Code != 413 || !strings.Contains(werr.Text, "send fewer") {
		t.Errorf("an answer that could exceed the max payload: %v", werr)
	}
}

// The bound an ack-and-push is checked against holds for its largest
// answer: the longest names, transactionIds that JSON escapes at every
// byte, the largest offsets and ids, every flag set.
func TestAckPushAnswerBoundHoldsForTheLargestAnswer(t *testing.T) {
	t.Parallel()
	name, id := strings.Repeat("q", 128), strings.Repeat("<", queengate.MaxTxnIDBytes)
	const items, pushed = 500, queengate.MaxAckPushMessages
	req := queengate.AckPushRequest{Group: name, LeaseID: bodyref.TestLease}
	res := model.AckPushResult{Ack: model.SettledBatch{NextOffset: math.MaxInt64, LeaseEnded: true}}
	for range items {
		req.Items = append(req.Items, queengate.AckItem{TransactionID: id, Status: queengate.AckCompleted})
		res.Ack.Items = append(res.Ack.Items, model.AckOutcome{Offset: math.MaxInt64, Result: model.AckUnknownTxnID})
	}
	for range pushed {
		req.Push = append(req.Push, queengate.DerivedMessage{Queue: name, Partition: name, TransactionID: id})
		res.Pushed = append(res.Pushed, model.DerivedOutcome{PartitionID: math.MaxInt64, Offset: math.MaxInt64, Duplicate: true, Conflict: true})
	}
	b, err := json.Marshal(ackPushAnswer(req, res))
	if err != nil {
		t.Fatal(err)
	}
	if bound := ackPushAnswerBound(req); int64(len(b)) > bound {
		t.Errorf("the answer takes %d bytes, over its bound %d", len(b), bound)
	}
}
