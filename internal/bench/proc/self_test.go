package proc

import (
	"testing"
)

func TestSumAutovacuumCPU(t *testing.T) {
	t.Parallel()
	log := []byte(`2026-12-01 05:00:00 UTC [1] LOG:  automatic vacuum of table "bench.queen.log_txns": index scans: 0
	system usage: CPU: user: 0.25 s, system: 0.05 s, elapsed: 0.40 s
2026-12-01 05:00:01 UTC [2] LOG:  automatic analyze of table "bench.queen.log_segments"
	system usage: CPU: user: 1.50 s, system: 0.20 s, elapsed: 1.80 s
2026-12-01 05:00:02 UTC [3] LOG:  checkpoint complete`)
	if got := sumAutovacuumCPU(log); got < 1.999 || got > 2.001 {
		t.Errorf("sumAutovacuumCPU = %v, want 2.0 (0.25+0.05+1.50+0.20)", got)
	}
}
