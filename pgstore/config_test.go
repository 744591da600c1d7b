package pgstore_test

import (
	"context"
	"errors"
	"reflect"
	"testing"

	"github.com/queengate/queengate/internal/pgtest"
	"github.com/queengate/queengate/model"
)

func ptr(v int) *int { return &v }

func TestConfigureMergeReplaceAndCreate(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := pgtest.Store(t, pgtest.SharedURL(t))
	queue := pgtest.UniqueName(t)

	// A create starts from the defaults, in either mode.
	c, created, err := st.Configure(ctx, queue, model.OptionsPatch{RetentionSeconds: ptr(86400)}, false)
	if err != nil || !created {
		t.Fatalf("create: %+v created=%v err=%v", c, created, err)
	}
	if c.DedupWindowSeconds != 3600 || c.RetentionSeconds != 86400 {
		t.Errorf("created with %+v, want window 3600 (default) and retention 86400", c.Options)
	}

	// Deliberately off, then a merge naming only retention: the window
	// stays off (the 1.6.0 edge).
	if c, _, err = st.Configure(ctx, queue, model.OptionsPatch{DedupWindowSeconds: ptr(0)}, false); err != nil || c.DedupWindowSeconds != 0 {
		t.Fatalf("window off: %+v, %v", c, err)
	}
	c, created, err = st.Configure(ctx, queue, model.OptionsPatch{RetentionSeconds: ptr(60)}, false)
	if err != nil || created {
		t.Fatalf("merge: created=%v err=%v", created, err)
	}
	if c.DedupWindowSeconds != 0 || c.RetentionSeconds != 60 {
		t.Errorf("after merge %+v, want window 0 kept and retention 60", c.Options)
	}

	// Replace: what it omits returns to its default.
	c, _, err = st.Configure(ctx, queue, model.OptionsPatch{RetentionSeconds: ptr(120)}, true)
	if err != nil || c.DedupWindowSeconds != 3600 || c.RetentionSeconds != 120 {
		t.Errorf("after replace %+v, %v; want window back to 3600, retention 120", c.Options, err)
	}
	read, err := st.QueueConfig(ctx, queue)
	if err != nil || !reflect.DeepEqual(read.Options, c.Options) || !read.UpdatedAt.Equal(c.UpdatedAt) {
		t.Errorf("read back %+v, %v; configure answered %+v", read, err, c)
	}

	// Nothing changed: updated_at stays.
	same, _, err := st.Configure(ctx, queue, model.OptionsPatch{DedupWindowSeconds: ptr(3600)}, false)
	if err != nil || !same.UpdatedAt.Equal(c.UpdatedAt) {
		t.Errorf("no-op configure moved updated_at %v -> %v (%v)", c.UpdatedAt, same.UpdatedAt, err)
	}
}

func TestConfigureRejectsOutOfRangeAndChangesNothing(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := pgtest.Store(t, pgtest.SharedURL(t))
	queue := pgtest.UniqueName(t)
	if _, _, err := st.Configure(ctx, queue, model.OptionsPatch{DedupWindowSeconds: ptr(600)}, false); err != nil {
		t.Fatal(err)
	}
	for _, p := range []model.OptionsPatch{
		{DedupWindowSeconds: ptr(-1)},
		{RetentionSeconds: ptr(-5), DedupWindowSeconds: ptr(10)},
		{DedupWindowSeconds: ptr(model.MaxOptionSeconds + 1)},
	} {
		if _, _, err := st.Configure(ctx, queue, p, false); !errors.Is(err, model.ErrInvalidOption) {
			t.Errorf("patch %+v: err = %v, want ErrInvalidOption", p, err)
		}
	}
	if c, err := st.QueueConfig(ctx, queue); err != nil || c.DedupWindowSeconds != 600 || c.RetentionSeconds != 0 {
		t.Errorf("after refused patches: %+v, %v; want unchanged", c, err)
	}
	missing := pgtest.UniqueName(t) + "-never"
	if _, _, err := st.Configure(ctx, missing, model.OptionsPatch{DedupWindowSeconds: ptr(-1)}, false); err == nil {
		t.Error("a refused create succeeded")
	}
	if _, err := st.QueueConfig(ctx, missing); !errors.Is(err, model.ErrQueueNotFound) {
		t.Errorf("refused create left a queue behind: %v", err)
	}
}

func TestQueuesAndPartitionsList(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := pgtest.Store(t, pgtest.SharedURL(t))
	queue := pgtest.UniqueName(t)
	for _, p := range []string{"b", "a"} {
		if _, err := st.EnsurePartition(ctx, queue, p); err != nil {
			t.Fatal(err)
		}
	}
	qs, err := st.Queues(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var found *model.QueueConfig
	for i := range qs {
		if i > 0 && qs[i-1].Name >= qs[i].Name {
			t.Errorf("queues not sorted by name: %q before %q", qs[i-1].Name, qs[i].Name)
		}
		if qs[i].Name == queue {
			found = &qs[i]
		}
	}
	if found == nil {
		t.Fatalf("queue %s not listed", queue)
	}
	parts, err := st.Partitions(ctx, found.ID)
	if err != nil || len(parts) != 2 || parts[0].Name != "a" || parts[1].Name != "b" || parts[0].LastOffset != -1 {
		t.Errorf("partitions %+v, %v; want a and b, empty", parts, err)
	}
}

// TestVouchUnderSmallerWindowIsNotTrusted: a watermark vouched under a
// window smaller than the queue's current one probes anyway, so a grown
// window takes effect in SQL at once whatever a cache believes.
func TestVouchUnderSmallerWindowIsNotTrusted(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.setWindow(t, 60)
	b.push(t, -1, "old-but-in-new-window") // 0
	b.push(t, -1, "x")                     // 1
	b.setWindow(t, 3600)
	fr := newFrame(b.part.ID, 1, "old-but-in-new-window")
	fr.VerifiedWindow = 60
	res, err := b.store.Push(context.Background(), []model.Frame{fr})
	if err != nil {
		t.Fatal(err)
	}
	if !res[0].Probed() {
		t.Error("probe skipped on a watermark vouched under a smaller window")
	}
	wantOutcomes(t, res[0], dup(0))

	// Vouched under the current window (or a larger one): trusted.
	fr = newFrame(b.part.ID, 1, "y")
	fr.VerifiedWindow = 3600
	res, err = b.store.Push(context.Background(), []model.Frame{fr, newFrame(b.part.ID, 2, "z")})
	if err != nil {
		t.Fatal(err)
	}
	if res[0].Probed() {
		t.Error("probe ran on a watermark vouched under the current window")
	}
}

// The retry options are stored, kept by a merge that omits them, reset
// by a replace, and refused out of range with nothing changed.
func TestConfigureRetryOptions(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := pgtest.Store(t, pgtest.SharedURL(t))
	queue := pgtest.UniqueName(t)
	backoff := []int{1000, 5000, 30000}
	c, _, err := st.Configure(ctx, queue, model.OptionsPatch{RetryDelayMs: ptr(250), RetryBackoffMs: &backoff}, false)
	if err != nil || c.RetryDelayMs != 250 || !reflect.DeepEqual(c.RetryBackoffMs, backoff) {
		t.Fatalf("set: %+v, %v", c.Options, err)
	}
	if c, _, err = st.Configure(ctx, queue, model.OptionsPatch{MaxAttempts: ptr(2)}, false); err != nil ||
		c.RetryDelayMs != 250 || !reflect.DeepEqual(c.RetryBackoffMs, backoff) {
		t.Fatalf("a merge naming neither: %+v, %v", c.Options, err)
	}
	tooMany := make([]int, model.MaxRetryBackoff+1)
	for _, p := range []model.OptionsPatch{
		{RetryDelayMs: ptr(model.MaxRetryDelayMs + 1)},
		{RetryBackoffMs: &[]int{1000, -1}},
		{RetryBackoffMs: &[]int{model.MaxRetryDelayMs + 1}},
		{RetryBackoffMs: &tooMany},
	} {
		if _, _, err := st.Configure(ctx, queue, p, false); !errors.Is(err, model.ErrInvalidOption) {
			t.Errorf("patch %+v: err = %v, want ErrInvalidOption", p, err)
		}
	}
	if read, err := st.QueueConfig(ctx, queue); err != nil || read.RetryDelayMs != 250 || !reflect.DeepEqual(read.RetryBackoffMs, backoff) {
		t.Errorf("after refused patches: %+v, %v; want unchanged", read.Options, err)
	}
	if c, _, err = st.Configure(ctx, queue, model.OptionsPatch{}, true); err != nil || c.RetryDelayMs != 0 || c.RetryBackoffMs == nil || len(c.RetryBackoffMs) != 0 {
		t.Errorf("a replace naming neither: %+v, %v; want both back to their defaults", c.Options, err)
	}
}
