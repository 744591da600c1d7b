package pgwire_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"reflect"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/queengate/queengate/internal/pgtest"
	"github.com/queengate/queengate/model"
	"github.com/queengate/queengate/pgstore/internal/pgwire"
)

// collectWithPgx reads PushBundleSQL's rows with pgx's scanning, as the
// push read them before it read the protocol's rows itself: the model
// Run's reading is held to.
func collectWithPgx(rows pgx.Rows, frames []model.Frame) ([]model.FrameResult, error) {
	defer rows.Close()
	results := make([]model.FrameResult, len(frames))
	for rows.Next() {
		var (
			frame          int32
			base           *int64
			last, unrolled int64
			probe, mode    string
			dupIdx         []int32
			dupOff         []int64
			created        time.Time
		)
		if err := rows.Scan(&frame, &base, &last, &probe, &unrolled, &dupIdx, &dupOff, &mode, &created); err != nil {
			return nil, err
		}
		i := int(frame) - 1
		p, _ := model.ParseProbe(probe)
		r := model.FrameResult{PartitionID: frames[i].PartitionID, BaseOffset: -1, LastOffset: last, Probe: p,
			Unrolled: unrolled, Outcomes: make([]model.Outcome, len(frames[i].Hashes)), OnConflict: model.ConflictMode(mode), CreatedAt: created}
		for k, idx := range dupIdx {
			r.Outcomes[idx-1] = model.Outcome{Offset: dupOff[k], Duplicate: true}
		}
		if base != nil {
			r.BaseOffset = *base
			next := *base
			for j := range r.Outcomes {
				if !r.Outcomes[j].Duplicate {
					r.Outcomes[j].Offset, next = next, next+1
				}
			}
		}
		results[i] = r
	}
	return results, rows.Err()
}

// TestBundleResultsReadAsPgxScansThem: a bundle's answer (new messages,
// duplicates of stored ones and of each other, full, narrowed and
// skipped probes, several partitions) reads through Run as pgx's
// scanning reads the same push's answer. Each push runs in a
// transaction rolled back, so both meet the same log; only created_at,
// the clock's, differs.
func TestBundleResultsReadAsPgxScansThem(t *testing.T) {
	ctx := context.Background()
	st := pgtest.Store(t, pgtest.NewDB(t))
	var parts []model.Partition
	stored := map[int64][]string{} // transactionIds stored per partition, at their offsets
	for i := range 3 {
		p, err := st.EnsurePartition(ctx, "results", fmt.Sprint("p", i))
		if err != nil {
			t.Fatal(err)
		}
		parts = append(parts, p)
		fr := frameOf(p.ID, -1, fmt.Sprint("stored-", i, "-a"), fmt.Sprint("stored-", i, "-b"), fmt.Sprint("stored-", i, "-c"))
		if _, err := st.Push(ctx, []model.Frame{fr}); err != nil {
			t.Fatal(err)
		}
		stored[p.ID] = fr.TxnIDs
	}
	r := rand.New(rand.NewPCG(35, 3))
	for round := range 100 {
		var frames []model.Frame
		for _, p := range parts {
			if r.IntN(4) == 0 && len(frames) > 0 {
				continue
			}
			frames = append(frames, randomPush(r, p.ID, stored[p.ID], round))
		}
		ours := pushRolledBack(t, st.Pool(), func(tx pgx.Tx) ([]model.FrameResult, error) {
			return pgwire.PushBundle(ctx, tx.Conn(), frames)
		})
		want := pushRolledBack(t, st.Pool(), func(tx pgx.Tx) ([]model.FrameResult, error) {
			rows, err := tx.Query(ctx, pgwire.PushBundleSQL, pgxBundleArgs(frames)...)
			if err != nil {
				return nil, err
			}
			return collectWithPgx(rows, frames)
		})
		for i := range ours {
			if ours[i].CreatedAt.IsZero() || ours[i].CreatedAt.Location() != want[i].CreatedAt.Location() {
				t.Fatalf("round %d, frame %d: created at %v, pgx reads %v", round, i, ours[i].CreatedAt, want[i].CreatedAt)
			}
			ours[i].CreatedAt, want[i].CreatedAt = time.Time{}, time.Time{}
		}
		if !reflect.DeepEqual(ours, want) {
			t.Fatalf("round %d: %+v\npgx reads %+v", round, ours, want)
		}
	}
}

// randomPush is a frame of 1 to 10 messages to partition pid: new ones,
// repeats of stored ones and repeats of new ones in the frame, vouched or
// not. A vouched frame names every repeat of a stored message as a
// candidate, as the cache does: the vouch is true.
func randomPush(r *rand.Rand, pid int64, stored []string, round int) model.Frame {
	verified := int64(-1)
	if r.IntN(2) == 0 {
		verified = int64(len(stored) - 1)
	}
	fr := frameOf(pid, verified)
	var fresh []string
	for k := range 1 + r.IntN(10) {
		id := fmt.Sprint("new-", round, "-", k)
		switch r.IntN(4) {
		case 0:
			off := r.IntN(len(stored))
			id = stored[off]
			if verified >= 0 {
				fr.Candidates = append(fr.Candidates, model.Candidate{Index: int32(k), Offset: int64(off)})
			}
		case 1:
			if len(fresh) > 0 {
				id = fresh[r.IntN(len(fresh))]
			}
		default:
			fresh = append(fresh, id)
		}
		fr.TxnIDs, fr.Hashes = append(fr.TxnIDs, id), append(fr.Hashes, model.HashTxnID(id))
		fr.Data = append(fr.Data, fmt.Appendf(nil, `{"k":%d}`, k))
	}
	return fr
}

func frameOf(pid, verified int64, ids ...string) model.Frame {
	fr := model.Frame{PartitionID: pid, Verified: verified, VerifiedWindow: model.MaxOptionSeconds}
	for _, id := range ids {
		fr.TxnIDs, fr.Hashes, fr.Data = append(fr.TxnIDs, id), append(fr.Hashes, model.HashTxnID(id)), append(fr.Data, []byte(`{}`))
	}
	return fr
}

// pushRolledBack runs push in a transaction it then rolls back.
func pushRolledBack(t *testing.T, pool interface {
	Begin(context.Context) (pgx.Tx, error)
}, push func(pgx.Tx) ([]model.FrameResult, error)) []model.FrameResult {
	t.Helper()
	ctx := context.Background()
	tx, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	res, err := push(tx)
	if err != nil {
		t.Fatal(err)
	}
	return res
}

// TestAPushAfterARefusedOneRunsOnTheSameConnection: a push PostgreSQL
// refuses (a partition that does not exist) leaves the connection's
// statement to be prepared again, and the next push on that connection
// is stored and answered.
func TestAPushAfterARefusedOneRunsOnTheSameConnection(t *testing.T) {
	ctx := context.Background()
	url := pgtest.NewDB(t)
	st := pgtest.Store(t, url)
	p, err := st.EnsurePartition(ctx, "refused", "p")
	if err != nil {
		t.Fatal(err)
	}
	conn, err := st.Pool().Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Release()
	for i := range 3 {
		if _, err := pgwire.PushBundle(ctx, conn.Conn(), []model.Frame{frameOf(p.ID+1000, -1, "lost")}); err == nil {
			t.Fatal("a push to a partition that does not exist was answered")
		}
		id := fmt.Sprint("kept-", i)
		res, err := pgwire.PushBundle(ctx, conn.Conn(), []model.Frame{frameOf(p.ID, -1, id)})
		if err != nil {
			t.Fatalf("the push after a refused one: %v", err)
		}
		if res[0].BaseOffset != int64(i) || res[0].Outcomes[0].Duplicate {
			t.Fatalf("the push after a refused one: %+v", res[0])
		}
	}
}
