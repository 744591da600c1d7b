// Package gatewaybin builds the queengate daemon for tests that run it as
// a process of their own (cmd/queengate, cmd/queenctl, cmd/queenbench).
package gatewaybin

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
)

// Build builds cmd/queengate into dir/queengate and returns its path.
//
// In a suite run the test processes of several packages build it at about
// the same time. The go command does not share work in progress between
// processes, so on an empty build cache each would compile every package
// the daemon links. A lock file lets one build while the others wait; they
// then find the cache warm and only link.
func Build(dir string) (string, error) {
	unlock, err := lock(filepath.Join(os.TempDir(), "queengate-gatewaybin.lock"))
	if err != nil {
		return "", err
	}
	defer unlock()
	bin := filepath.Join(dir, "queengate")
	out, err := exec.Command("go", "build", "-o", bin, "github.com/queengate/queengate/cmd/queengate").CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("build queengate: %v\n%s", err, out)
	}
	return bin, nil
}

// lock takes an exclusive lock on the file at path, waiting for it; the
// lock goes with the process if it dies holding it.
func lock(path string) (unlock func(), err error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o666)
	if err != nil {
		return nil, err
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		f.Close()
		return nil, fmt.Errorf("lock %s: %w", path, err)
	}
	return func() {
		_ = syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
		f.Close()
	}, nil
}
