package proc

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"strings"
	"sync"
	"syscall"
	"time"
)

// roleEnv names the role a re-executed queenbench plays.
const roleEnv = "QUEENBENCH_ROLE"

// roleReadyTimeout bounds how long a role may take to announce it is
// ready (the nats-server role recovers its JetStream store first).
const roleReadyTimeout = 30 * time.Second

// A Role is a part queenbench plays in a process of its own, so that its
// CPU and memory are not mixed with the load generator's, nor its
// goroutines with the load generator's on one Go scheduler. It runs until
// ctx ends (the parent's Stop, or the parent gone), calls announce once
// it is ready (the parent's StartRole returns then, with what it
// announced), and returns its last words for the parent (Child.Said).
type Role func(ctx context.Context, announce func(detail string) error) (said string, err error)

// roles are the parts queenbench can play, by name; AddRole fills it from
// package init functions, before PlayRole reads it.
var roles = map[string]Role{roleNATSServer: playNATSServer}

// AddRole makes a role playable under name. Call it from an init
// function, so that a re-executed binary knows the role before main (or
// a test binary's init) calls PlayRole.
func AddRole(name string, play Role) {
	if _, ok := roles[name]; ok {
		panic("proc: role " + name + " added twice")
	}
	roles[name] = play
}

// PlayRole plays the role this process was re-executed in (StartRole
// re-executes the running binary), if any, and then exits; else it
// returns at once. main calls it first, and so do the tests of packages
// that start a role, whose test binary is the one re-executed.
func PlayRole() {
	name := os.Getenv(roleEnv)
	play, ok := roles[name]
	if !ok {
		return
	}
	if err := playUntilStopped(play); err != nil {
		fmt.Fprintf(os.Stderr, "queenbench %s: %v\n", name, err)
		os.Exit(1)
	}
	os.Exit(0)
}

// playUntilStopped plays a role until SIGTERM or SIGINT, or until stdin
// reaches end of file: the parent holds the other end of stdin, so a
// parent that dies without stopping the child (a crash, a killed test
// binary) takes it along instead of leaking it.
func playUntilStopped(play Role) error {
	// Signals are caught before the ready line, so a Stop right after it
	// is handled rather than killing the process outright.
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		_, _ = io.Copy(io.Discard, os.Stdin)
		cancel()
	}()
	said, err := play(ctx, func(detail string) error {
		_, err := fmt.Fprintf(os.Stdout, "ready %s\n", detail)
		return err
	})
	if err != nil {
		return err
	}
	_, err = fmt.Fprintln(os.Stdout, said)
	return err
}

// Child is a role running as a child process.
type Child struct {
	Cmd *exec.Cmd
	// Ready is what the child announced once ready.
	Ready string

	name string
	// stdin is the parent's end of the child's stdin; the child stops when
	// it is closed (see playUntilStopped).
	stdin    *os.File
	exited   chan struct{} // closed once Cmd.Wait has returned
	waitErr  error         // Cmd.Wait's result, readable once exited is closed
	said     chan string   // the child's stdout after its ready line
	stopOnce sync.Once
	stopErr  error
}

// StartRole re-executes queenbench in the named role, with env added to
// this process's environment, and waits until it announces it is ready.
// ctx bounds the start only; the process runs until Stop.
func StartRole(ctx context.Context, name string, env ...string) (*Child, error) {
	// The child is this binary: a role unknown here would run its main.
	if _, ok := roles[name]; !ok {
		return nil, fmt.Errorf("no role %q in this binary", name)
	}
	exe, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("find executable: %w", err)
	}
	stdinR, stdinW, err := os.Pipe()
	if err != nil {
		return nil, fmt.Errorf("stdin pipe: %w", err)
	}
	stdoutR, stdoutW, err := os.Pipe()
	if err != nil {
		stdinR.Close()
		stdinW.Close()
		return nil, fmt.Errorf("stdout pipe: %w", err)
	}
	cmd := exec.Command(exe)
	cmd.Env = append(append(os.Environ(), roleEnv+"="+name), env...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = stdinR, stdoutW, os.Stderr
	err = cmd.Start()
	// The child has its own copies of these ends now.
	stdinR.Close()
	stdoutW.Close()
	if err != nil {
		stdinW.Close()
		stdoutR.Close()
		return nil, fmt.Errorf("start %s: %w", exe, err)
	}
	c := &Child{Cmd: cmd, name: name, stdin: stdinW, exited: make(chan struct{}), said: make(chan string, 1)}
	go func() {
		c.waitErr = cmd.Wait()
		close(c.exited)
	}()
	if c.Ready, err = c.awaitReady(ctx, stdoutR); err != nil {
		_ = c.Stop()
		return nil, fmt.Errorf("start %s process: %w", name, err)
	}
	return c, nil
}

// awaitReady reads the child's ready line from stdout and returns what it
// announced. It keeps reading stdout after that line, so that the child
// can never block writing to it, and keeps it for Said; the read ends
// when the child exits.
func (c *Child) awaitReady(ctx context.Context, stdout *os.File) (string, error) {
	ready := make(chan string, 1)
	go func() {
		defer stdout.Close()
		r := bufio.NewReader(stdout)
		line, _ := r.ReadString('\n')
		ready <- line
		rest, _ := io.ReadAll(r)
		c.said <- strings.TrimSpace(string(rest))
	}()
	timer := time.NewTimer(roleReadyTimeout)
	defer timer.Stop()
	select {
	case line := <-ready:
		detail, ok := strings.CutPrefix(strings.TrimSpace(line), "ready")
		if !ok {
			return "", fmt.Errorf("unexpected first line %q", line)
		}
		return strings.TrimSpace(detail), nil
	case <-timer.C:
		return "", fmt.Errorf("no ready line after %v", roleReadyTimeout)
	case <-ctx.Done():
		return "", ctx.Err()
	}
}

// PID is the child's process id, for its CPU and memory figures.
func (c *Child) PID() int { return c.Cmd.Process.Pid }

// Stop asks the child to stop (SIGTERM), kills it if it has not exited
// within 10 seconds, and waits for it. It is safe to call twice; the
// second call returns the first one's result.
func (c *Child) Stop() error {
	c.stopOnce.Do(func() {
		_ = c.Cmd.Process.Signal(syscall.SIGTERM)
		timer := time.NewTimer(10 * time.Second)
		defer timer.Stop()
		select {
		case <-c.exited:
			c.stopErr = c.waitErr
		case <-timer.C:
			_ = c.Cmd.Process.Kill()
			<-c.exited
			c.stopErr = errors.New("did not stop within 10s after SIGTERM; killed")
		}
		c.stdin.Close()
		if c.stopErr != nil {
			c.stopErr = fmt.Errorf("stop %s process: %w", c.name, c.stopErr)
		}
	})
	return c.stopErr
}

// Said is what the child wrote after its ready line: its role's last
// words. It waits for the child's stdout to close; call it after Stop.
func (c *Child) Said() string {
	s := <-c.said
	c.said <- s
	return s
}
