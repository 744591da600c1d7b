package pgcluster

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// PostgreSQL's children make themselves session leaders (setsid), so
// neither the postmaster's process group nor its death reaches them: a
// child stopped with SIGSTOP outlives a kill -9 of its postmaster for
// ever. What they all share is their working directory, the data
// directory, which is how this file finds them.

// tracked are the folders of the clusters this process started (or was
// told of with Track), for [Leftovers].
var tracked struct {
	sync.Mutex
	dirs map[string]bool
}

// Track makes [Leftovers] look at the cluster in dir too: one this process
// did not start itself, such as a daemon's local cluster in a test.
func Track(dir string) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return
	}
	tracked.Lock()
	defer tracked.Unlock()
	if tracked.dirs == nil {
		tracked.dirs = map[string]bool{}
	}
	tracked.dirs[abs] = true
}

// Proc is a process found running in a cluster's folder.
type Proc struct {
	PID   int
	State string // as in ps: R, S, T (stopped)…
	Cmd   string
}

func (p Proc) String() string { return fmt.Sprintf("%d (%s) %s", p.PID, p.State, p.Cmd) }

// Leftovers kills (SIGKILL, which a stopped process does not hold off)
// every process still running in the folder of a cluster this process
// started or tracked, and returns them. Call it when every cluster should
// be stopped, at the end of a test run: anything it returns is a
// process some test left behind.
func Leftovers() []Proc {
	tracked.Lock()
	dirs := make([]string, 0, len(tracked.dirs))
	for d := range tracked.dirs {
		dirs = append(dirs, d)
	}
	tracked.Unlock()
	procs := procsIn(dirs...)
	killAll(dirs...)
	return procs
}

// CheckLeftovers is [Leftovers] as an error for a TestMain: nil when no
// process was left behind.
func CheckLeftovers() error {
	left := Leftovers()
	if len(left) == 0 {
		return nil
	}
	lines := make([]string, len(left))
	for i, p := range left {
		lines[i] = "  " + p.String()
	}
	return fmt.Errorf("pgcluster: %d PostgreSQL processes outlived the tests that started them (now killed):\n%s",
		len(left), strings.Join(lines, "\n"))
}

// continueAll resumes every process in dir: a stopped backend or WAL
// sender holds up a shutdown, which waits for it.
func continueAll(dir string) {
	for _, p := range procsIn(dir) {
		_ = syscall.Kill(p.PID, syscall.SIGCONT)
	}
}

// killAll is kill -9 of every process in dirs; it returns once they are
// gone (a killed process takes a moment to exit), or after 10 seconds.
func killAll(dirs ...string) {
	deadline := time.Now().Add(10 * time.Second)
	for {
		procs := procsIn(dirs...)
		if len(procs) == 0 || time.Now().After(deadline) {
			return
		}
		for _, p := range procs {
			_ = syscall.Kill(p.PID, syscall.SIGKILL)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// procsIn lists the live processes whose working directory is one of dirs
// or below, deleted or not.
func procsIn(dirs ...string) []Proc {
	if len(dirs) == 0 {
		return nil
	}
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	var procs []Proc
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == os.Getpid() {
			continue
		}
		cwd, err := os.Readlink(fmt.Sprintf("/proc/%d/cwd", pid))
		if err != nil || !under(strings.TrimSuffix(cwd, " (deleted)"), dirs) {
			continue
		}
		if p, ok := readProc(pid); ok {
			procs = append(procs, p)
		}
	}
	return procs
}

func under(path string, dirs []string) bool {
	for _, d := range dirs {
		if path == d || strings.HasPrefix(path, d+"/") {
			return true
		}
	}
	return false
}

// readProc reads a process's state and command line; a zombie (already
// dead, waiting for its parent) does not count.
func readProc(pid int) (Proc, bool) {
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return Proc{}, false
	}
	_, after, ok := strings.Cut(string(stat), ") ")
	if !ok || after == "" || after[0] == 'Z' || after[0] == 'X' {
		return Proc{}, false
	}
	cmd, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	return Proc{PID: pid, State: after[:1], Cmd: strings.TrimSpace(strings.ReplaceAll(string(cmd), "\x00", " "))}, true
}
