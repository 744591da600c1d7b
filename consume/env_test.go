package consume_test

import (
	"testing"

	"github.com/queengate/queengate/consume"
	"github.com/queengate/queengate/gateway"
	"github.com/queengate/queengate/ingest"
	"github.com/queengate/queengate/internal/gatewaytest"
	"github.com/queengate/queengate/internal/pgtest"
	"github.com/queengate/queengate/operator"
)

func TestMain(m *testing.M) { pgtest.Run(m) }

// testEnv is internal/gatewaytest's Env, which this package's own
// helpers extend.
type testEnv struct {
	*gatewaytest.Env
	// ing is the ingester of the gateway consuming started.
	ing *ingest.Ingester
}

func newEnv(t *testing.T) *testEnv {
	t.Helper()
	return &testEnv{Env: gatewaytest.NewEnv(t)}
}

// newSmallPayloadEnv is newEnv with a small max payload
// (gatewaytest.SmallPayload).
func newSmallPayloadEnv(t *testing.T) *testEnv {
	t.Helper()
	return &testEnv{Env: gatewaytest.NewSmallPayloadEnv(t)}
}

// opsGateway is internal/gatewaytest's OpsGateway, on this package's
// testEnv.
type opsGateway struct {
	*gatewaytest.OpsGateway
	e *testEnv
}

func (e *testEnv) startOpsGateway(token string, icfg ingest.Config) *opsGateway {
	e.T.Helper()
	return &opsGateway{e.StartOpsGateway(token, icfg), e}
}

// withQueueOps serves c beside the operator API, which deletes and
// purges queues and tells c, as every gateway does.
func (e *testEnv) withQueueOps(c *consume.Consumers) gatewayOpts {
	ops := operator.NewOps(operator.OpsConfig{}, pgtest.Store(e.T, e.PGURL), nil, nil)
	ops.WatchQueues(c)
	return gatewayOpts{Gateway: gateway.Config{Endpoints: []gateway.EndpointSet{ops, c}}}
}

type (
	answer      = gatewaytest.Answer
	msg         = gatewaytest.Msg
	gatewayOpts = gatewaytest.GatewayOpts
)

var (
	msgs       = gatewaytest.Msgs
	wantStatus = gatewaytest.WantStatus
	off        = gatewaytest.Off
)
