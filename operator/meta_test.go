package operator_test

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"

	queengate "github.com/queengate/queengate"
	"github.com/queengate/queengate/ingest"
	"github.com/queengate/queengate/model"
)

// TestHeadersAndBinaryDataLiveThroughEveryHandOver: a message with
// headers and binary data keeps both, byte for byte, wherever it goes:
// a pop, its dead letter, the message a redrive pushes back, and a
// timer's fired message.
func TestHeadersAndBinaryDataLiveThroughEveryHandOver(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	g := e.startOpsGateway("secret", ingest.Config{})
	e.SetMaxAttempts(t, e.Queue, 1)
	const body = `{"transactionId":"bin","data":"AAEC/w==","dataEncoding":"base64","headers":{"traceparent":"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01","x-tags":["a","b"]}}`
	wantStatus(t, e.Push(t, e.Subject("p"), body), "queued")
	wantMessage := func(what string, m queengate.StoredMessage) {
		t.Helper()
		b, err := m.Bytes()
		if err != nil || !bytes.Equal(b, []byte{0, 1, 2, 0xff}) || m.DataEncoding != "base64" ||
			m.Headers["traceparent"][0] != "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01" ||
			strings.Join(m.Headers["x-tags"], ",") != "a,b" {
			t.Errorf("%s: %+v (bytes %q, %v)", what, m, b, err)
		}
	}

	a, _ := g.PopFrom(t, e.Queue, "g")
	if len(a.Messages) != 1 {
		t.Fatalf("pop: %+v", a)
	}
	wantMessage("popped", a.Messages[0].StoredMessage)
	if ans := g.FailOne(t, e.Queue, "g", a, "boom"); ans.DeadLettered != 1 {
		t.Fatalf("fail: %+v", ans)
	}
	d, _ := g.PopFrom(t, model.DeadLetterQueue(e.Queue), "d")
	var letter model.DeadLetter
	if len(d.Messages) != 1 || json.Unmarshal(d.Messages[0].Data, &letter) != nil {
		t.Fatalf("the dead letter: %+v", d)
	}
	if string(letter.Data) != `"AAEC/w=="` || letter.DataEncoding != "base64" || !strings.Contains(string(letter.Headers), `"x-tags":["a","b"]`) {
		t.Errorf("dead letter %s: want the data, its encoding and the headers", d.Messages[0].Data)
	}

	if r := g.redrive(t, false, ""); r.Moved != 1 {
		t.Fatalf("redrive: %+v", r)
	}
	e.SetMaxAttempts(t, e.Queue, 5)
	again, _ := g.PopFrom(t, e.Queue, "g")
	if len(again.Messages) != 1 {
		t.Fatalf("pop after the redrive: %+v", again)
	}
	wantMessage("redriven", again.Messages[0].StoredMessage)

	status, text := g.ViaNATS(t, "timer."+e.Queue+".t", "", strings.Replace(body, `"transactionId":"bin"`, `"transactionId":"tm","delayMs":0`, 1))
	if status != 200 {
		t.Fatalf("timer: %d %s", status, text)
	}
	// The ops gateway runs no fire loop: fire as the loop would.
	if fired, err := e.Store.FireDue(context.Background(), 100, nil); err != nil || len(fired) != 1 {
		t.Fatalf("fire: %d timers, %v", len(fired), err)
	}
	_, got := g.ViaNATS(t, "read."+e.Queue+".t", "", `{}`)
	var fired queengate.ReadAnswer
	if json.Unmarshal(got, &fired) != nil || len(fired.Messages) != 1 {
		t.Fatalf("read of the timer's partition: %s", got)
	}
	wantMessage("fired", fired.Messages[0])
}

// TestExplainComparesBinaryDataByItsBytes: explain judges a duplicate's
// binary data against its original's bytes, whatever its headers.
func TestExplainComparesBinaryDataByItsBytes(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	g := e.startOpsGateway("secret", ingest.Config{})
	if status, body := g.ViaNATS(t, "configure", "secret", `{"queue":"`+e.Queue+`","options":{"onConflict":"reject"}}`); status != 200 {
		t.Fatalf("configure: %d %s", status, body)
	}
	wantStatus(t, e.Push(t, e.Subject("p"), `{"transactionId":"x","data":"AAEC","dataEncoding":"base64","headers":{"a":"1"}}`), "queued")
	for _, c := range []struct {
		body, answer string
	}{
		{`{"transactionId":"x","data":"AAEC","dataEncoding":"base64","headers":{"a":"2"}}`, "duplicate"},
		{`{"transactionId":"x","data":"AAED","dataEncoding":"base64"}`, "failed"},
		{`{"transactionId":"x","data":"AAEC"}`, "failed"}, // the JSON string "AAEC" is other bytes
	} {
		status, body := g.ViaNATS(t, "explain."+e.Queue+".p", "", c.body)
		var ans queengate.ExplainAnswer
		if status != 200 || json.Unmarshal(body, &ans) != nil || ans.Answer != c.answer {
			t.Errorf("explain %s: %d %s, want the answer %q", c.body, status, body, c.answer)
		}
	}
}
