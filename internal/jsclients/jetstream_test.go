package jsclients

import (
	"bytes"
	"context"
	"maps"
	"slices"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// startJetStream starts an in-process nats-server with JetStream on a
// free loopback port.
func startJetStream(t *testing.T) *server.Server {
	t.Helper()
	s, err := server.NewServer(&server.Options{
		Host:      "127.0.0.1",
		Port:      -1,
		JetStream: true,
		StoreDir:  t.TempDir(),
		NoLog:     true,
		NoSigs:    true,
	})
	if err != nil {
		t.Fatal(err)
	}
	s.Start()
	t.Cleanup(func() {
		s.Shutdown()
		s.WaitForShutdown()
	})
	if !s.ReadyForConnections(10 * time.Second) {
		t.Fatal("nats-server not ready for connections")
	}
	return s
}

// TestTheScriptAgainstJetStreamItself runs publish.mjs against genuine
// JetStream, so that what the script and the JavaScript client make of
// JetStream's answers is known before they are pointed at queengate.
func TestTheScriptAgainstJetStreamItself(t *testing.T) {
	s := startJetStream(t)
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()

	nc, err := nats.Connect(s.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	stream, err := js.CreateStream(ctx, jetstream.StreamConfig{
		Name:       "ORDERS",
		Subjects:   []string{"orders.>"},
		Duplicates: 2 * time.Minute,
	})
	if err != nil {
		t.Fatal(err)
	}

	binary := []byte{0, 1, 2, 255}
	hdrs := map[string][]string{
		"traceparent": {"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"},
		"X-Tenant":    {"acme"},
	}
	got := RunNode(t, Plan{Servers: s.ClientURL(), Steps: []Step{
		{Subject: "orders.new", Data: []byte(`{"a":1}`), MsgID: "m-1"},
		{Subject: "orders.new", Data: []byte(`{"a":1}`), MsgID: "m-1"},
		{Subject: "orders.bin", Data: binary, MsgID: "m-2", Headers: hdrs},
		{Subject: "orders.new", Data: []byte(`{"a":2}`), MsgID: "m-3", ExpectStream: "OTHER"},
		{Subject: "orders.async", Data: []byte("a1"), MsgID: "a-1", Async: true},
		{Subject: "orders.async", Data: []byte("a2"), MsgID: "a-2", Async: true},
		{Subject: "orders.async", Data: []byte("a1"), MsgID: "a-1", Async: true},
	}})

	want := []Result{
		{OK: true, Stream: "ORDERS", Seq: 1},
		{OK: true, Stream: "ORDERS", Seq: 1, Duplicate: true},
		{OK: true, Stream: "ORDERS", Seq: 2},
		// JetStream's answer to a Nats-Expected-Stream naming another
		// stream: {"error":{"code":400,"err_code":10060,
		// "description":"expected stream does not match"}}, which the
		// client throws as a JetStreamApiError with that description.
		{Name: "JetStreamApiError", Message: "expected stream does not match", Code: 400, ErrCode: 10060},
		// The async publishes leave on one connection in step order, so
		// the server stores them in that order.
		{OK: true, Stream: "ORDERS", Seq: 3},
		{OK: true, Stream: "ORDERS", Seq: 4},
		{OK: true, Stream: "ORDERS", Seq: 3, Duplicate: true},
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("step %d: got %+v, want %+v", i+1, got[i], want[i])
		}
	}

	// What the client sent is what JetStream stored, byte for byte: the
	// binary payload, and the headers with their names' case kept, plus
	// the Nats-Msg-Id the client added.
	msg, err := stream.GetMsg(ctx, 2)
	if err != nil {
		t.Fatal(err)
	}
	if msg.Subject != "orders.bin" || !bytes.Equal(msg.Data, binary) {
		t.Errorf("message 2: subject %q data %v, want orders.bin %v", msg.Subject, msg.Data, binary)
	}
	wantHdrs := maps.Clone(hdrs)
	wantHdrs["Nats-Msg-Id"] = []string{"m-2"}
	// Compared as a map, not with Header.Get, which canonicalizes names:
	// the names' case is part of what must survive.
	if !maps.EqualFunc(msg.Header, wantHdrs, slices.Equal) {
		t.Errorf("message 2 headers: got %q, want %q", msg.Header, wantHdrs)
	}
	info, err := stream.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if info.State.Msgs != 4 || info.State.LastSeq != 4 {
		t.Errorf("stream state: %d messages, last seq %d; want 4, 4", info.State.Msgs, info.State.LastSeq)
	}
}
