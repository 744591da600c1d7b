package gateway

import (
	"github.com/nats-io/nats.go"

	queengate "github.com/queengate/queengate"
	"github.com/queengate/queengate/ingest"
	"github.com/queengate/queengate/internal/peers"
	"github.com/queengate/queengate/internal/wire"
	"github.com/queengate/queengate/model"
)

// handleJetStream serves a JetStream-compatible publish (wire.DecodeJetStream)
// through the same fusion as pushes, and answers JetStream's PubAck.
func (g *Gateway) handleJetStream(req *Request) {
	queue, partition, werr := parseJetStreamSubject(g.cfg.Prefix, req.Subject)
	if werr != nil {
		g.refuseJetStream(req, queue, wire.FromError(werr))
		return
	}
	msg, perr := wire.DecodeJetStream(req.Data, req.Header, queue, g.nc.MaxPayload())
	if perr != nil {
		g.refuseJetStream(req, queue, perr)
		return
	}
	p := &jetStreamPublish{g: g, req: req}
	p.msg[0] = msg
	p.r = ingest.Request{Queue: queue, Partition: partition, Messages: p.msg[:], Done: p.done}
	if err := g.ing.Submit(&p.r); err != nil {
		g.refuseJetStream(req, queue, wire.FromError(submitError(err)))
		return
	}
	g.metrics.requests.Inc()
}

// jetStreamPublish is one publish on its way through ingest: its request,
// message and answer in one allocation, as publishes come one message at
// a time.
type jetStreamPublish struct {
	g   *Gateway
	req *Request
	msg [1]model.Incoming
	r   ingest.Request
}

// done answers the publish with its PubAck, or JetStream's error.
func (p *jetStreamPublish) done(results []model.PushOutcome) {
	if p.req.Reply == "" {
		p.req.done(pushOutcome(results))
		return
	}
	p.g.answerPush(p.req, p.req.Reply, results, func(b []byte) []byte {
		queue := p.r.Queue
		if perr := wire.JetStreamResult(results[0]); perr != nil {
			return wire.AppendJetStreamError(b, queue, perr)
		}
		return wire.AppendPubAck(b, queue, results[0].Offset, results[0].Status == model.StatusDuplicate)
	})
}

// refuseJetStream answers a publish refused as a whole in JetStream's
// error shape; one without a reply subject is logged.
func (g *Gateway) refuseJetStream(req *Request, queue string, e *wire.JetStreamError) {
	g.metrics.rejected(e.Code)
	defer req.done(answeredWith(&queengate.Error{Code: e.Code, Text: e.Description}))
	if req.Reply == "" {
		g.log.Warn().Str("subject", req.Subject).Str("error", e.Description).Msg("publish without a reply subject refused")
		return
	}
	g.publish(&nats.Msg{Subject: req.Reply, Data: wire.AppendJetStreamError(nil, queue, e)})
}

// parseJetStreamSubject splits <prefix>.jetstream.<queue>.<partition>, and
// the routing form NATS maps it onto, <prefix>.jsshard.<k>.<queue>.<partition>.
func parseJetStreamSubject(prefix, subject string) (queue, partition string, err *queengate.Error) {
	tokens, ok := namesOf(prefix, subject, queengate.APIJetStream, peers.JetStreamShard)
	if !ok || len(tokens) != 2 {
		return "", "", wire.BadInput("subject %q must be %s", wire.Clip(subject), queengate.APIJetStream.Template(prefix))
	}
	return tokens[0], tokens[1], ValidPlace(tokens[0], tokens[1])
}
