// Package pgcluster starts and stops a private PostgreSQL cluster from the
// server binaries installed on the machine. It backs the test harness (a
// throwaway cluster per test process) and the development mode of the
// daemon (a cluster kept under a git-ignored folder). It is not meant for
// production, where QUEEN_PG_URL names a managed server.
package pgcluster

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
)

// ErrNoBinaries is returned when no PostgreSQL server binaries can be found.
var ErrNoBinaries = errors.New("pgcluster: no PostgreSQL server binaries (initdb, postgres) found; " +
	"install them (Debian: apt-get install postgresql-15), set QUEEN_PG_BIN to their folder, " +
	"or point the tests at a running server with QUEEN_TEST_PG_URL")

// Options configure a cluster.
type Options struct {
	// Dir holds the data directory (Dir/data), the socket and the log
	// (Dir/postgres.log). An existing data directory is reused.
	Dir string
	// Port to listen on, on 127.0.0.1. 0 picks a free port.
	Port int
	// Settings are extra server settings (name -> value), for example
	// fsync=off for tests.
	Settings map[string]string
}

// Cluster is a running postmaster started by Start.
type Cluster struct {
	dir  string
	port int
	cmd  *exec.Cmd
	done chan struct{}

	stopOnce sync.Once
	waitErr  error
}

// BinDir finds the folder with the PostgreSQL server binaries: QUEEN_PG_BIN,
// then `pg_config --bindir`, then the newest /usr/lib/postgresql/*/bin.
func BinDir() (string, error) {
	var candidates []string
	if d := os.Getenv("QUEEN_PG_BIN"); d != "" {
		candidates = append(candidates, d)
	}
	if out, err := exec.Command("pg_config", "--bindir").Output(); err == nil {
		candidates = append(candidates, strings.TrimSpace(string(out)))
	}
	versions, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	sort.Slice(versions, func(i, j int) bool { return majorOf(versions[i]) > majorOf(versions[j]) })
	candidates = append(candidates, versions...)
	candidates = append(candidates, "/usr/local/pgsql/bin")
	for _, d := range candidates {
		if isExecutable(filepath.Join(d, "initdb")) && isExecutable(filepath.Join(d, "postgres")) {
			return d, nil
		}
	}
	return "", ErrNoBinaries
}

func majorOf(binDir string) int {
	n, _ := strconv.Atoi(filepath.Base(filepath.Dir(binDir)))
	return n
}

func isExecutable(path string) bool {
	st, err := os.Stat(path)
	return err == nil && !st.IsDir() && st.Mode()&0o111 != 0
}

// Start initialises Dir/data if it is empty and starts a postmaster on it.
// When the caller is root the server runs as the "postgres" user, because
// PostgreSQL refuses to run as root. The server is a child process that is
// sent SIGINT (fast shutdown) if this process dies, so a crashed test run
// does not leave clusters behind.
func Start(ctx context.Context, opts Options) (*Cluster, error) {
	bin, err := BinDir()
	if err != nil {
		return nil, err
	}
	dir, err := filepath.Abs(opts.Dir)
	if err != nil {
		return nil, err
	}
	cred, err := serverCredential()
	if err != nil {
		return nil, err
	}
	if err := makeServerDir(dir, cred); err != nil {
		return nil, err
	}
	dataDir := filepath.Join(dir, "data")
	if err := initData(ctx, bin, dir, dataDir, cred); err != nil {
		return nil, err
	}

	port := opts.Port
	if port == 0 {
		if port, err = freePort(); err != nil {
			return nil, err
		}
	}
	args := postgresArgs(dir, dataDir, port, opts.Settings)
	logFile, err := os.OpenFile(filepath.Join(dir, "postgres.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(filepath.Join(bin, "postgres"), args...)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.Dir = dir
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred, Pdeathsig: syscall.SIGINT, Setpgid: true}
	if err := cmd.Start(); err != nil {
		logFile.Close()
		return nil, fmt.Errorf("pgcluster: start postgres: %w", err)
	}
	c := &Cluster{dir: dir, port: port, cmd: cmd, done: make(chan struct{})}
	go func() {
		c.waitErr = cmd.Wait()
		logFile.Close()
		close(c.done)
	}()
	if err := c.waitReady(ctx); err != nil {
		c.Stop()
		return nil, err
	}
	return c, nil
}

// makeServerDir makes dir, private to the server's user (cred; nil: this
// process's user). Its parents must be traversable by that user.
func makeServerDir(dir string, cred *syscall.Credential) error {
	if err := os.MkdirAll(filepath.Dir(dir), 0o755); err != nil {
		return err
	}
	if err := os.Mkdir(dir, 0o700); err != nil && !errors.Is(err, os.ErrExist) {
		return err
	}
	if cred != nil {
		if err := os.Chown(dir, int(cred.Uid), int(cred.Gid)); err != nil {
			return err
		}
	}
	return nil
}

// initData runs initdb on dataDir unless it already holds a cluster.
func initData(ctx context.Context, bin, dir, dataDir string, cred *syscall.Credential) error {
	if _, err := os.Stat(filepath.Join(dataDir, "PG_VERSION")); errors.Is(err, os.ErrNotExist) {
		initdb := exec.CommandContext(ctx, filepath.Join(bin, "initdb"),
			"-D", dataDir, "-U", "postgres", "--auth=trust", "--encoding=UTF8", "--no-instructions")
		initdb.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
		initdb.Dir = dir
		if out, err := initdb.CombinedOutput(); err != nil {
			return fmt.Errorf("pgcluster: initdb: %w: %s", err, out)
		}
	}
	return nil
}

// postgresArgs is the postmaster's command line: TCP on 127.0.0.1 only,
// its socket in dir, and settings in name order (a stable command line).
func postgresArgs(dir, dataDir string, port int, settings map[string]string) []string {
	args := []string{"-D", dataDir, "-p", strconv.Itoa(port),
		"-c", "listen_addresses=127.0.0.1",
		"-c", "unix_socket_directories=" + dir,
	}
	names := make([]string, 0, len(settings))
	for name := range settings {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		args = append(args, "-c", name+"="+settings[name])
	}
	return args
}

// URL is a connection string for the superuser on the given database.
func (c *Cluster) URL(database string) string {
	return fmt.Sprintf("postgres://postgres@127.0.0.1:%d/%s?sslmode=disable", c.port, database)
}

// Port is the TCP port the server listens on (127.0.0.1).
func (c *Cluster) Port() int { return c.port }

// Dir is the cluster's folder (data, socket, log).
func (c *Cluster) Dir() string { return c.dir }

// Stop shuts the server down (fast shutdown) and waits for it to exit. It is
// safe to call more than once.
func (c *Cluster) Stop() {
	c.stopOnce.Do(func() {
		_ = c.cmd.Process.Signal(syscall.SIGINT)
		select {
		case <-c.done:
		case <-time.After(30 * time.Second):
			_ = c.cmd.Process.Kill()
			<-c.done
		}
	})
}

// Crash stops the server the way a crash would (immediate shutdown: no
// checkpoint, connections dropped; the next start runs crash recovery)
// and waits for it to exit.
func (c *Cluster) Crash() {
	c.stopOnce.Do(func() {
		_ = c.cmd.Process.Signal(syscall.SIGQUIT)
		<-c.done
	})
}

func (c *Cluster) waitReady(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	for {
		conn, err := pgx.Connect(ctx, c.URL("postgres"))
		if err == nil {
			conn.Close(ctx)
			return nil
		}
		select {
		case <-c.done:
			log, _ := os.ReadFile(filepath.Join(c.dir, "postgres.log"))
			return fmt.Errorf("pgcluster: postgres exited during start-up: %v\n%s", c.waitErr, tail(log, 2000))
		case <-ctx.Done():
			return fmt.Errorf("pgcluster: server not ready: %w (last error: %v)", ctx.Err(), err)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

func tail(b []byte, n int) []byte {
	if len(b) > n {
		return b[len(b)-n:]
	}
	return b
}

// serverCredential is nil unless we are root, in which case the server runs
// as the "postgres" user.
func serverCredential() (*syscall.Credential, error) {
	if os.Geteuid() != 0 {
		return nil, nil
	}
	u, err := user.Lookup("postgres")
	if err != nil {
		return nil, fmt.Errorf("pgcluster: running as root needs a \"postgres\" user to run the server as: %w", err)
	}
	uid, _ := strconv.ParseUint(u.Uid, 10, 32)
	gid, _ := strconv.ParseUint(u.Gid, 10, 32)
	return &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid), NoSetGroups: true}, nil
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}
