package gateway_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	queengate "github.com/queengate/queengate"
	"github.com/queengate/queengate/gateway"
)

// echoSet is an EndpointSet of the kind a package outside gateway
// registers: an endpoint echoing its subject's tokens and body, and an
// operator one, decided by the set's own Authorizer.
type echoSet struct{ token string }

func (s echoSet) Endpoints(g *gateway.Gateway) ([]gateway.Endpoint, error) {
	return gateway.WithSubjects(queengate.Subjects{Prefix: g.Prefix()}, []gateway.Endpoint{
		{Name: "echo", API: queengate.API{Verb: "echo", Names: []string{"<queue>", "<partition>"}}, AnswerOnly: true,
			Op: func(_ context.Context, req *gateway.Request) (any, *queengate.Error) {
				queue, partition := req.Names[0], req.Names[1]
				return map[string]string{"queue": queue, "partition": partition, "body": string(req.Data)}, nil
			}},
		{Name: "echo-operator", API: queengate.API{Verb: "echoop"}, Admin: true, AnswerOnly: true,
			Op: func(context.Context, *gateway.Request) (any, *queengate.Error) {
				return map[string]bool{"ok": true}, nil
			}},
	}), nil
}

func (s echoSet) Authorize(header string) *queengate.Error {
	if header != "Bearer "+s.token {
		return &queengate.Error{Code: queengate.CodeUnauthorized, Text: "unauthorized"}
	}
	return nil
}

// TestEndpointSetIsServed: a set's endpoints are answered on their
// subjects, a misshapen subject under a verb is a 400 naming the form,
// and an operator endpoint needs what the set's Authorizer accepts.
func TestEndpointSetIsServed(t *testing.T) {
	e := newEnv(t)
	e.StartGateway(gatewayOpts{Gateway: gateway.Config{Endpoints: []gateway.EndpointSet{echoSet{token: "s3cret"}}}})

	if got, want := string(e.Request(t, e.Prefix+".echo.q.p", "hi").Data), `{"body":"hi","partition":"p","queue":"q"}`; got != want {
		t.Errorf("echo answered %s, want %s", got, want)
	}
	msg := e.Request(t, e.Prefix+".echo.q", "")
	if code := msg.Header.Get("Nats-Service-Error-Code"); code != "400" || !strings.Contains(string(msg.Data), e.Prefix+".echo.<queue>.<partition>") {
		t.Errorf("a misshapen echo subject: %s %s", code, msg.Data)
	}

	for _, tc := range []struct {
		authorization, code string
	}{{"", "401"}, {"Bearer wrong", "401"}, {"Bearer s3cret", ""}} {
		m := nats.NewMsg(e.Prefix + ".echoop")
		if tc.authorization != "" {
			m.Header.Set("Authorization", tc.authorization)
		}
		reply, err := e.Client.RequestMsg(m, 30*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		if code := reply.Header.Get("Nats-Service-Error-Code"); code != tc.code {
			t.Errorf("operator request with %q: code %q (%s), want %q", tc.authorization, code, reply.Data, tc.code)
		}
	}
}
