package consume_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"testing"

	queengate "github.com/queengate/queengate"
	"github.com/queengate/queengate/consume"
	"github.com/queengate/queengate/gateway"
	"github.com/queengate/queengate/internal/pgtest"
)

// TestAckAndPushCarriesHeadersAndBinaryData: a derived message's headers
// and base64 data are stored as a push's are, and a bad header is a 400
// that settles nothing.
func TestAckAndPushCarriesHeadersAndBinaryData(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	consumers := consume.New(pgtest.Store(t, e.PGURL))
	e.StartGateway(gatewayOpts{Gateway: gateway.Config{Endpoints: []gateway.EndpointSet{consumers}}})
	e.fill(t, 1, "p")
	c := e.queenClient(t)
	ctx := t.Context()
	a, err := c.Pop(ctx, e.Queue, "p", queengate.PopRequest{Group: "g", Max: 1})
	if err != nil || len(a.Messages) != 1 {
		t.Fatalf("pop: %+v, %v", a, err)
	}
	out := e.Queue + "-out"
	derived := queengate.DerivedMessage{Queue: out, Partition: "o", TransactionID: "d-1", Data: json.RawMessage(`"AAEC/w=="`),
		DataEncoding: "base64", Headers: json.RawMessage(`{"traceparent":"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"}`)}
	bad := derived
	bad.Headers = json.RawMessage(`{"Nats-Msg-Id":"x"}`)
	_, err = c.AckAndPush(ctx, e.Queue, "p", queengate.AckPushRequest{Group: "g", LeaseID: a.LeaseID, Items: completeAll(a),
		Push: []queengate.DerivedMessage{bad}})
	var werr *queengate.Error
	if !errors.As(err, &werr) || werr.Code != 400 {
		t.Fatalf("a derived message with a reserved header: %v, want a 400", err)
	}
	if _, err := c.AckAndPush(ctx, e.Queue, "p", queengate.AckPushRequest{Group: "g", LeaseID: a.LeaseID, Items: completeAll(a),
		Push: []queengate.DerivedMessage{derived}}); err != nil {
		t.Fatal(err)
	}
	popped, err := c.Pop(ctx, out, "o", queengate.PopRequest{Group: "g", Max: 10})
	if err != nil || len(popped.Messages) != 1 {
		t.Fatalf("pop of the output: %+v, %v", popped, err)
	}
	m := popped.Messages[0].StoredMessage
	if b, _ := m.Bytes(); !bytes.Equal(b, []byte{0, 1, 2, 0xff}) || m.Headers["traceparent"] == nil {
		t.Errorf("derived message popped as %+v", m)
	}
}
