package consume_test

import (
	"encoding/json"
	"strconv"
	"strings"
	"testing"

	queengate "github.com/queengate/queengate"
	"github.com/queengate/queengate/ingest"
	"github.com/queengate/queengate/internal/gatewaytest"
	"github.com/queengate/queengate/model"
)

// readOne reads queue's partition p from offset 0 and returns its first
// message's data.
func (g *opsGateway) readOne(t *testing.T, queue string) []byte {
	t.Helper()
	status, body := g.ViaNATS(t, "read."+queue+".p", "", `{"max":1}`)
	var r queengate.ReadAnswer
	if err := json.Unmarshal(body, &r); status != 200 || err != nil || len(r.Messages) != 1 {
		t.Fatalf("read of %s: %d %.300s", queue, status, body)
	}
	return r.Messages[0].Data
}

func decodeDeadLetter(t *testing.T, data []byte) model.DeadLetter {
	t.Helper()
	var d model.DeadLetter
	if err := json.Unmarshal(data, &d); err != nil {
		t.Fatalf("dead letter %.300s: %v", data, err)
	}
	return d
}

// A message of data near the push limit, failed with an error of 4096
// '<', and its dead letter failed the same way, through two dead-letter
// levels: every dead letter is within the push limit, so each is
// delivered (again, after a failure) and read back; the errors keep '<'
// unescaped, in the dead letters and as lastError.
func TestDeadLettersOfALargeMessageAreDeliveredAtEveryLevel(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	g := e.startOpsGateway("", ingest.Config{})
	limit := int(queengate.MaxDataBytes(e.Client.MaxPayload()))
	data := `"` + strings.Repeat("a", limit-4) + `"` // 2 bytes under the limit
	lt := strings.Repeat("<", queengate.MaxAckErrorSize)
	rawLt := `"` + lt + `"`
	e.SetMaxAttempts(t, e.Queue, 1)
	wantStatus(t, e.Push(t, e.Subject("p"), []msg{{TransactionID: "big", Data: json.RawMessage(data)}}), "queued")

	a, _ := g.PopFrom(t, e.Queue, "g")
	if len(a.Messages) != 1 || string(a.Messages[0].Data) != data {
		t.Fatalf("the large message was not delivered: %d messages", len(a.Messages))
	}
	if ans := g.FailOne(t, e.Queue, "g", a, lt); ans.DeadLettered != 1 {
		t.Fatalf("failing it at maxAttempts 1: %+v", ans)
	}

	// Its dead letter: no room for its data, which it says; the error whole.
	dlq := model.DeadLetterQueue(e.Queue)
	a, text := g.PopFrom(t, dlq, "d")
	if len(a.Messages) != 1 {
		t.Fatalf("the dead letter was not delivered: %.300s", text)
	}
	first := a.Messages[0].Data
	d := decodeDeadLetter(t, first)
	if d.DataOmitted == nil || d.DataOmitted.Bytes != len(data) || d.Data != nil || d.Error != lt || d.MessageID == "" {
		t.Errorf("dead letter %.300s: want dataOmitted of %d bytes, the error whole and the messageId", first, len(data))
	}
	if !strings.Contains(string(first), `"error":`+rawLt) {
		t.Errorf("the dead letter's error is escaped: %.200s", first)
	}
	if len(first) > limit {
		t.Errorf("the dead letter's data takes %d bytes, over the push limit %d", len(first), limit)
	}
	if got := g.readOne(t, e.Queue); string(got) != data {
		t.Errorf("the original is not readable by its messageId's partition: %.100s", got)
	}
	// Failed, it is delivered again, its lastError as given.
	g.FailOne(t, dlq, "d", a, lt)
	a, text = g.PopFrom(t, dlq, "d")
	if len(a.Messages) != 1 || a.Messages[0].Attempts != 2 || a.Messages[0].LastError != lt {
		t.Fatalf("the failed dead letter was not delivered again with its lastError: %.300s", text)
	}
	if !strings.Contains(text, `"lastError":`+rawLt) {
		t.Errorf("the pop's lastError is escaped: %.200s", text[strings.Index(text, `"lastError"`):])
	}

	// Out of attempts, it is dead-lettered in turn, its data byte for byte.
	e.SetMaxAttempts(t, dlq, 2)
	if ans := g.FailOne(t, dlq, "d", a, lt); ans.DeadLettered != 1 {
		t.Fatalf("failing the dead letter at maxAttempts 2: %+v", ans)
	}
	dlq2 := model.DeadLetterQueue(dlq)
	a, text = g.PopFrom(t, dlq2, "e")
	if len(a.Messages) != 1 {
		t.Fatalf("the second-level dead letter was not delivered: %.300s", text)
	}
	second := decodeDeadLetter(t, a.Messages[0].Data)
	if string(second.Data) != string(first) || second.DataOmitted != nil || second.Error != lt {
		t.Fatalf("second-level dead letter %.300s: want the first's data whole and the error", a.Messages[0].Data)
	}
	if got := g.readOne(t, dlq); string(got) != string(first) {
		t.Errorf("read of the first dead letter: %.200s", got)
	}
	if got := g.readOne(t, dlq2); string(got) != string(a.Messages[0].Data) {
		t.Errorf("read of the second dead letter: %.200s", got)
	}
}

// A message stored while the max payload was larger than now takes more
// than any pop's answer can carry: its pop dead-letters it, saying why,
// and delivers the message after it, instead of answering no messages
// for ever. Its dead letter is deliverable; a read of the original is a
// 413 that claims no cause.
func TestAMessageNoPopCanCarryIsDeadLetteredNotStalled(t *testing.T) {
	t.Parallel()
	large := newEnv(t) // 1 MiB
	large.StartGateway(gatewayOpts{})
	data := `"` + strings.Repeat("a", 100<<10) + `"`
	wantStatus(t, large.Push(t, large.Subject("p"), []msg{{TransactionID: "big", Data: json.RawMessage(data)},
		{TransactionID: "small", Data: 1}}), "queued", "queued")

	small := newSmallPayloadEnv(t) // the same database
	g := small.startOpsGateway("", ingest.Config{})
	a, text := g.PopFrom(t, large.Queue, "g")
	if len(a.Messages) != 1 || a.Messages[0].TransactionID != "small" || a.DeadLettered != 1 {
		t.Fatalf("pop past a message too large to deliver: %.300s; want small delivered and big dead-lettered", text)
	}
	a, text = g.PopFrom(t, model.DeadLetterQueue(large.Queue), "d")
	if len(a.Messages) != 1 {
		t.Fatalf("the dead letter was not delivered: %.300s", text)
	}
	d := decodeDeadLetter(t, a.Messages[0].Data)
	if d.DataOmitted == nil || d.DataOmitted.Bytes != len(data) || !strings.HasPrefix(d.Error, "too large to deliver") ||
		!strings.Contains(d.Error, strconv.Itoa(gatewaytest.SmallPayload-1024)) {
		t.Fatalf("dead letter %.300s: want dataOmitted and why", a.Messages[0].Data)
	}
	status, body := g.ViaNATS(t, "read."+large.Queue+".p", "", `{"max":1}`)
	if status != 413 || strings.Contains(string(body), "pushed while") {
		t.Errorf("read of the large message: %d %s; want a 413 claiming no cause", status, body)
	}
}
