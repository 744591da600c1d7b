package main

import (
	"context"
	"os"
	"testing"

	"github.com/queengate/queengate/internal/pgtest"
)

func TestMain(m *testing.M) {
	if isPipelineWorker() { // the pipeline test starts this binary again as its workers
		os.Exit(pipelineWorkerMain())
	}
	code := m.Run()
	removeGateway()
	os.Exit(pgtest.CheckLeftovers(code))
}

// TestPipelineShortProfile runs the ack-and-push pipeline (3,000 inputs)
// while its consumer processes and a gateway are killed with SIGKILL: in
// the end every input is completed and every derived message is in the
// output queue exactly once. The 100k run is `task chaos:pipeline`.
func TestPipelineShortProfile(t *testing.T) {
	t.Parallel() // beside TestFailoverShortProfile: worlds of their own (folders, ports)
	dir, bin := buildGateway(t)
	p := pipelineProfiles["short"]
	out, err := runPipeline(context.Background(), p, dir, bin, t.Logf)
	if err != nil {
		t.Fatal(err)
	}
	t.Log("\n" + out.markdown())
	if n := out.Violations(); n > 0 {
		t.Errorf("%d violations: %v", n, out.Examples)
	}
	if out.WorkerKills != p.WorkerKills || out.WorkerDeaths < p.WorkerKills || out.GatewayKills != p.GatewayKills {
		t.Errorf("%d worker kills sent, %d deaths, %d gateway kills; want %d, at least as many, %d",
			out.WorkerKills, out.WorkerDeaths, out.GatewayKills, p.WorkerKills, p.GatewayKills)
	}
}
