package pgstore_test

import (
	"context"
	"testing"

	"github.com/queengate/queengate/model"
)

func (b *testBundle) setOnConflict(t *testing.T, mode model.ConflictMode) {
	t.Helper()
	if _, err := b.store.Pool().Exec(context.Background(),
		"UPDATE queen.queues SET on_conflict = $1 WHERE name = $2", string(mode), b.queue); err != nil {
		t.Fatal(err)
	}
}

// withData gives a frame these data and their hashes.
func withData(fr model.Frame, data ...string) model.Frame {
	fr.Data = nil
	for _, d := range data {
		fr.Data = append(fr.Data, []byte(d))
	}
	fr.DataHashes = model.HashEachData(fr.Data, nil)
	return fr
}

// storedDataHashes reads the data hashes of each frame of the partition,
// in offset order (nil for a NULL).
func (b *testBundle) storedDataHashes(t *testing.T) [][]model.Hash {
	t.Helper()
	rows, err := b.store.Pool().Query(context.Background(),
		"SELECT data_hashes FROM queen.log_partitions p, queen.log_hashes(p.id, -1, p.txns_start, p.txns_end) WHERE p.id = $1 ORDER BY end_offset",
		b.part.ID)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var out [][]model.Hash
	for rows.Next() {
		var h []model.Hash
		if err := rows.Scan(&h); err != nil {
			t.Fatal(err)
		}
		out = append(out, h)
	}
	return out
}

func (b *testBundle) originals(t *testing.T, offsets ...int64) map[int64]model.Hash {
	t.Helper()
	got, err := b.store.Originals(context.Background(), b.part.ID, offsets)
	if err != nil {
		t.Fatal(err)
	}
	return got
}

func TestEnsurePartitionAndPushReadTheConflictMode(t *testing.T) {
	t.Parallel()
	b := setup(t)
	if b.part.OnConflict != model.ConflictIgnore {
		t.Fatalf("a new queue's mode is %q, want ignore", b.part.OnConflict)
	}
	b.setOnConflict(t, model.ConflictReject)
	p, err := b.store.EnsurePartition(context.Background(), b.queue, "Default")
	if err != nil || p.OnConflict != model.ConflictReject {
		t.Fatalf("EnsurePartition after the change: %+v, %v", p, err)
	}
	if got := b.push(t, -1, "a"); got.OnConflict != model.ConflictReject {
		t.Fatalf("push reports mode %q, want reject", got.OnConflict)
	}
}

// A queue that compares payloads stores each written message's data hash
// beside its transactionId's, in offset order, also when a frame has
// duplicates and repeats; a queue that ignores conflicts stores none,
// even when a frame carries them.
func TestDataHashesAreStoredOnlyForQueuesThatCompare(t *testing.T) {
	t.Parallel()
	ignoring, comparing := setup(t), setup(t)
	comparing.setOnConflict(t, model.ConflictFlag)
	ctx := context.Background()

	_, err := ignoring.store.Push(ctx, []model.Frame{withData(newFrame(ignoring.part.ID, -1, "a", "b"), `1`, `2`)})
	if err != nil {
		t.Fatal(err)
	}
	if got := ignoring.storedDataHashes(t); len(got) != 1 || got[0] != nil {
		t.Fatalf("ignore stored data hashes %v, want one NULL row", got)
	}

	// A clean frame, then a dirty one: "a" is stored, "c" repeats within it.
	if _, err := comparing.store.Push(ctx, []model.Frame{withData(newFrame(comparing.part.ID, -1, "a", "b"), `1`, `2`)}); err != nil {
		t.Fatal(err)
	}
	res, err := comparing.store.Push(ctx, []model.Frame{
		withData(newFrame(comparing.part.ID, -1, "c", "a", "d", "c"), `"c"`, `"A"`, `"d"`, `"c2"`)})
	if err != nil {
		t.Fatal(err)
	}
	wantOutcomes(t, res[0], queued(2), dup(0), queued(3), dup(2))
	h := func(d []byte) model.Hash { return model.HashData(d, nil) }
	want := [][]model.Hash{{h([]byte(`1`)), h([]byte(`2`))}, {h([]byte(`"c"`)), h([]byte(`"d"`))}}
	got := comparing.storedDataHashes(t)
	if len(got) != len(want) || len(got[0]) != 2 || got[0][0] != want[0][0] || got[0][1] != want[0][1] ||
		len(got[1]) != 2 || got[1][0] != want[1][0] || got[1][1] != want[1][1] {
		t.Fatalf("stored data hashes %x, want %x", got, want)
	}
	if o := comparing.originals(t, 0, 3); o[0] != h([]byte(`1`)) || o[3] != h([]byte(`"d"`)) {
		t.Fatalf("originals %x", o)
	}
}

// Originals answers from the stored data where no hash was stored (rows
// written while the queue ignored conflicts), and leaves out offsets
// whose message does not exist.
func TestOriginalsFallBackToTheStoredData(t *testing.T) {
	t.Parallel()
	b := setup(t)
	data := `{"amount": 10,  "currency":"EUR"}` // spaces kept: json is stored as sent
	if _, err := b.store.Push(context.Background(), []model.Frame{withData(newFrame(b.part.ID, -1, "a"), data)}); err != nil {
		t.Fatal(err)
	}
	b.setOnConflict(t, model.ConflictFlag)
	got := b.originals(t, 0, 1, 99)
	if len(got) != 1 || got[0] != model.HashData([]byte(data), nil) {
		t.Fatalf("originals %x, want only offset 0 with the hash of the data as sent", got)
	}
}

// A bundle mixing a comparing queue's frame with an ignoring one's keeps
// each frame's data hashes with its own messages.
func TestMixedBundleKeepsEachFramesDataHashes(t *testing.T) {
	t.Parallel()
	ignoring, comparing := setup(t), setup(t)
	comparing.setOnConflict(t, model.ConflictReject)
	plain := newFrame(ignoring.part.ID, -1, "x", "y", "z")
	res, err := comparing.store.Push(context.Background(), []model.Frame{
		plain, withData(newFrame(comparing.part.ID, -1, "p", "q"), `"P"`, `"Q"`)})
	if err != nil {
		t.Fatal(err)
	}
	if res[0].OnConflict != model.ConflictIgnore || res[1].OnConflict != model.ConflictReject {
		t.Fatalf("modes %q and %q", res[0].OnConflict, res[1].OnConflict)
	}
	if got := comparing.originals(t, 0, 1); got[0] != model.HashData([]byte(`"P"`), nil) || got[1] != model.HashData([]byte(`"Q"`), nil) {
		t.Fatalf("originals of the comparing frame %x", got)
	}
	if got := ignoring.storedDataHashes(t); len(got) != 1 || got[0] != nil {
		t.Fatalf("the ignoring frame stored %x", got)
	}
}

func TestFramesWithMisalignedDataHashesAreRejected(t *testing.T) {
	t.Parallel()
	b := setup(t)
	fr := withData(newFrame(b.part.ID, -1, "a", "b"), `1`, `2`)
	fr.DataHashes = fr.DataHashes[:1]
	if _, err := b.store.Push(context.Background(), []model.Frame{fr}); err == nil {
		t.Fatal("a frame with 2 messages and 1 data hash was pushed")
	}
	if n := b.count(t, "log_segments"); n != 0 {
		t.Fatalf("%d frames stored", n)
	}
}

// A partition named twice in a bundle is pushed frame by frame; each
// keeps its own data hashes.
func TestPartitionTwiceInABundleKeepsEachFramesDataHashes(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.setOnConflict(t, model.ConflictFlag)
	res, err := b.store.Push(context.Background(), []model.Frame{
		withData(newFrame(b.part.ID, -1, "a"), `"A"`), withData(newFrame(b.part.ID, -1, "b", "a"), `"B"`, `"A2"`)})
	if err != nil {
		t.Fatal(err)
	}
	wantOutcomes(t, res[1], queued(1), dup(0))
	if got := b.originals(t, 0, 1); got[0] != model.HashData([]byte(`"A"`), nil) || got[1] != model.HashData([]byte(`"B"`), nil) {
		t.Fatalf("originals %x", got)
	}
}
