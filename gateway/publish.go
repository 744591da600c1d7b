package gateway

import (
	"strings"

	"github.com/nats-io/nats.go"

	queengate "github.com/queengate/queengate"
	"github.com/queengate/queengate/ingest"
	"github.com/queengate/queengate/internal/wire"
	"github.com/queengate/queengate/model"
)

// handlePublish serves a JetStream-compatible publish (wire.DecodePublish)
// through the same fusion as pushes, and answers JetStream's PubAck.
func (g *Gateway) handlePublish(req *Request) {
	queue, partition, werr := parsePublishSubject(g.cfg.Prefix, req.Subject)
	if werr != nil {
		g.refusePublish(req, queue, wire.FromError(werr))
		return
	}
	msg, perr := wire.DecodePublish(req.Data, req.Header, queue, g.nc.MaxPayload())
	if perr != nil {
		g.refusePublish(req, queue, perr)
		return
	}
	msgs := []ingest.Message{msg}
	r := &ingest.Request{Queue: queue, Partition: partition, Messages: msgs}
	r.Done = func(results []ingest.Result) {
		if req.Reply == "" {
			req.done(pushOutcome(results))
			return
		}
		var body []byte
		if perr := wire.PublishResult(results[0]); perr != nil {
			body = wire.AppendPublishError(nil, queue, perr)
		} else {
			body = wire.AppendPubAck(nil, queue, results[0].Offset, results[0].Status == model.StatusDuplicate)
		}
		if err := g.publish(&nats.Msg{Subject: req.Reply, Data: body}); err != nil {
			req.done(notSent(err))
			return
		}
		req.done(pushOutcome(results))
	}
	if err := g.ing.Submit(r); err != nil {
		g.refusePublish(req, queue, wire.FromError(submitError(err)))
		return
	}
	g.metrics.requests.Inc()
}

// refusePublish answers a publish refused as a whole in JetStream's
// error shape; one without a reply subject is logged.
func (g *Gateway) refusePublish(req *Request, queue string, e *wire.PublishError) {
	g.metrics.rejected(e.Code)
	defer req.done(answeredWith(&queengate.Error{Code: e.Code, Text: e.Description}))
	if req.Reply == "" {
		g.log.Warn().Str("subject", req.Subject).Str("error", e.Description).Msg("publish without a reply subject refused")
		return
	}
	g.publish(&nats.Msg{Subject: req.Reply, Data: wire.AppendPublishError(nil, queue, e)})
}

// parsePublishSubject splits <prefix>.publish.<queue>.<partition>, and
// the routing form NATS maps it onto, <prefix>.pubshard.<k>.<queue>.<partition>.
func parsePublishSubject(prefix, subject string) (queue, partition string, err *queengate.Error) {
	s := queengate.Subjects{Prefix: prefix}
	rest, ok := strings.CutPrefix(subject, s.Verb(queengate.APIPublish)+".")
	if !ok {
		shard, found := strings.CutPrefix(subject, s.Verb(queengate.APIPublishShard)+".")
		if _, r, cut := strings.Cut(shard, "."); found && cut {
			rest, ok = r, true
		}
	}
	tokens := strings.Split(rest, ".")
	if !ok || len(tokens) != 2 {
		return "", "", wire.BadInput("subject %q must be %s", wire.Clip(subject), queengate.APIPublish.Template(prefix))
	}
	return tokens[0], tokens[1], ValidPlace(tokens[0], tokens[1])
}
