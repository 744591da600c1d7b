package gateway_test

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/queengate/queengate/internal/gatewaytest"
	"github.com/queengate/queengate/model"
)

// The three modes on the same history: a retry with the same data, one
// with different data, and a repeat inside one request with different
// data. Every mode writes the same messages; only the answers differ.
func TestPayloadConflictModes(t *testing.T) {
	t.Parallel()
	want := map[model.ConflictMode]string{
		model.ConflictIgnore: "duplicate,duplicate,queued,duplicate,duplicate",
		model.ConflictFlag:   "duplicate,duplicate+conflict,queued,duplicate+conflict,duplicate",
		model.ConflictReject: "duplicate,failed+conflict,queued,failed+conflict,duplicate",
	}
	for mode, wantAnswers := range want {
		t.Run(string(mode), func(t *testing.T) {
			t.Parallel()
			e := newEnv(t)
			e.SetOnConflict(t, mode)
			e.StartGateway(gatewayOpts{})
			first := e.PushRaw(t, e.Subject("p"), `[{"transactionId":"pay-1","data":{"amount":10}}]`)
			if gatewaytest.Summary(first) != "queued" {
				t.Fatalf("first push answered %s", gatewaytest.Summary(first))
			}
			got := e.PushRaw(t, e.Subject("p"), `[
				{"transactionId":"pay-1","data":{"amount":10}},
				{"transactionId":"pay-1","data":{"amount":99}},
				{"transactionId":"pay-2","data":"x"},
				{"transactionId":"pay-2","data":"y"},
				{"transactionId":"pay-2","data":"x"}]`)
			if gatewaytest.Summary(got) != wantAnswers {
				t.Fatalf("answered %s, want %s (%+v)", gatewaytest.Summary(got), wantAnswers, got)
			}
			for _, i := range []int{0, 1} {
				if got[i].Status == "duplicate" && got[i].MessageID != first[0].MessageID {
					t.Errorf("answer %d names %s, want the original %s", i, got[i].MessageID, first[0].MessageID)
				}
			}
			if mode == model.ConflictReject {
				if !strings.Contains(got[1].Error, first[0].MessageID) || !strings.Contains(got[1].Error, "payload conflict") {
					t.Errorf("a rejected conflict says %q: want the original's id %s and the cause", got[1].Error, first[0].MessageID)
				}
			}
			if n := e.StoredCount(t); n != 2 {
				t.Errorf("%d messages stored, want 2", n)
			}
		})
	}
}

// An original stored while the queue ignored conflicts has no data hash:
// it is compared by its stored data once the mode changes, whatever the
// gateway last read of the mode.
func TestConflictModeSetAfterTheOriginalWasStored(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.StartGateway(gatewayOpts{})
	body := `[{"transactionId":"t","data":{"b": 1,  "a": [1, 2]}}]`
	if got := gatewaytest.Summary(e.PushRaw(t, e.Subject(""), body)); got != "queued" {
		t.Fatalf("first push: %s", got)
	}
	e.SetOnConflict(t, model.ConflictFlag)
	// Byte for byte as sent: the same text is no conflict, the same JSON
	// value written differently is.
	if got := gatewaytest.Summary(e.PushRaw(t, e.Subject(""), body)); got != "duplicate" {
		t.Errorf("the same data answered %s", got)
	}
	if got := gatewaytest.Summary(e.PushRaw(t, e.Subject(""), `[{"transactionId":"t","data":{"b":1,"a":[1,2]}}]`)); got != "duplicate+conflict" {
		t.Errorf("reformatted data answered %s", got)
	}
}

// Explained by a model over random histories: in every mode the same
// messages are written at the same offsets, a duplicate is a conflict
// exactly when its data differs from the first stored occurrence's, and
// only reject turns those into failures.
func TestConflictModesNeverChangeWhatIsWritten(t *testing.T) {
	t.Parallel()
	modes := []model.ConflictMode{model.ConflictIgnore, model.ConflictFlag, model.ConflictReject}
	envs := make([]*testEnv, len(modes))
	for i, mode := range modes {
		envs[i] = newEnv(t)
		envs[i].Queue = fmt.Sprintf("%s-%s", envs[i].Queue, mode)
		envs[i].SetOnConflict(t, mode)
		envs[i].StartGateway(gatewayOpts{})
	}
	rng := rand.New(rand.NewPCG(7, 11))
	type stored struct {
		data   string
		offset int64
	}
	originals := map[string]stored{} // transactionId -> first occurrence
	var next int64
	for step := range 60 {
		n := 1 + rng.IntN(6)
		var parts []string
		type sent struct{ id, data string }
		var batch []sent
		for range n {
			m := sent{id: fmt.Sprintf("id-%d", rng.IntN(12)), data: fmt.Sprintf(`"v%d"`, rng.IntN(2))}
			batch = append(batch, m)
			parts = append(parts, fmt.Sprintf(`{"transactionId":%q,"data":%s}`, m.id, m.data))
		}
		body := "[" + strings.Join(parts, ",") + "]"
		answers := make([][]gatewaytest.ConflictAnswer, len(modes))
		for i, e := range envs {
			answers[i] = e.PushRaw(t, e.Subject("p"), body)
		}
		for k, m := range batch {
			orig, dup := originals[m.id]
			if !dup {
				orig = stored{data: m.data, offset: next}
				originals[m.id] = orig
				next++
			}
			conflict := dup && orig.data != m.data
			for i, mode := range modes {
				a := answers[i][k]
				status := map[bool]string{true: "duplicate", false: "queued"}[dup]
				if conflict && mode == model.ConflictReject {
					status = "failed"
				}
				wantConflict := conflict && mode != model.ConflictIgnore
				if a.Status != status || a.Conflict != wantConflict || (status != "failed" && off(a.Answer) != orig.offset) {
					t.Fatalf("step %d message %d (%s %s) in mode %s: answered %s conflict=%v at %d, want %s conflict=%v at %d",
						step, k, m.id, m.data, mode, a.Status, a.Conflict, off(a.Answer), status, wantConflict, orig.offset)
				}
			}
		}
	}
	for i, e := range envs {
		if n := e.StoredCount(t); n != int(next) {
			t.Errorf("mode %s stored %d messages, want %d", modes[i], n, next)
		}
	}
}
