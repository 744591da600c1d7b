package timers

import "testing"

// TestWakeupKeepsTheEarliestOfABurst: however many schedules arrive while
// the loop is busy, the earliest is what it sees (a bounded queue dropped
// the one that mattered).
func TestWakeupKeepsTheEarliestOfABurst(t *testing.T) {
	w := newWakeup()
	for i := range 1000 {
		w.note(int64(5000 + i))
	}
	w.note(42)
	w.note(9000)
	<-w.ch
	if at, ok := w.take(); !ok || at != 42 {
		t.Errorf("take = %d, %v; want the earliest, 42", at, ok)
	}
	if _, ok := w.take(); ok {
		t.Error("a second take without a note found one")
	}
	select {
	case <-w.ch:
		t.Error("a signal left over after take")
	default:
	}
	w.note(7)
	if at, ok := w.take(); !ok || at != 7 {
		t.Errorf("after a new note: %d, %v", at, ok)
	}
}
