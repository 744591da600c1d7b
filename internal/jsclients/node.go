package jsclients

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// Plan is what node/publish.mjs publishes: Steps, in order, over one
// connection to Servers.
type Plan struct {
	Servers string `json:"servers"`
	Steps   []Step `json:"steps"`
}

// Step is one js.publish call. Async steps are published without waiting
// for any answer (concurrent publish promises are the JavaScript
// client's async form); a step with Async false is published once every
// earlier step has its answer.
type Step struct {
	Subject      string              `json:"subject"`
	Data         []byte              `json:"dataBase64"`
	MsgID        string              `json:"msgID,omitempty"`
	Headers      map[string][]string `json:"headers,omitempty"`
	ExpectStream string              `json:"expectStream,omitempty"`
	Async        bool                `json:"async"`
}

// Result is what the client made of one step's answer: the PubAck's
// fields when OK, else the error's name and message and, for a JetStream
// API error, its code (HTTP-like status) and err_code.
type Result struct {
	OK        bool   `json:"ok"`
	Stream    string `json:"stream"`
	Seq       uint64 `json:"seq"`
	Duplicate bool   `json:"duplicate"`
	Name      string `json:"name"`
	Message   string `json:"message"`
	Code      int    `json:"code"`
	ErrCode   int    `json:"err_code"`
}

// nodeTimeout bounds one run of publish.mjs; npmTimeout one npm ci.
const (
	nodeTimeout = 60 * time.Second
	npmTimeout  = 5 * time.Minute
)

// nodeDir is the directory holding package.json and publish.mjs, found
// from this source file so that any test package can use RunNode.
func nodeDir() string {
	_, file, _, ok := runtime.Caller(0)
	if !ok {
		panic("jsclients: no caller information")
	}
	return filepath.Join(filepath.Dir(file), "node")
}

// RunNode publishes plan with the JavaScript JetStream client and returns
// one Result per step, in step order. It installs the client's pinned
// packages first when node_modules is missing or older than the lockfile.
func RunNode(t testing.TB, plan Plan) []Result {
	t.Helper()
	nodeBin := lookPath(t, "node")
	dir := nodeDir()
	ensureInstalled(t, dir)

	in, err := json.Marshal(plan)
	if err != nil {
		t.Fatalf("jsclients: plan: %v", err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), nodeTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, nodeBin, "publish.mjs")
	cmd.Dir = dir
	cmd.Stdin = bytes.NewReader(in)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("jsclients: node publish.mjs: %v (context: %v)\nstderr:\n%s\nstdout:\n%s",
			err, ctx.Err(), stderr.String(), stdout.String())
	}
	if stderr.Len() > 0 {
		t.Logf("jsclients: node publish.mjs stderr:\n%s", stderr.String())
	}

	var results []Result
	sc := bufio.NewScanner(&stdout)
	sc.Buffer(make([]byte, 0, 64<<10), 16<<20)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" {
			continue
		}
		var r Result
		dec := json.NewDecoder(strings.NewReader(line))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&r); err != nil {
			t.Fatalf("jsclients: publish.mjs line %q: %v", line, err)
		}
		results = append(results, r)
	}
	if err := sc.Err(); err != nil {
		t.Fatalf("jsclients: reading publish.mjs output: %v", err)
	}
	if len(results) != len(plan.Steps) {
		t.Fatalf("jsclients: publish.mjs printed %d results for %d steps:\n%s", len(results), len(plan.Steps), stdout.String())
	}
	return results
}

// lookPath finds a program the harness needs; there is no running
// without it, so its absence fails the test rather than skipping it.
func lookPath(t testing.TB, name string) string {
	t.Helper()
	p, err := exec.LookPath(name)
	if err != nil {
		t.Fatalf("jsclients: %s not found on PATH: install Node.js 20 or newer with npm (Debian: apt-get install nodejs npm): %v", name, err)
	}
	return p
}

// installOnce makes one process check (and maybe install) once; the
// flock in install keeps parallel test processes from running npm ci
// over each other.
var (
	installOnce sync.Once
	installErr  error
)

func ensureInstalled(t testing.TB, dir string) {
	t.Helper()
	npmBin := lookPath(t, "npm")
	installOnce.Do(func() { installErr = install(t, dir, npmBin) })
	if installErr != nil {
		t.Fatalf("jsclients: %v", installErr)
	}
}

// install runs npm ci in dir when node_modules is stale, holding an
// exclusive flock on dir itself: the directory is never replaced (npm ci
// deletes and recreates node_modules, so a lock file there would not
// do) and locking it needs no file of its own to keep out of git.
func install(t testing.TB, dir, npmBin string) error {
	lock, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer lock.Close()
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX); err != nil {
		return fmt.Errorf("flock %s: %w", dir, err)
	}
	defer syscall.Flock(int(lock.Fd()), syscall.LOCK_UN)

	// Checked under the lock: another process may just have installed.
	stale, err := stale(dir)
	if err != nil || !stale {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), npmTimeout)
	defer cancel()
	start := time.Now()
	cmd := exec.CommandContext(ctx, npmBin, "ci", "--no-audit", "--no-fund", "--prefer-offline")
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Errorf("npm ci in %s: %v (context: %v)\n%s", dir, err, ctx.Err(), out)
	}
	t.Logf("jsclients: npm ci took %v", time.Since(start).Round(time.Millisecond))
	return nil
}

// stale reports whether node_modules needs (re)installing: npm writes
// node_modules/.package-lock.json once an install has finished, so its
// absence, or being older than package-lock.json, means no finished
// install of this lockfile.
func stale(dir string) (bool, error) {
	want, err := os.Stat(filepath.Join(dir, "package-lock.json"))
	if err != nil {
		return false, err
	}
	have, err := os.Stat(filepath.Join(dir, "node_modules", ".package-lock.json"))
	if os.IsNotExist(err) {
		return true, nil
	}
	if err != nil {
		return false, err
	}
	return have.ModTime().Before(want.ModTime()), nil
}
