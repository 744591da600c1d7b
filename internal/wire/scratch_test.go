package wire

import (
	"fmt"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"

	"github.com/queengate/queengate/model"
)

// decodeFresh is DecodePush scanning into a scratch of its own.
func decodeFresh(body []byte, maxBatch int) ([]model.Incoming, string) {
	raw, werr := scanMessages(nil, body, maxBatch)
	if werr != nil {
		return nil, werr.Text
	}
	msgs := make([]model.Incoming, len(raw))
	for i := range raw {
		if werr := raw[i].Check(i); werr != nil {
			return nil, werr.Text
		}
		msgs[i] = model.Incoming{TxnID: raw[i].TxnIDOrMint(), Data: raw[i].Data}
	}
	return msgs, ""
}

// TestDecodePushKeepsNothingOfTheLastPush: pushes decoded one after the
// other through the reused scratch (large and small, valid and refused,
// with and without data) decode as each does with a scratch of its own.
func TestDecodePushKeepsNothingOfTheLastPush(t *testing.T) {
	bodies := []string{
		`[{"transactionId":"a","data":{"x":1}},{"transactionId":"b","data":[1,2]},{"transactionId":"c"}]`,
		`{"transactionId":"solo","data":"é"}`,
		`[{"transactionId":"a","data":1,"extra":2}]`,
		`[{"transactionId":"d"},{"transactionId":"e","data":null}]`,
		`not json`,
		`[` + strings.Repeat(`{"transactionId":"many","data":{"k":"v"}},`, 99) + `{"transactionId":"last"}]`,
		`[` + strings.Repeat(`{"transactionId":"cut","data":{"k":"v"}},`, 60) + `{"transactionId":`, // refused after 60 scanned
		`[` + strings.Repeat(`{"transactionId":"big","data":1},`, 999) + `{"transactionId":"big"}]`,
	}
	r := rand.New(rand.NewPCG(35, 5))
	for range 500 {
		body := []byte(bodies[r.IntN(len(bodies))])
		got, werr := DecodePush(body, 1000)
		want, wantErr := decodeFresh(body, 1000)
		gotErr := ""
		if werr != nil {
			gotErr = werr.Text
		}
		if gotErr != wantErr || !reflect.DeepEqual(got, want) {
			t.Fatalf("%s: decoded %v (%q), alone %v (%q)", body, got, gotErr, want, wantErr)
		}
	}
}

// TestAppendReplyIsEncodeReply: an answer written in a reused buffer
// holding an earlier answer is the answer EncodeReply writes, whole or
// with its error texts cut to fit.
func TestAppendReplyIsEncodeReply(t *testing.T) {
	var buf []byte
	r := rand.New(rand.NewPCG(35, 6))
	for range 300 {
		n := 1 + r.IntN(20)
		msgs := make([]model.Incoming, n)
		results := make([]model.PushOutcome, n)
		for i := range n {
			msgs[i].TxnID = fmt.Sprint("id-", r.IntN(1000), "-é")
			switch r.IntN(3) {
			case 0:
				results[i] = model.PushOutcome{Status: model.StatusQueued, PartitionID: 7, Offset: r.Int64N(1 << 40)}
			case 1:
				results[i] = model.PushOutcome{Status: model.StatusDuplicate, PartitionID: 7, Offset: r.Int64N(1 << 40), Conflict: r.IntN(2) == 0}
			default:
				results[i] = model.PushOutcome{Status: model.StatusFailed, Err: fmt.Errorf("not stored: %s", strings.Repeat("why ", r.IntN(200)))}
			}
		}
		limit := []int{1 << 20, 400 + r.IntN(4000)}[r.IntN(2)]
		want := EncodeReply(msgs, results, limit)
		buf = AppendReply(buf, msgs, results, limit)
		if string(buf) != string(want) {
			t.Fatalf("limit %d: appended %s\nencoded %s", limit, buf, want)
		}
	}
}
