package wire

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"unicode/utf8"

	queengate "github.com/queengate/queengate"
	"github.com/queengate/queengate/model"
)

// TestPushAnswerCutsErrorTextsToFit: failed messages' error texts that
// would take the answer over the max payload are cut, each to a share of
// the room left, on a character boundary and marked; texts that fit are
// kept whole.
func TestPushAnswerCutsErrorTextsToFit(t *testing.T) {
	const limit = 64 << 10
	msgs := make([]model.Incoming, 200)
	long := make([]model.PushOutcome, len(msgs))
	short := make([]model.PushOutcome, len(msgs))
	text := strings.Repeat("\x01é\"", 1000) // escapes of 6, 2 and 1 bytes
	for i := range msgs {
		msgs[i].TxnID = fmt.Sprintf("t-%d", i)
		long[i] = model.PushOutcome{Status: model.StatusFailed, Err: errors.New(text)}
		short[i] = model.PushOutcome{Status: model.StatusFailed, Err: errors.New("ingest: not stored: x")}
	}
	if werr := CheckPushSizes(msgs, limit); werr != nil {
		t.Fatalf("200 short messages refused: %v", werr)
	}
	b := EncodeReply(msgs, long, limit)
	if len(b) > limit {
		t.Fatalf("answer of %d bytes, over the %d limit", len(b), limit)
	}
	var answers []queengate.Result
	if err := json.Unmarshal(b, &answers); err != nil || len(answers) != len(msgs) {
		t.Fatalf("answer is not %d entries: %v", len(msgs), err)
	}
	for i, a := range answers {
		cut, marked := strings.CutSuffix(a.Error, "…")
		if !marked || len(cut) < 10 || !strings.HasPrefix(text, cut) || !utf8.ValidString(a.Error) {
			t.Fatalf("answer %d error %q: want a marked prefix of the text, cut on a character", i, a.Error)
		}
	}
	if err := json.Unmarshal(EncodeReply(msgs, short, limit), &answers); err != nil || answers[0].Error != "ingest: not stored: x" {
		t.Errorf("a short error text was changed: %q (%v)", answers[0].Error, err)
	}
}

// TestErrorAnswerIsBounded: an error message quoting a long input is cut,
// so that the header and body carrying it always fit.
func TestErrorAnswerIsBounded(t *testing.T) {
	m := ErrorMsg(BadInput("unknown field %q", strings.Repeat("\x01", 100<<10)), "reply")
	var body struct {
		Error queengate.Error `json:"error"`
	}
	if err := json.Unmarshal(m.Data, &body); err != nil {
		t.Fatal(err)
	}
	if len(body.Error.Text) > maxErrorText || !strings.HasSuffix(body.Error.Text, "…") {
		t.Errorf("error message of %d bytes, want at most %d, marked cut", len(body.Error.Text), maxErrorText)
	}
	if h := m.Header.Get("Nats-Service-Error"); len(h) > 4*maxErrorText {
		t.Errorf("error header of %d bytes", len(h))
	}
}
