package checkfor

import (
	"errors"
	"testing"
	"time"
)

// recorder is a testing.TB that notes a Fatalf instead of stopping.
type recorder struct {
	testing.TB
	failed string
}

func (r *recorder) Helper() {}
func (r *recorder) Fatalf(format string, args ...any) {
	r.failed = format
	panic(r)
}

func TestCheckReturnsOnceTheConditionHolds(t *testing.T) {
	n := 0
	Check(t, time.Minute, func() error {
		if n++; n < 3 {
			return errors.New("not yet")
		}
		return nil
	})
	if n != 3 {
		t.Errorf("polled %d times, want 3", n)
	}
}

func TestCheckFailsWithTheLastError(t *testing.T) {
	r := &recorder{TB: t}
	func() {
		defer func() {
			if recover() != r {
				t.Error("Check returned on a condition that never held")
			}
		}()
		Check(r, 2*Every, Cond("the sky to fall", func() bool { return false }))
	}()
	if r.failed == "" {
		t.Error("no failure reported")
	}
}
