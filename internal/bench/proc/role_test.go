package proc

import (
	"context"
	"os"
	"testing"
	"time"
)

// init lets the test binary play roles: StartRole re-executes the running
// binary, which under go test is this one; init runs before the tests, so
// the child never starts them.
func init() {
	AddRole("test-echo", func(ctx context.Context, announce func(string) error) (string, error) {
		if err := announce(os.Getenv("ECHO")); err != nil {
			return "", err
		}
		<-ctx.Done()
		return "stopped " + os.Getenv("ECHO"), nil
	})
	PlayRole()
}

// TestRoleRunsApartAndSaysItsLastWords: a role runs in a process of its
// own, announces what it was given, stops on Stop, and its last words
// reach the parent.
func TestRoleRunsApartAndSaysItsLastWords(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c, err := StartRole(ctx, "test-echo", "ECHO=hello there")
	if err != nil {
		t.Fatal(err)
	}
	if c.Ready != "hello there" || c.PID() == os.Getpid() {
		t.Errorf("announced %q in process %d (this one %d); want %q from another process", c.Ready, c.PID(), os.Getpid(), "hello there")
	}
	if err := c.Stop(); err != nil {
		t.Fatal(err)
	}
	if got := c.Said(); got != "stopped hello there" {
		t.Errorf("last words %q, want %q", got, "stopped hello there")
	}
	if err := c.Stop(); err != nil {
		t.Errorf("second Stop: %v", err)
	}
}

// TestRoleEndsWithItsParentsHold: a child whose stdin closes (its parent
// gone) stops as it would on Stop, so no role outlives a crashed parent.
func TestRoleEndsWithItsParentsHold(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c, err := StartRole(ctx, "test-echo", "ECHO=orphan")
	if err != nil {
		t.Fatal(err)
	}
	c.stdin.Close()
	select {
	case <-c.exited:
	case <-ctx.Done():
		t.Fatal("the role still runs after its stdin closed")
	}
	if c.waitErr != nil || c.Said() != "stopped orphan" {
		t.Errorf("exit %v, last words %q; want a clean exit saying %q", c.waitErr, c.Said(), "stopped orphan")
	}
}

// TestUnknownRoleIsRefused: a name no package added fails at start, not
// by running the parent's main in the child.
func TestUnknownRoleIsRefused(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if c, err := StartRole(ctx, "no-such-role"); err == nil {
		_ = c.Stop()
		t.Fatal("StartRole of an unknown role succeeded")
	}
}
