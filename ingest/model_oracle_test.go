package ingest_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/queengate/queengate/internal/checkfor"
	"github.com/queengate/queengate/internal/pgtest"
	"github.com/queengate/queengate/model"
)

// TestModelOracleJudgesTheWindowWhereSQLProbed: PostgreSQL's clock moves
// on between soundStore's read and the push, and a stored transactionId
// leaves the window in between (under the full suite's load this gap
// once crossed an edge, and a right verdict was reported wrong). SQL
// answers for the window at its own instant; the oracle must judge it
// there, whether the push wrote (its rows carry that instant) or wrote
// nothing.
func TestModelOracleJudgesTheWindowWhereSQLProbed(t *testing.T) {
	t.Parallel()
	url := pgtest.NewDB(t)
	// Each push is vouched for up to offset 2, naming where the cache
	// holds its hashes (as in the failure seen: a narrowed probe).
	for _, tc := range []struct {
		name   string
		pushed []string
		named  []model.Candidate
		want   []model.Outcome // SQL's verdict once row 0..1 has left the window
	}{
		// z is stored only in the leaving row: new.
		{"a push that writes", []string{"z", "y"}, []model.Candidate{{Index: 0, Offset: 1}},
			[]model.Outcome{{Offset: 3}, {Offset: 4}}},
		// x is stored in the leaving row and in one that stays: a
		// duplicate of the one that stays, and nothing written.
		{"a push that writes nothing", []string{"x"}, []model.Candidate{{Index: 0, Offset: 0}, {Index: 0, Offset: 2}},
			[]model.Outcome{{Offset: 2, Duplicate: true}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			store := &soundStore{Store: pgtest.Store(t, url), t: t}
			const window = 30
			queue := fmt.Sprintf("oracle%d", len(tc.pushed))
			w := window
			if _, _, err := store.Configure(ctx, queue, model.OptionsPatch{DedupWindowSeconds: &w}, false); err != nil {
				t.Fatal(err)
			}
			p, err := store.EnsurePartition(ctx, queue, "p")
			if err != nil {
				t.Fatal(err)
			}
			// Row 0..1 holds x and z; it is aged out of the window so that
			// x can be stored again at 2, in a row that stays.
			pushDirect(t, store, newFrame(p.ID, "x", "z"))
			pgtest.AgeFrames(t, store.Pool(), time.Hour, "partition_id = $1", p.ID)
			pushDirect(t, store, newFrame(p.ID, "x"))
			fr := newFrame(p.ID, tc.pushed...)
			fr.Verified, fr.VerifiedWindow, fr.Candidates = 2, window, tc.named
			var res []model.FrameResult
			for room := time.Second; res == nil; room *= 2 {
				res = pushAcrossTheEdge(t, store, p.ID, window, room, fr)
			}
			if got := res[0]; got.Probe != model.ProbeNarrowed || fmt.Sprint(got.Outcomes) != fmt.Sprint(tc.want) {
				t.Fatalf("SQL answered %v (probe %v), want %v narrowed: the row did not leave the window before the probe",
					got.Outcomes, got.Probe, tc.want)
			}
			if store.mismatches != 0 {
				t.Errorf("%d of SQL's verdicts were judged unlike the full probe", store.mismatches)
			}
		})
	}
}

// errNoStraddle: the read came after the edge, nothing was pushed.
var errNoStraddle = errors.New("the read came after the row left the window")

// pushAcrossTheEdge puts row 0..1 of partition pid room before the edge
// of the window, and pushes fr through store so that the row is in the
// window at store's read and out of it at the probe: the push waits for
// PostgreSQL's clock to pass the edge. It answers nil, having pushed
// nothing, when the read came too late (a stalled machine): try again
// with more room.
func pushAcrossTheEdge(t *testing.T, store *soundStore, pid int64, window int, room time.Duration, fr model.Frame) []model.FrameResult {
	t.Helper()
	ctx := context.Background()
	var edge time.Time
	if err := store.Pool().QueryRow(ctx, `
		UPDATE queen.log_segments SET created_at = now() - make_interval(secs => $2) + make_interval(secs => $3)
		 WHERE partition_id = $1 AND base_offset = 0 RETURNING created_at + make_interval(secs => $2)`,
		pid, window, room.Seconds()).Scan(&edge); err != nil {
		t.Fatal(err)
	}
	past := func() bool {
		var passed bool
		if err := store.Pool().QueryRow(ctx, "SELECT now() > $1", edge).Scan(&passed); err != nil {
			t.Fatal(err)
		}
		return passed
	}
	store.beforePush = func() error {
		if past() {
			return errNoStraddle
		}
		checkfor.Check(t, time.Minute, checkfor.Cond("the row left the window", past))
		return nil
	}
	defer func() { store.beforePush = nil }()
	res, err := store.Push(ctx, []model.Frame{fr})
	if errors.Is(err, errNoStraddle) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	return res
}

// pushDirect pushes fr through store, checked as every push is.
func pushDirect(t *testing.T, store *soundStore, fr model.Frame) {
	t.Helper()
	if _, err := store.Push(context.Background(), []model.Frame{fr}); err != nil {
		t.Fatal(err)
	}
}

// TestModelOracleRefusesAVerdictNoInstantGives: judging at the instants a
// probe may have run at still refuses what the full probe gives at none of
// them.
func TestModelOracleRefusesAVerdictNoInstantGives(t *testing.T) {
	t.Parallel()
	read := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	x := model.HashTxnID("x")
	// x at 0 leaves the window a second after the read; x at 2 stays until
	// the push returned, two seconds after the read.
	st := stored{last: 2, window: 30, read: read, occ: map[model.Hash][]occurrence{
		x: {{off: 0, created: read.Add(-29 * time.Second)}, {off: 2, created: read}},
	}}
	at := append([]time.Time{read}, st.leaving(read, read.Add(2*time.Second))...)
	fr := newFrame(1, "x")
	for _, tc := range []struct {
		answer model.Outcome
		agree  bool
	}{
		{model.Outcome{Offset: 0, Duplicate: true}, true}, // probed before x at 0 left
		{model.Outcome{Offset: 2, Duplicate: true}, true}, // probed after
		{model.Outcome{Offset: 1, Duplicate: true}, false},
		{model.Outcome{Offset: 3}, false}, // x at 2 is in the window all along
	} {
		if _, _, agree := judge([]model.Frame{fr}, [][]model.Outcome{{tc.answer}}, []stored{st}, at); agree != tc.agree {
			t.Errorf("SQL answering %+v: judged agreeing %v, want %v", tc.answer, agree, tc.agree)
		}
	}
}
