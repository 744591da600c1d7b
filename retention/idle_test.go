package retention_test

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/queengate/queengate/internal/pgtest"
	"github.com/queengate/queengate/model"
	"github.com/queengate/queengate/retention"
)

// TestAGroupIdlePastGroupIdleSecondsIsLoggedOnce: the pass that first
// finds a group idle past its queue's groupIdleSeconds logs it, naming the
// queue and the group; the passes after say nothing more of it.
func TestAGroupIdlePastGroupIdleSecondsIsLoggedOnce(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	store := pgtest.Store(t, pgtest.NewDB(t))
	queue := pgtest.UniqueName(t)
	idle := 60
	if _, _, err := store.Configure(ctx, queue, model.OptionsPatch{GroupIdleSeconds: &idle}, false); err != nil {
		t.Fatal(err)
	}
	if _, err := store.EnsurePartition(ctx, queue, "p"); err != nil {
		t.Fatal(err)
	}
	g, err := store.EnsureGroup(ctx, queue, "sleepy")
	if err != nil {
		t.Fatal(err)
	}
	var logs bytes.Buffer
	r, err := retention.NewRunner(store, time.Hour, model.DefaultRetainOptions(), zerolog.New(&logs), nil)
	if err != nil {
		t.Fatal(err)
	}
	const line = "retention no longer waits for it"
	r.Pass(ctx)
	if strings.Contains(logs.String(), line) {
		t.Fatalf("a group created now is logged idle:\n%s", logs.String())
	}
	if _, err := store.Pool().Exec(ctx, "UPDATE queen.consumer_groups SET created_at = now() - interval '2 minutes' WHERE id = $1", g.ID); err != nil {
		t.Fatal(err)
	}
	for range 3 {
		r.Pass(ctx)
	}
	if n := strings.Count(logs.String(), line); n != 1 || !strings.Contains(logs.String(), `"group":"sleepy"`) ||
		!strings.Contains(logs.String(), `"queue":"`+queue+`"`) {
		t.Fatalf("three passes over a group idle 2 minutes of 1 allowed logged it %d times:\n%s", n, logs.String())
	}
}
