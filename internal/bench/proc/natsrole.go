package proc

import (
	"bufio"
	"context"
	"encoding/json"
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

	"github.com/nats-io/nats-server/v2/server"
)

// natsDirEnv names the JetStream store directory of the nats-server role;
// without it, JetStream is off.
const natsDirEnv = "QUEENBENCH_NATS_DIR"

// natsMappingsEnv holds the nats-server role's subject mappings, as a JSON
// object of source to destination (the gateways' routing shards).
const natsMappingsEnv = "QUEENBENCH_NATS_MAPPINGS"

// natsReadyTimeout bounds how long the nats-server role may take to start
// listening (JetStream recovers its store first).
const natsReadyTimeout = 30 * time.Second

// runNATSServerRole is the nats-server role of queenbench: it runs a
// JetStream server in this process, so that the benchmark can measure the
// server's CPU and memory apart from the load generator's. It prints
// "ready <client URL>" on stdout once the server accepts connections, and
// shuts the server down on SIGTERM or SIGINT, or when stdin reaches end of
// file: the parent holds the other end of stdin, so a parent that dies
// without stopping it (a crash, a killed test binary) takes it along instead
// of leaking it.
func runNATSServerRole() error {
	dir := os.Getenv(natsDirEnv)
	ns, err := server.NewServer(&server.Options{
		ServerName: "queenbench-nats",
		Host:       "127.0.0.1",
		Port:       -1,
		JetStream:  dir != "",
		StoreDir:   dir,
		MaxPayload: 8 << 20,
		NoSigs:     true,
		NoLog:      true,
	})
	if err != nil {
		return fmt.Errorf("new server: %w", err)
	}
	if m := os.Getenv(natsMappingsEnv); m != "" {
		var mappings map[string]string
		if err := json.Unmarshal([]byte(m), &mappings); err != nil {
			return fmt.Errorf("%s: %w", natsMappingsEnv, err)
		}
		for src, dest := range mappings {
			if err := ns.GlobalAccount().AddMapping(src, dest); err != nil {
				return fmt.Errorf("map %s: %w", src, err)
			}
		}
	}
	// Listen for signals before announcing readiness, so a Stop right after
	// the ready line is handled rather than killing the process outright.
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	go ns.Start()
	if !ns.ReadyForConnections(natsReadyTimeout) {
		ns.Shutdown()
		return fmt.Errorf("not ready for connections after %v", natsReadyTimeout)
	}
	if _, err := fmt.Fprintf(os.Stdout, "ready %s\n", ns.ClientURL()); err != nil {
		ns.Shutdown()
		return fmt.Errorf("announce readiness: %w", err)
	}
	parentGone := make(chan struct{})
	go func() {
		_, _ = io.Copy(io.Discard, os.Stdin)
		close(parentGone)
	}()
	select {
	case <-ctx.Done():
	case <-parentGone:
	}
	ns.Shutdown()
	ns.WaitForShutdown()
	return nil
}

// NATSServer is a nats-server role running as a child process.
type NATSServer struct {
	// URL is the server's client URL.
	URL string
	Cmd *exec.Cmd

	// stdin is the parent's end of the child's stdin; the child stops when
	// it is closed (see runNATSServerRole).
	stdin    *os.File
	exited   chan struct{} // closed once Cmd.Wait has returned
	waitErr  error         // Cmd.Wait's result, readable once exited is closed
	stopOnce sync.Once
	stopErr  error
}

// StartNATSServer re-executes queenbench in the nats-server role with
// its JetStream store in dir (none: JetStream off) and the given subject
// mappings, and waits for it to accept connections. ctx bounds the start
// only; the process runs until Stop.
func StartNATSServer(ctx context.Context, dir string, mappings map[string]string) (*NATSServer, error) {
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
	m, err := json.Marshal(mappings)
	if err != nil {
		return nil, err
	}
	cmd.Env = append(os.Environ(), roleEnv+"="+roleNATSServer, natsDirEnv+"="+dir, natsMappingsEnv+"="+string(m))
	cmd.Stdin = stdinR
	cmd.Stdout = stdoutW
	cmd.Stderr = os.Stderr
	err = cmd.Start()
	// The child has its own copies of these ends now.
	stdinR.Close()
	stdoutW.Close()
	if err != nil {
		stdinW.Close()
		stdoutR.Close()
		return nil, fmt.Errorf("start %s: %w", exe, err)
	}
	p := &NATSServer{Cmd: cmd, stdin: stdinW, exited: make(chan struct{})}
	go func() {
		p.waitErr = cmd.Wait()
		close(p.exited)
	}()

	url, err := awaitReadyLine(ctx, stdoutR)
	if err != nil {
		_ = p.Stop()
		return nil, fmt.Errorf("start nats-server process: %w", err)
	}
	p.URL = url
	return p, nil
}

// awaitReadyLine reads the child's ready line from stdout and returns the
// URL it gives. It keeps draining stdout after that line so that the child
// can never block writing to it; the read ends when the child exits.
func awaitReadyLine(ctx context.Context, stdout *os.File) (string, error) {
	ready := make(chan string, 1)
	go func() {
		defer stdout.Close()
		r := bufio.NewReader(stdout)
		line, _ := r.ReadString('\n')
		ready <- line
		_, _ = io.Copy(io.Discard, r)
	}()
	timer := time.NewTimer(natsReadyTimeout)
	defer timer.Stop()
	select {
	case line := <-ready:
		url, ok := strings.CutPrefix(strings.TrimSpace(line), "ready ")
		if !ok {
			return "", fmt.Errorf("unexpected first line %q", line)
		}
		return url, nil
	case <-timer.C:
		return "", fmt.Errorf("no ready line after %v", natsReadyTimeout)
	case <-ctx.Done():
		return "", ctx.Err()
	}
}

// PID is the server process's id, for its CPU and memory figures.
func (p *NATSServer) PID() int { return p.Cmd.Process.Pid }

// Stop asks the server to shut down (SIGTERM), kills it if it has not
// exited within 10 seconds, and waits for it. It is safe to call twice; the
// second call returns the first one's result.
func (p *NATSServer) Stop() error {
	p.stopOnce.Do(func() {
		_ = p.Cmd.Process.Signal(syscall.SIGTERM)
		timer := time.NewTimer(10 * time.Second)
		defer timer.Stop()
		select {
		case <-p.exited:
			p.stopErr = p.waitErr
		case <-timer.C:
			_ = p.Cmd.Process.Kill()
			<-p.exited
			p.stopErr = errors.New("did not stop within 10s after SIGTERM; killed")
		}
		p.stdin.Close()
		if p.stopErr != nil {
			p.stopErr = fmt.Errorf("stop nats-server process: %w", p.stopErr)
		}
	})
	return p.stopErr
}

// roleEnv names the role a re-executed queenbench plays; roleNATSServer
// is the nats-server role (runNATSServerRole).
const (
	roleEnv        = "QUEENBENCH_ROLE"
	roleNATSServer = "nats-server"
)

// PlayRole plays the role this process was re-executed in (StartNATSServer
// re-executes the running binary), if any, and then exits; else it
// returns at once. main calls it first, and so do the tests of packages
// that start a nats-server, whose test binary is the one re-executed.
func PlayRole() {
	if os.Getenv(roleEnv) != roleNATSServer {
		return
	}
	if err := runNATSServerRole(); err != nil {
		fmt.Fprintln(os.Stderr, "queenbench nats-server:", err)
		os.Exit(1)
	}
	os.Exit(0)
}
