package consume_test

import (
	"testing"

	"github.com/queengate/queengate/ingest"
	"github.com/queengate/queengate/internal/gatewaytest"
	"github.com/queengate/queengate/internal/pgtest"
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
