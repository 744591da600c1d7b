package consume

import (
	"slices"
	"testing"
	"time"

	"github.com/queengate/queengate/model"
)

// What a gateway noted is taken once, in group order: each group's
// latest activity, as long ago as it was; a group with a long poll
// waiting is active now, and noted when the poll ends. A failed write
// puts its notes back unless something later was noted meanwhile.
func TestActivityIsTakenOnceAndAWaitingPollIsActiveNow(t *testing.T) {
	t.Parallel()
	a := newActivity()
	a.note(7)
	end := a.wait(3)
	endToo := a.wait(3)
	now := time.Now()
	got := a.take(now)
	if len(got) != 2 || got[0] != (model.GroupNoted{GroupID: 3}) || got[1].GroupID != 7 || got[1].Ago < 0 || got[1].Ago > time.Minute {
		t.Fatalf("take: %+v; want group 3 active now (its poll waits), then 7", got)
	}
	if again := a.take(time.Now()); !slices.Equal(again, []model.GroupNoted{{GroupID: 3}}) {
		t.Fatalf("take again: %+v; want only group 3, still waiting", again)
	}
	end()
	if w := a.take(time.Now()); len(w) != 1 || w[0].GroupID != 3 || w[0].Ago < 0 {
		t.Fatalf("one of two polls ended: %+v; want group 3", w)
	}
	endToo()
	a.take(time.Now())
	if w := a.take(time.Now()); len(w) != 0 {
		t.Fatalf("both polls ended and taken: %+v; want nothing", w)
	}
	a.putBack([]model.GroupNoted{{GroupID: 5, Ago: time.Second}}, now)
	a.note(7)
	a.putBack([]model.GroupNoted{{GroupID: 7, Ago: time.Hour}}, now)
	back := a.take(now)
	if len(back) != 2 || back[0] != (model.GroupNoted{GroupID: 5, Ago: time.Second}) || back[1].GroupID != 7 || back[1].Ago >= time.Hour {
		t.Fatalf("after put back: %+v; want 5 a second before, 7 as noted since", back)
	}
}
