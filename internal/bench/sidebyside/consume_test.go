package sidebyside

import (
	"testing"
	"time"

	"github.com/queengate/queengate/internal/bench"
)

// TestACutRoundIsExactSoFar: a round cut short by --consume-round-time
// passes with fewer messages than stored, marked cut, but never with a
// message delivered twice; a round not cut must deliver every message to
// every group.
func TestACutRoundIsExactSoFar(t *testing.T) {
	t.Parallel()
	w := bench.Workload{Total: 3}
	ex := newExactly(w, 2)
	for _, id := range []string{"a", "b", "c"} {
		ex.add(0, id)
	}
	ex.add(1, "a")
	if r, err := ex.check("queengate", w, 2, time.Second, 0, true); err != nil || !r.Cut || r.Messages != 4 {
		t.Errorf("cut after 4 of 6 deliveries: %+v, %v; want it cut, counted and passed", r, err)
	}
	if _, err := ex.check("queengate", w, 2, time.Second, 0, false); err == nil {
		t.Errorf("4 of 6 deliveries, not cut: passed, want it failed")
	}
	ex.add(1, "a")
	if _, err := ex.check("queengate", w, 2, time.Second, 0, true); err == nil {
		t.Errorf("a message delivered twice to a group in a cut round: passed, want it failed")
	}
}
