package queengate_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	queengate "github.com/queengate/queengate"
)

// An ack-and-push body carries each derived message's data byte for
// byte: encoding/json would compact it and escape <, > and &, and a
// retry of data first pushed by other means would then be a payload
// conflict.
func TestAckPushBodyKeepsDataAsGiven(t *testing.T) {
	t.Parallel()
	off := int64(7)
	data := `{ "html": "<b>&</b>" }`
	req := queengate.AckPushRequest{Group: "g", LeaseID: "5f0c2a9e-3b1d-4c6e-9a8f-0123456789ab",
		Items: []queengate.AckItem{{Offset: &off, Status: queengate.AckCompleted}},
		Push: []queengate.DerivedMessage{{Queue: "out", TransactionID: "d-<1>", Data: json.RawMessage(data)},
			{Queue: "out", Partition: "p", TransactionID: "d-2"}}}
	body, err := req.AppendJSON(nil)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(body), `"data":`+data+`}`) {
		t.Errorf("body %s does not carry the data as given", body)
	}
	var back queengate.AckPushRequest
	if err := json.Unmarshal(body, &back); err != nil || len(back.Push) != 2 || back.Push[0].TransactionID != "d-<1>" ||
		back.Push[1].Partition != "p" || back.Push[1].Data != nil || *back.Items[0].Offset != 7 || back.LeaseID != req.LeaseID {
		t.Errorf("body %s decodes to %+v, %v", body, back, err)
	}
	req.Push[1].Data = json.RawMessage(`{nope`)
	if _, err := req.AppendJSON(nil); err == nil || !strings.Contains(err.Error(), "push 1") {
		t.Errorf("invalid data: %v, want an error naming the message", err)
	}
}

// Names a subject cannot carry are refused before anything is sent.
func TestAckAndPushRefusesBadNamesBeforeSending(t *testing.T) {
	t.Parallel()
	c, err := queengate.NewClient(nil) // never used: the names are refused first
	if err != nil {
		t.Fatal(err)
	}
	req := queengate.AckPushRequest{Group: "g", Push: []queengate.DerivedMessage{{Queue: "a.b", TransactionID: "t"}}}
	if _, err := c.AckAndPush(context.Background(), "q", "p", req); err == nil || !strings.Contains(err.Error(), "push 0") {
		t.Errorf("a derived message to queue a.b: %v", err)
	}
}
