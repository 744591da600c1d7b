package pgstore_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/queengate/queengate/internal/pgtest"
	"github.com/queengate/queengate/model"
	"github.com/queengate/queengate/pgstore"
)

// pushN writes n messages to queue/partition in frames of frame
// messages, ids m-0, m-1, …, data {"i": k}.
func pushN(t testing.TB, s *pgstore.Store, queue, partition string, n, frame int) model.Partition {
	t.Helper()
	return pushFrames(t, s, queue, partition, n, frame, func(k int) []byte { return fmt.Appendf(nil, `{"i": %d}`, k) })
}

// pushFrames is pushN with the data of message k given by data.
func pushFrames(t testing.TB, s *pgstore.Store, queue, partition string, n, frame int, data func(k int) []byte) model.Partition {
	t.Helper()
	p, err := s.EnsurePartition(context.Background(), queue, partition)
	if err != nil {
		t.Fatal(err)
	}
	for start := 0; start < n; start += frame {
		fr := model.Frame{PartitionID: p.ID, Verified: -1}
		for k := start; k < min(start+frame, n); k++ {
			id := fmt.Sprint("m-", k)
			fr.TxnIDs = append(fr.TxnIDs, id)
			fr.Hashes = append(fr.Hashes, model.HashTxnID(id))
			fr.Data = append(fr.Data, data(k))
		}
		if _, err := s.Push(context.Background(), []model.Frame{fr}); err != nil {
			t.Fatal(err)
		}
	}
	return p
}

func TestReadAcrossFramesToTheEnd(t *testing.T) {
	t.Parallel()
	s := pgtest.Store(t, pgtest.NewDB(t))
	pushN(t, s, "r", "p", 25, 10) // frames 0-9, 10-19, 20-24
	ctx := context.Background()
	var got []model.LogMessage
	next := int64(3)
	for {
		res, err := s.Read(ctx, model.ReadQuery{Queue: "r", Partition: "p", From: next, Max: 7, MaxBytes: 1 << 20})
		if err != nil {
			t.Fatal(err)
		}
		if res.FirstOffset != 0 || res.LastOffset != 24 {
			t.Errorf("first %d, last %d; want 0 and 24", res.FirstOffset, res.LastOffset)
		}
		if len(res.Messages) == 0 {
			if res.Next != 25 {
				t.Errorf("at the end, next = %d, want 25", res.Next)
			}
			break
		}
		got = append(got, res.Messages...)
		next = res.Next
	}
	if len(got) != 22 {
		t.Fatalf("read %d messages from offset 3, want 22", len(got))
	}
	for k, m := range got {
		off := int64(k + 3)
		if m.Offset != off || m.TxnID != fmt.Sprint("m-", off) || string(m.Data) != fmt.Sprintf(`{"i": %d}`, off) {
			t.Fatalf("message %d: %+v, want offset %d with its id and data as pushed", k, m, off)
		}
	}
}

func TestReadBoundsAndBelowTheRetainedStart(t *testing.T) {
	t.Parallel()
	s := pgtest.Store(t, pgtest.NewDB(t))
	p := pushN(t, s, "r", "p", 30, 10)
	ctx := context.Background()
	res, err := s.Read(ctx, model.ReadQuery{Queue: "r", Partition: "p", From: 0, Max: 100, MaxBytes: 1})
	if err != nil || len(res.Messages) != 1 || res.Next != 1 {
		t.Errorf("maxBytes 1: %d messages, next %d, %v; want exactly one", len(res.Messages), res.Next, err)
	}
	// Retention removes the first frame.
	if _, err := s.Pool().Exec(ctx, "DELETE FROM queen.log_segments WHERE partition_id = $1 AND base_offset = 0", p.ID); err != nil {
		t.Fatal(err)
	}
	res, err = s.Read(ctx, model.ReadQuery{Queue: "r", Partition: "p", From: 2, Max: 3, MaxBytes: 1 << 20})
	if err != nil || res.FirstOffset != 10 || len(res.Messages) != 3 || res.Messages[0].Offset != 10 {
		t.Errorf("a read below the retained start: %+v, %v; want it to start at 10 and say so", res, err)
	}
	_, err = s.Read(ctx, model.ReadQuery{Queue: "r", Partition: "ghost", From: 0, Max: 1, MaxBytes: 1})
	if !errors.Is(err, model.ErrNotFound) {
		t.Errorf("an unknown partition: %v, want not found", err)
	}
}

func TestMessageAtAndFindTxn(t *testing.T) {
	t.Parallel()
	s := pgtest.Store(t, pgtest.NewDB(t))
	p := pushN(t, s, "r", "p", 15, 10)
	ctx := context.Background()
	m, q, part, err := s.MessageAt(ctx, p.ID, 12)
	if err != nil || q != "r" || part != "p" || m.TxnID != "m-12" || string(m.Data) != `{"i": 12}` {
		t.Errorf("message at 12: %+v in %s/%s, %v", m, q, part, err)
	}
	if _, _, _, err := s.MessageAt(ctx, p.ID, 15); !errors.Is(err, model.ErrNotFound) {
		t.Errorf("past the end: %v, want not found", err)
	}
	l, err := s.FindTxn(ctx, "r", "p", "m-7")
	if err != nil || !l.Found || l.Offset != 7 || !l.Retained || l.WindowSeconds != 3600 || l.CreatedAt.IsZero() || l.DBNow.Before(l.CreatedAt) {
		t.Errorf("m-7: %+v, %v; want found at 7 within the window", l, err)
	}
	if l, err := s.FindTxn(ctx, "r", "p", "never"); err != nil || l.Found {
		t.Errorf("an id never pushed: %+v, %v; want not found", l, err)
	}
	// Outside the window: the id no longer counts, though stored.
	pgtest.AgeFrames(t, s.Pool(), 2*time.Hour, "partition_id = $1", p.ID)
	if l, err := s.FindTxn(ctx, "r", "p", "m-7"); err != nil || l.Found {
		t.Errorf("m-7 outside the window: %+v, %v; want not found", l, err)
	}
}
