package gatewaybin

import (
	"errors"
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

// TestTheLockExcludesAnotherUntilReleased: while lock holds the file,
// another open file (as another test process would have) cannot take it;
// once released, it can.
func TestTheLockExcludesAnotherUntilReleased(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "build.lock")
	unlock, err := lock(path)
	if err != nil {
		t.Fatal(err)
	}
	other, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	tryLock := func() error { return syscall.Flock(int(other.Fd()), syscall.LOCK_EX|syscall.LOCK_NB) }
	if err := tryLock(); !errors.Is(err, syscall.EWOULDBLOCK) {
		t.Fatalf("another lock while held: %v, want EWOULDBLOCK", err)
	}
	unlock()
	if err := tryLock(); err != nil {
		t.Fatalf("another lock after release: %v", err)
	}
}
