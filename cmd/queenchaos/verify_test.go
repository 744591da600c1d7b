package main

import (
	"context"
	"fmt"
	"testing"

	"github.com/queengate/queengate/internal/pgtest"
	"github.com/queengate/queengate/model"
	"github.com/queengate/queengate/pgstore"
)

func TestMain(m *testing.M) { pgtest.Run(m) }

// logFixture is a queue written through the real store: partition p
// holds a, b, c (one push) then d, e (another); every message was
// answered queued, and a was also answered duplicate by a retry.
type logFixture struct {
	url     string
	store   *pgstore.Store
	pid     int64
	sent    []Sent
	answers []Answer
}

const fixtureQueue = "chaos-verify"

func newLogFixture(t *testing.T) *logFixture {
	t.Helper()
	f := &logFixture{url: pgtest.NewDB(t)}
	f.store = pgtest.Store(t, f.url)
	p, err := f.store.EnsurePartition(context.Background(), fixtureQueue, "p")
	if err != nil {
		t.Fatal(err)
	}
	f.pid = p.ID
	for _, ids := range [][]string{{"a", "b", "c"}, {"d", "e"}} {
		res := f.push(t, ids...)
		for k, id := range ids {
			off := res.BaseOffset + int64(k)
			f.sent = append(f.sent, Sent{Partition: "p", ID: id, Data: dataOf(id)})
			f.answers = append(f.answers, Answer{Partition: "p", ID: id, Status: "queued", Offset: off, MessageID: model.MessageID(f.pid, off)})
		}
	}
	f.answers = append(f.answers, Answer{Partition: "p", ID: "a", Status: "duplicate", Offset: 0, MessageID: model.MessageID(f.pid, 0)})
	return f
}

func dataOf(id string) string { return fmt.Sprintf(`{"id": %q}`, id) }

func (f *logFixture) push(t *testing.T, ids ...string) model.FrameResult {
	t.Helper()
	fr := model.Frame{PartitionID: f.pid, Verified: -1}
	for _, id := range ids {
		fr.TxnIDs = append(fr.TxnIDs, id)
		fr.Hashes = append(fr.Hashes, model.HashTxnID(id))
		fr.Data = append(fr.Data, []byte(dataOf(id)))
	}
	res, err := f.store.Push(context.Background(), []model.Frame{fr})
	if err != nil {
		t.Fatal(err)
	}
	return res[0]
}

func (f *logFixture) exec(t *testing.T, sql string, args ...any) {
	t.Helper()
	if _, err := f.store.Pool().Exec(context.Background(), sql, args...); err != nil {
		t.Fatal(err)
	}
}

// TestVerifierCatchesEachPlantedFault plants each fault the verifier
// exists for, in the log or in the answers, and expects it found — and
// nothing else.
func TestVerifierCatchesEachPlantedFault(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name  string
		plant func(t *testing.T, f *logFixture)
		want  func(Findings) int64
		count int64
	}{
		{"nothing planted", func(*testing.T, *logFixture) {}, Findings.Violations, 0},
		{"lost", func(t *testing.T, f *logFixture) {
			f.exec(t, "DELETE FROM queen.log_segments WHERE partition_id = $1 AND base_offset = 3", f.pid)
		}, func(x Findings) int64 { return x.Lost }, 2},
		{"doubled", func(t *testing.T, f *logFixture) {
			f.exec(t, "UPDATE queen.queues SET dedup_window_seconds = 0 WHERE name = $1", fixtureQueue)
			f.push(t, "b")
		}, func(x Findings) int64 { return x.Doubled }, 1},
		{"wrong offset", func(_ *testing.T, f *logFixture) {
			f.answers[1].Offset = 2
			f.answers[1].MessageID = model.MessageID(f.pid, 2)
		}, func(x Findings) int64 { return x.WrongOffset }, 1},
		{"wrong message id", func(_ *testing.T, f *logFixture) {
			f.answers[2].MessageID = model.MessageID(f.pid+1, f.answers[2].Offset)
		}, func(x Findings) int64 { return x.WrongOffset }, 1},
		{"duplicate not naming the first", func(_ *testing.T, f *logFixture) {
			last := &f.answers[len(f.answers)-1]
			last.Offset, last.MessageID = 1, model.MessageID(f.pid, 1)
		}, func(x Findings) int64 { return x.DuplicateNotFirst }, 1},
		{"data mismatch", func(t *testing.T, f *logFixture) {
			f.exec(t, `UPDATE queen.log_segments SET data[2] = '{"id": "tampered"}' WHERE partition_id = $1 AND base_offset = 0`, f.pid)
		}, func(x Findings) int64 { return x.DataMismatch }, 1},
		{"phantom", func(t *testing.T, f *logFixture) {
			f.push(t, "never-sent")
		}, func(x Findings) int64 { return x.Phantom }, 1},
		{"phantom in a partition nobody sent to", func(t *testing.T, f *logFixture) {
			other, err := f.store.EnsurePartition(context.Background(), fixtureQueue, "other")
			if err != nil {
				t.Fatal(err)
			}
			f.pid = other.ID
			f.push(t, "a")
		}, func(x Findings) int64 { return x.Phantom }, 1},
		{"hole", func(t *testing.T, f *logFixture) {
			f.exec(t, "UPDATE queen.log_segments SET base_offset = base_offset + 1, end_offset = end_offset + 1 WHERE partition_id = $1 AND base_offset = 3", f.pid)
		}, func(x Findings) int64 { return x.Holes }, 1},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			f := newLogFixture(t)
			c.plant(t, f)
			got, err := Verify(context.Background(), f.url, fixtureQueue, Recorded{f.sent, f.answers}, nil)
			if err != nil {
				t.Fatal(err)
			}
			if n := c.want(got); n != c.count {
				t.Errorf("found %d, want %d: %+v", n, c.count, got)
			}
			// The hole also moves where d and e are: their answers no
			// longer name it. Every other plant is found alone.
			if c.name != "hole" && got.Violations() != c.count {
				t.Errorf("%d violations in all, want only the %d planted: %+v", got.Violations(), c.count, got)
			}
			if got.Sent != 5 || got.Answered != 5 {
				t.Errorf("sent %d, answered %d; want 5 and 5", got.Sent, got.Answered)
			}
		})
	}
}
