package pgstore_test

import (
	"bytes"
	"context"
	"testing"

	"github.com/queengate/queengate/model"
)

// TestMetaIsStoredWithEachMessage: a frame's meta is read back beside
// each message, whether each message has its own, some have none, or all
// share one (sent once); a repeat within a frame writes nothing and the
// messages after it keep theirs; a frame without meta stores none.
func TestMetaIsStoredWithEachMessage(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.setWindow(t, 3600)
	ctx := context.Background()
	meta := func(v string) []byte {
		return model.AppendMeta(nil, []model.Header{{Name: "traceparent", Values: []string{v}}}, false)
	}
	own := newFrame(b.part.ID, -1, "a", "b", "c")
	own.Meta = [][]byte{meta("1"), nil, meta("3")}
	shared := newFrame(b.part.ID, -1, "d", "e", "d", "f") // d repeated: the dirty path
	one := meta("shared")
	shared.Meta = [][]byte{one, one, one, one}
	plain := newFrame(b.part.ID, -1, "g")
	for _, fr := range []model.Frame{own, shared, plain} {
		if _, err := b.store.Push(ctx, []model.Frame{fr}); err != nil {
			t.Fatal(err)
		}
	}
	res, err := b.store.Read(ctx, model.ReadQuery{Queue: b.queue, Partition: "Default", Max: 100, MaxBytes: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string][]byte{"a": meta("1"), "b": nil, "c": meta("3"), "d": one, "e": one, "f": one, "g": nil}
	if len(res.Messages) != len(want) {
		t.Fatalf("%d messages read, want %d", len(res.Messages), len(want))
	}
	for _, m := range res.Messages {
		if !bytes.Equal(m.Meta, want[m.TxnID]) {
			t.Errorf("%s@%d: meta %s, want %s", m.TxnID, m.Offset, m.Meta, want[m.TxnID])
		}
	}
	var withMeta int
	if err := b.store.Pool().QueryRow(ctx, "SELECT count(*) FROM queen.log_segments WHERE partition_id = $1 AND meta IS NOT NULL",
		b.part.ID).Scan(&withMeta); err != nil || withMeta != 2 {
		t.Errorf("%d frames store meta, %v; want 2 (not the frame without any)", withMeta, err)
	}
}
