// Package checkfor waits in tests for a condition instead of sleeping for
// a guess: Check polls a function until it returns nil, and on timeout
// fails the test with the last error it returned, which says what state
// the test was left in.
package checkfor

import (
	"errors"
	"testing"
	"time"
)

// Every is how often Check polls.
const Every = 20 * time.Millisecond

// Check calls f every Every until it returns nil; after total it fails tb
// with f's last error.
func Check(tb testing.TB, total time.Duration, f func() error) {
	tb.Helper()
	deadline := time.Now().Add(total)
	for {
		err := f()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			tb.Fatalf("not within %v: %v", total, err)
		}
		time.Sleep(Every)
	}
}

// Cond adapts a condition: its error is what, while cond is false.
func Cond(what string, cond func() bool) func() error {
	return func() error {
		if cond() {
			return nil
		}
		return errors.New(what)
	}
}
