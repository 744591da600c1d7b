package jsclients_test

import (
	"bytes"
	"context"
	"testing"

	queengate "github.com/queengate/queengate"
	"github.com/queengate/queengate/ingest"
	"github.com/queengate/queengate/internal/gatewaytest"
	"github.com/queengate/queengate/internal/jsclients"
	"github.com/queengate/queengate/internal/pgtest"
)

func TestMain(m *testing.M) { pgtest.Run(m) }

// TestTheJavaScriptClientPublishesToQueengate runs the plan the script
// runs against JetStream itself (TestTheScriptAgainstJetStreamItself)
// against queengate's publish subject, and finds JetStream's answers:
// the PubAcks, the duplicate, the error for another stream expected; then
// reads the messages back byte for byte with their headers.
func TestTheJavaScriptClientPublishesToQueengate(t *testing.T) {
	t.Parallel()
	e := gatewaytest.NewEnv(t)
	e.StartOpsGateway("", ingest.Config{})
	subject := e.Prefix + ".jetstream." + e.Queue + ".p"
	binary := []byte{0, 1, 2, 255}
	trace := "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	got := jsclients.RunNode(t, jsclients.Plan{Servers: e.NS.ClientURL(), Steps: []jsclients.Step{
		{Subject: subject, Data: []byte(`{"a":1}`), MsgID: "m-1"},
		{Subject: subject, Data: []byte(`{"a":1}`), MsgID: "m-1"},
		{Subject: subject, Data: binary, MsgID: "m-2", Headers: map[string][]string{"traceparent": {trace}, "X-Tenant": {"acme"}}},
		{Subject: subject, Data: []byte("x"), MsgID: "m-3", ExpectStream: "OTHER"},
		{Subject: subject, Data: []byte("async 1"), MsgID: "a-1", Async: true},
		{Subject: subject, Data: []byte("async 2"), MsgID: "a-2", Async: true},
		{Subject: subject, Data: []byte("async 1"), MsgID: "a-1", Async: true},
	}})
	want := []jsclients.Result{
		{OK: true, Stream: e.Queue, Seq: 1},
		{OK: true, Stream: e.Queue, Seq: 1, Duplicate: true},
		{OK: true, Stream: e.Queue, Seq: 2},
		{OK: false, Name: "JetStreamApiError", Message: "expected stream does not match", Code: 400, ErrCode: 10060},
		{OK: true, Stream: e.Queue, Seq: 3},
		{OK: true, Stream: e.Queue, Seq: 4},
		{OK: true, Stream: e.Queue, Seq: 3, Duplicate: true},
	}
	if len(got) != len(want) {
		t.Fatalf("%d results, want %d: %+v", len(got), len(want), got)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("step %d: %+v, want %+v", i, got[i], want[i])
		}
	}

	c, err := queengate.NewClient(e.Client, queengate.WithPrefix(e.Prefix))
	if err != nil {
		t.Fatal(err)
	}
	read, err := c.Read(context.Background(), e.Queue, "p", queengate.ReadRequest{})
	if err != nil || len(read.Messages) != 4 {
		t.Fatalf("read back %d messages, %v; want 4", len(read.Messages), err)
	}
	m := read.Messages[1]
	if b, err := m.Bytes(); err != nil || !bytes.Equal(b, binary) || m.TransactionID != "m-2" {
		t.Errorf("binary message read back as %q (%s), %v", b, m.Data, err)
	}
	if len(m.Headers) != 2 || m.Headers["traceparent"][0] != trace || m.Headers["X-Tenant"][0] != "acme" {
		t.Errorf("headers read back as %v", m.Headers)
	}
}
