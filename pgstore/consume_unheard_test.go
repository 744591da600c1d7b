package pgstore_test

import (
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/queengate/queengate/model"
)

// Poison messages (docs/protocol.md, "What an attempt is"): leases that
// run out unheard cost no attempt, but every maxUnheardDeliveries-th of
// them in a row from the same message counts its attempts, so that
// maxAttempts ends a message that kills its consumer before it says a
// word.

// unheardPops pops the partition k times, each lease running out with
// nothing heard from its consumer, and returns what each pop delivered.
func (b *consumerBundle) unheardPops(t *testing.T, k int) []model.PopResult {
	t.Helper()
	var out []model.PopResult
	for range k {
		r := b.pop(t, b.group, 1)
		out = append(out, r)
		if r.LeaseID != "" {
			b.backdateLease(t)
		}
	}
	return out
}

// With the default maxUnheardDeliveries (3) and maxAttempts 2, a message
// whose consumer dies on it every time is delivered six times, the 3rd
// and 6th lease counting an attempt each, and the seventh pop
// dead-letters it, saying why.
func TestAMessageThatKillsItsConsumerIsDeadLettered(t *testing.T) {
	t.Parallel()
	b := setupConsumer(t, 1)
	b.setMaxAttempts(t, 2)
	var attempts []int
	var errs []string
	for _, r := range b.unheardPops(t, 6) {
		if len(r.Messages) != 1 {
			t.Fatalf("pops delivered %+v; want t0 each time", r)
		}
		attempts, errs = append(attempts, r.Messages[0].Attempts), append(errs, r.Messages[0].LastError)
	}
	counted := "lease ran out unheard 3 times (consumer 'c', attempt 1)"
	if !slices.Equal(attempts, []int{1, 1, 1, 2, 2, 2}) || !slices.Equal(errs, []string{"", "", "", counted, counted, counted}) {
		t.Fatalf("six pops, each lease run out unheard: attempts %v, errors %q; want the 3rd lease counted", attempts, errs)
	}
	if r := b.pop(t, b.group, 1); len(r.Messages) != 0 || r.DeadLettered != 1 {
		t.Fatalf("the seventh pop: %+v; want t0 dead-lettered", r)
	}
	dl := b.deadLetters(t)
	if len(dl) != 1 || !strings.Contains(string(dl[0].Data), `"error":"lease ran out unheard 6 times (consumer 'c', attempt 2)"`) {
		t.Fatalf("dead letters: %+v", dl)
	}
	if gp := b.groupPartition(t); gp.Unconfirmed != 4 {
		t.Errorf("unconfirmed %d, want 4 (the leases taken back)", gp.Unconfirmed)
	}
}

// Leases run out unheard count only in a row from the same message: a
// pop whose answer was never sent (an undo) is no delivery, a seek starts
// the count again, and maxUnheardDeliveries 0 never counts.
func TestUnheardLeasesCountOnlyInARowFromOneMessage(t *testing.T) {
	t.Parallel()
	b := setupConsumer(t, 1)
	for range 3 {
		if r := b.pop(t, b.group, 1); !b.undo(t, r.LeaseID) {
			t.Fatal("undo")
		}
	}
	b.unheardPops(t, 2)
	if _, _, err := b.store.SeekGroup(context.Background(), b.queue, b.group.Name, model.Seek{Offset: 0}); err != nil {
		t.Fatal(err)
	}
	b.unheardPops(t, 2)
	if r := b.pop(t, b.group, 1); !slices.Equal(attemptsOf(r), []int{1}) || r.Messages[0].LastError != "" {
		t.Fatalf("after three undos, two leases unheard, a seek and two more: %+v; want t0 at attempt 1", r)
	}
	b.backdateLease(t) // the third in a row since the seek
	if r := b.pop(t, b.group, 1); !slices.Equal(attemptsOf(r), []int{2}) {
		t.Fatalf("after the third lease in a row ran out unheard: %+v; want t0 at attempt 2", r)
	}

	never := setupConsumer(t, 1)
	never.setMaxAttempts(t, 1)
	zero := 0
	never.configure(t, model.OptionsPatch{MaxUnheardDeliveries: &zero})
	never.unheardPops(t, 7)
	if r := never.pop(t, never.group, 1); !slices.Equal(attemptsOf(r), []int{1}) || r.DeadLettered != 0 {
		t.Fatalf("maxUnheardDeliveries 0, after seven leases ran out unheard: %+v; want t0 at attempt 1", r)
	}
}
