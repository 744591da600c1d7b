package gateway_test

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/queengate/queengate/model"
)

// conflictAnswer is a push answer with its conflict mark.
type conflictAnswer struct {
	answer
	Conflict bool `json:"conflict"`
}

func (e *testEnv) setOnConflict(t *testing.T, mode model.ConflictMode) {
	t.Helper()
	if _, _, err := e.store.Configure(context.Background(), e.queue, model.OptionsPatch{OnConflict: &mode}, false); err != nil {
		t.Fatal(err)
	}
}

func (e *testEnv) pushRaw(t *testing.T, subject, body string) []conflictAnswer {
	t.Helper()
	msg := e.request(t, subject, body)
	if code := msg.Header.Get("Nats-Service-Error-Code"); code != "" {
		t.Fatalf("push rejected: %s %s", code, msg.Data)
	}
	var out []conflictAnswer
	if err := json.Unmarshal(msg.Data, &out); err != nil {
		t.Fatalf("reply %q: %v", msg.Data, err)
	}
	return out
}

// summary writes answers as status[+conflict] lists, e.g.
// "duplicate,failed+conflict".
func summary(as []conflictAnswer) string {
	var s []string
	for _, a := range as {
		if a.Conflict {
			s = append(s, a.Status+"+conflict")
		} else {
			s = append(s, a.Status)
		}
	}
	return strings.Join(s, ",")
}

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
			e.setOnConflict(t, mode)
			e.startGateway(gatewayOpts{})
			first := e.pushRaw(t, e.subject("p"), `[{"transactionId":"pay-1","data":{"amount":10}}]`)
			if summary(first) != "queued" {
				t.Fatalf("first push answered %s", summary(first))
			}
			got := e.pushRaw(t, e.subject("p"), `[
				{"transactionId":"pay-1","data":{"amount":10}},
				{"transactionId":"pay-1","data":{"amount":99}},
				{"transactionId":"pay-2","data":"x"},
				{"transactionId":"pay-2","data":"y"},
				{"transactionId":"pay-2","data":"x"}]`)
			if summary(got) != wantAnswers {
				t.Fatalf("answered %s, want %s (%+v)", summary(got), wantAnswers, got)
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
			if n := e.storedCount(t); n != 2 {
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
	e.startGateway(gatewayOpts{})
	body := `[{"transactionId":"t","data":{"b": 1,  "a": [1, 2]}}]`
	if got := summary(e.pushRaw(t, e.subject(""), body)); got != "queued" {
		t.Fatalf("first push: %s", got)
	}
	e.setOnConflict(t, model.ConflictFlag)
	// Byte for byte as sent: the same text is no conflict, the same JSON
	// value written differently is.
	if got := summary(e.pushRaw(t, e.subject(""), body)); got != "duplicate" {
		t.Errorf("the same data answered %s", got)
	}
	if got := summary(e.pushRaw(t, e.subject(""), `[{"transactionId":"t","data":{"b":1,"a":[1,2]}}]`)); got != "duplicate+conflict" {
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
		envs[i].queue = fmt.Sprintf("%s-%s", envs[i].queue, mode)
		envs[i].setOnConflict(t, mode)
		envs[i].startGateway(gatewayOpts{})
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
		answers := make([][]conflictAnswer, len(modes))
		for i, e := range envs {
			answers[i] = e.pushRaw(t, e.subject("p"), body)
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
				if a.Status != status || a.Conflict != wantConflict || (status != "failed" && off(a.answer) != orig.offset) {
					t.Fatalf("step %d message %d (%s %s) in mode %s: answered %s conflict=%v at %d, want %s conflict=%v at %d",
						step, k, m.id, m.data, mode, a.Status, a.Conflict, off(a.answer), status, wantConflict, orig.offset)
				}
			}
		}
	}
	for i, e := range envs {
		if n := e.storedCount(t); n != int(next) {
			t.Errorf("mode %s stored %d messages, want %d", modes[i], n, next)
		}
	}
}
