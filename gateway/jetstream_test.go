package gateway_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"strconv"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	queengate "github.com/queengate/queengate"
	"github.com/queengate/queengate/ingest"
)

// readAll reads a partition's messages with the Go client.
func (e *testEnv) readAll(t *testing.T, partition string) []queengate.StoredMessage {
	t.Helper()
	c, err := queengate.NewClient(e.Client, queengate.WithPrefix(e.Prefix))
	if err != nil {
		t.Fatal(err)
	}
	ans, err := c.Read(context.Background(), e.Queue, partition, queengate.ReadRequest{})
	if err != nil {
		t.Fatal(err)
	}
	return ans.Messages
}

// TestJetStreamPublishCallsStoreAsJetStreamWould: nats.go's jetstream
// Publish, PublishMsg and PublishAsync, unchanged but for the subject,
// get JetStream's PubAck (the queue as stream, offset+1 as seq, duplicate
// for a repeated Nats-Msg-Id), and the messages read back byte for byte
// with their headers: JSON data as JSON, any other bytes as base64.
func TestJetStreamPublishCallsStoreAsJetStreamWould(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.startOpsGateway("", ingest.Config{})
	js, err := jetstream.New(e.Client)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	subject := e.Prefix + ".jetstream." + e.Queue + ".p"

	ack, err := js.Publish(ctx, subject, []byte(`{"order":1}`), jetstream.WithMsgID("o-1"))
	if err != nil || ack.Stream != e.Queue || ack.Sequence != 1 || ack.Duplicate {
		t.Fatalf("first publish: %+v, %v", ack, err)
	}
	again, err := js.Publish(ctx, subject, []byte(`{"order":1}`), jetstream.WithMsgID("o-1"))
	if err != nil || again.Sequence != 1 || !again.Duplicate {
		t.Fatalf("repeated Nats-Msg-Id: %+v, %v, want a duplicate of seq 1", again, err)
	}
	binary := []byte{0, 1, 2, 0xff, '\n'}
	m := nats.NewMsg(subject)
	m.Data = binary
	m.Header.Set("traceparent", "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01")
	m.Header.Add("X-Tags", "a")
	m.Header.Add("X-Tags", "b")
	if ack, err := js.PublishMsg(ctx, m, jetstream.WithMsgID("o-2")); err != nil || ack.Sequence != 2 {
		t.Fatalf("PublishMsg of binary data with headers: %+v, %v", ack, err)
	}
	var futures []jetstream.PubAckFuture
	for _, id := range []string{"a-1", "a-2", "a-1"} {
		f, err := js.PublishAsync(subject, []byte("plain text "+id), jetstream.WithMsgID(id))
		if err != nil {
			t.Fatal(err)
		}
		futures = append(futures, f)
	}
	wantSeqs := []uint64{3, 4, 3}
	for i, f := range futures {
		select {
		case ack := <-f.Ok():
			if ack.Sequence != wantSeqs[i] || ack.Duplicate != (i == 2) {
				t.Errorf("PublishAsync %d: %+v, want seq %d", i, ack, wantSeqs[i])
			}
		case err := <-f.Err():
			t.Fatalf("PublishAsync %d: %v", i, err)
		case <-ctx.Done():
			t.Fatal("PublishAsync: no PubAck")
		}
	}

	got := e.readAll(t, "p")
	if len(got) != 4 {
		t.Fatalf("read %d messages, want 4", len(got))
	}
	if string(got[0].Data) != `{"order":1}` || got[0].DataEncoding != "" || got[0].TransactionID != "o-1" {
		t.Errorf("JSON data read back as %+v", got[0])
	}
	if b, err := got[1].Bytes(); err != nil || !bytes.Equal(b, binary) || got[1].DataEncoding != "base64" {
		t.Errorf("binary data read back as %q (%s), %v", b, got[1].Data, err)
	}
	if h := got[1].Headers; len(h) != 2 || h["traceparent"][0] != m.Header.Get("traceparent") ||
		len(h["X-Tags"]) != 2 || h["X-Tags"][1] != "b" {
		t.Errorf("headers read back as %v, want traceparent and X-Tags [a b] (Nats-Msg-Id is the transactionId, not a header)", h)
	}
	if b, _ := got[3].Bytes(); string(b) != "plain text a-2" {
		t.Errorf("plain text read back as %q", b)
	}
}

// TestJetStreamPublishErrorsAreJetStreamErrors: what queengate refuses
// reaches the jetstream client as a JetStream API error with the code a
// JetStream server would give, and stores nothing.
func TestJetStreamPublishErrorsAreJetStreamErrors(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.startOpsGateway("", ingest.Config{})
	js, _ := jetstream.New(e.Client)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	subject := e.Prefix + ".jetstream." + e.Queue + ".p"
	for _, c := range []struct {
		name    string
		opts    []jetstream.PublishOpt
		header  nats.Header
		errCode jetstream.ErrorCode
	}{
		{"another stream expected", []jetstream.PublishOpt{jetstream.WithExpectStream("other")}, nil, 10060},
		{"an expectation not honoured", []jetstream.PublishOpt{jetstream.WithExpectLastSequence(3)}, nil, 10003},
		{"more headers than a message may carry", nil, manyHeaders(65), 10003},
	} {
		m := nats.NewMsg(subject)
		m.Data = []byte("x")
		for k, v := range c.header {
			m.Header[k] = v
		}
		_, err := js.PublishMsg(ctx, m, c.opts...)
		var apiErr *jetstream.APIError
		if !errors.As(err, &apiErr) || apiErr.ErrorCode != c.errCode || apiErr.Code != 400 {
			t.Errorf("%s: %v, want a JetStream API error 400 with err_code %d", c.name, err, c.errCode)
		}
	}
	for _, bad := range []string{e.Prefix + ".jetstream." + e.Queue, subject + ".x", e.Prefix + ".jetstream." + e.Queue + ".bad#name"} {
		_, err := js.Publish(ctx, bad, []byte("x"))
		var apiErr *jetstream.APIError
		if !errors.As(err, &apiErr) || apiErr.ErrorCode != 10003 || apiErr.Code != 400 {
			t.Errorf("publish to %q: %v, want a JetStream API error 400 with err_code 10003", bad, err)
		}
	}
	if n := e.StoredCount(t); n != 0 {
		t.Errorf("%d messages stored of refused publishes", n)
	}
}

func manyHeaders(n int) nats.Header {
	h := nats.Header{}
	for i := range n {
		h.Set("x-"+strconv.Itoa(i), "v")
	}
	return h
}

// TestPushTakesHeadersAndBinaryData: a push body's messages carry headers
// and base64 data, and a single message takes the NATS message's own
// headers; each reads back as it was sent, headers in the order sent.
func TestPushTakesHeadersAndBinaryData(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.startOpsGateway("", ingest.Config{})
	const headers = `{"x":["1","2"],"content-type":"application/json"}`
	wantStatus(t, e.Push(t, e.Subject("p"),
		`[{"transactionId":"h","data":{"a":1},"headers":`+headers+`},`+
			`{"transactionId":"b","data":"AAEC/w==","dataEncoding":"base64"}]`), "queued", "queued")
	m := nats.NewMsg(e.Subject("p"))
	m.Data = []byte(`{"transactionId":"n","data":2}`)
	m.Header.Set("traceparent", "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01")
	reply, err := e.Client.RequestMsg(m, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	var answers []answer
	if err := json.Unmarshal(reply.Data, &answers); err != nil || len(answers) != 1 || answers[0].Status != "queued" {
		t.Fatalf("push with NATS headers: %s", reply.Data)
	}
	if raw := e.Request(t, e.Prefix+".read."+e.Queue+".p", `{}`); !bytes.Contains(raw.Data, []byte(`"headers":`+headers)) {
		t.Errorf("read answer %s: want the headers as stored, %s", raw.Data, headers)
	}
	got := e.readAll(t, "p")
	if len(got) != 3 {
		t.Fatalf("read %d messages", len(got))
	}
	if h := got[0].Headers; h["content-type"][0] != "application/json" || len(h["x"]) != 2 || string(got[0].Data) != `{"a":1}` {
		t.Errorf("message with body headers read back as %+v", got[0])
	}
	if b, _ := got[1].Bytes(); !bytes.Equal(b, []byte{0, 1, 2, 0xff}) {
		t.Errorf("base64 data read back as %q", b)
	}
	if got[2].Headers["traceparent"][0] != m.Header.Get("traceparent") {
		t.Errorf("NATS headers read back as %v", got[2].Headers)
	}
}
