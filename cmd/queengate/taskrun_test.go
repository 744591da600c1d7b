package main

import (
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/queengate/queengate/internal/checkfor"
	"github.com/queengate/queengate/internal/obstest"
	"github.com/queengate/queengate/internal/pgcluster"
	"github.com/queengate/queengate/internal/pgtest"
)

// TestSignalToGoToolTaskRunStopsTheGateway starts the gateway as the
// README does, `go tool task run`, and signals it: SIGTERM to that one
// process (a supervisor's or docker stop's, not to its process group),
// or SIGINT to the whole group (a terminal's Ctrl-C, which reaches the
// gateway and, passed on, again from task). Either way the gateway stops
// as on one signal of its own (it logs its stop, not killed by the
// repeat), and go tool task exits 0.
func TestSignalToGoToolTaskRunStopsTheGateway(t *testing.T) {
	t.Parallel()
	for name, signal := range map[string]func(pid int) error{
		"SIGTERM to go tool": func(pid int) error { return syscall.Kill(pid, syscall.SIGTERM) },
		"Ctrl-C":             func(pid int) error { return syscall.Kill(-pid, syscall.SIGINT) },
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			taskRunStops(t, signal)
		})
	}
}

// taskRunStops runs `go tool task run`, waits until the gateway is ready,
// signals go tool's process with signal, and checks that everything
// stops.
func taskRunStops(t *testing.T, signal func(pid int) error) {
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	httpAddr := fmt.Sprintf("127.0.0.1:%d", freePort(t))
	cmd := exec.Command("go", "tool", "task", "run")
	cmd.Dir = root
	cmd.Env = append(cleanEnv(), "QUEEN_PG_URL="+pgtest.NewDB(t), "QUEEN_HTTP_ADDR="+httpAddr,
		fmt.Sprintf("QUEEN_NATS_PORT=%d", freePort(t)))
	// A group of its own: the terminal's, and for the cleanup to end
	// whatever is left.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	out := &obstest.LogBuffer{}
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() { _ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) })
	checkfor.Check(t, 3*time.Minute, checkfor.Cond("the gateway to be ready", func() bool {
		resp, err := http.Get("http://" + httpAddr + "/readyz")
		if err == nil {
			resp.Body.Close()
		}
		return err == nil && resp.StatusCode == http.StatusOK
	}))
	gateway := descendantNamed(cmd.Process.Pid, "queengate")
	if gateway == 0 {
		t.Fatalf("no queengate process under go tool task run; output:\n%s", out)
	}
	if err := signal(cmd.Process.Pid); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-exited:
		if err != nil {
			t.Errorf("go tool task run after the signal: %v, want exit 0; output:\n%s", err, out)
		}
	case <-time.After(time.Minute):
		t.Fatalf("go tool task run still runs a minute after the signal; output:\n%s", out)
	}
	checkfor.Check(t, 30*time.Second, checkfor.Cond("the gateway process to be gone", func() bool { return !alive(gateway) }))
	if !strings.Contains(out.String(), `"message":"stopped"`) {
		t.Errorf("the gateway did not log its stop; output:\n%s", out)
	}
}

// descendantNamed is the pid of a process named name below pid, 0 if none.
func descendantNamed(pid int, name string) int {
	children := map[int][]int{}
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		p, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if ppid, ok := parentOf(p); ok {
			children[ppid] = append(children[ppid], p)
		}
	}
	for todo := children[pid]; len(todo) > 0; todo = todo[1:] {
		if comm, _ := os.ReadFile(fmt.Sprintf("/proc/%d/comm", todo[0])); strings.TrimSpace(string(comm)) == name {
			return todo[0]
		}
		todo = append(todo, children[todo[0]]...)
	}
	return 0
}

// parentOf reads a process's parent pid from /proc.
func parentOf(pid int) (int, bool) {
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, false
	}
	_, after, ok := strings.Cut(string(stat), ") ")
	fields := strings.Fields(after)
	if !ok || len(fields) < 2 {
		return 0, false
	}
	ppid, err := strconv.Atoi(fields[1])
	return ppid, err == nil
}

// alive says whether pid runs (a zombie does not).
func alive(pid int) bool {
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	_, after, ok := strings.Cut(string(stat), ") ")
	return err == nil && ok && !strings.HasPrefix(after, "Z")
}

// TestSecondLocalGatewaySaysTheFolderIsInUse: a second gateway started
// on the local PostgreSQL folder of a running one (a second `go tool
// task run` in the same checkout) exits saying so, not with
// PostgreSQL's log about a lock file.
func TestSecondLocalGatewaySaysTheFolderIsInUse(t *testing.T) {
	t.Parallel()
	dir := pgtest.ServerDir(t)
	pgcluster.Track(dir)
	first := startDaemon(t, "", "QUEEN_LOCAL_PG_DIR="+dir)
	out, err := runBinary(t, "QUEEN_LOCAL_PG_DIR="+dir, fmt.Sprintf("QUEEN_NATS_PORT=%d", freePort(t)), "QUEEN_HTTP_ADDR=127.0.0.1:0")
	want := "is in use by another gateway"
	if err == nil || !strings.Contains(out, want) || strings.Contains(out, "postmaster.pid") {
		t.Errorf("second gateway on %s: %v, output:\n%s\nwant an exit saying %q", dir, err, out, want)
	}
	if err := first.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := <-first.exited; err != nil {
		t.Errorf("first gateway after SIGTERM: %v", err)
	}
}
