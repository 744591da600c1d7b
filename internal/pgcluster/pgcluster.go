// Package pgcluster starts and stops a private PostgreSQL cluster from the
// server binaries installed on the machine. It backs the test harness (a
// throwaway cluster per test process) and the development mode of the
// daemon (a cluster kept under a git-ignored folder). It is not meant for
// production, where QUEEN_PG_URL names a managed server.
//
// It also plays a replicated set on one machine for the tests of
// failover, the way a failover manager runs one: [StartPrimary] and
// [StartStandby] (pg_basebackup, streaming, synchronous with
// [Cluster.SetSync] or not), [Cluster.Crash] or [Cluster.Kill] of the
// primary, [Cluster.Promote] of a standby, [Cluster.Rewind] of the old
// primary to follow the new one, and [MultiHostURL] for clients that
// follow the primary. The state helpers ([Cluster.WaitCaughtUp],
// [Cluster.SystemID], [Cluster.Timeline]…) let tests wait for
// replication instead of sleeping.
package pgcluster

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
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

	"github.com/queengate/queengate/internal/freeport"
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
	// Name is the server's name as a standby: the application_name it
	// streams under, which synchronous_standby_names refers to. Default
	// "node_<port>".
	Name string
	// DataChecksums makes initdb enable data checksums (pg_rewind needs
	// them or wal_log_hints; see [StartPrimary]). Ignored for an existing
	// data directory.
	DataChecksums bool
}

// Cluster is a postmaster started by Start, StartPrimary or StartStandby.
// It keeps its folder, port and settings when stopped, so it can be
// started again ([Cluster.Restart]) or re-attached to another primary
// ([Cluster.Rewind]).
type Cluster struct {
	dir, bin string
	port     int
	name     string
	cred     *syscall.Credential

	mu       sync.Mutex
	settings map[string]string // the postmaster's -c settings
	proc     *process          // the last postmaster started
}

// process is one run of the postmaster.
type process struct {
	cmd      *exec.Cmd
	dir      string // the cluster's folder, where its children run
	done     chan struct{}
	waitErr  error
	stopOnce sync.Once
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
	c, err := newCluster(opts)
	if err != nil {
		return nil, err
	}
	if err := makeServerDir(c.dir, c.cred); err != nil {
		return nil, err
	}
	if pid := runningPostmaster(c.dataDir()); pid != 0 {
		return nil, &InUseError{Dir: c.dir, PID: pid}
	}
	if err := initData(ctx, c.bin, c.dir, c.dataDir(), c.cred, opts.DataChecksums); err != nil {
		return nil, err
	}
	if err := c.runOnFreePort(ctx, opts.Port == 0); err != nil {
		return nil, err
	}
	return c, nil
}

// InUseError is Start's error for a data directory a running server
// already uses (its postmaster.pid names a live process): PostgreSQL would
// refuse it with a log dump about the lock file.
type InUseError struct {
	Dir string // the cluster's folder
	PID int    // the running postmaster
}

func (e *InUseError) Error() string {
	return fmt.Sprintf("pgcluster: %s is in use by a running PostgreSQL (pid %d)", e.Dir, e.PID)
}

// runningPostmaster is the pid in dataDir's postmaster.pid when that
// process is alive, else 0 (no file, or one a crash left behind).
func runningPostmaster(dataDir string) int {
	b, err := os.ReadFile(filepath.Join(dataDir, "postmaster.pid"))
	if err != nil {
		return 0
	}
	first, _, _ := strings.Cut(string(b), "\n")
	pid, err := strconv.Atoi(strings.TrimSpace(first))
	if err != nil || pid <= 0 {
		return 0
	}
	if err := syscall.Kill(pid, 0); err != nil && !errors.Is(err, syscall.EPERM) {
		return 0
	}
	return pid
}

// newCluster resolves what a cluster needs before anything is started:
// the binaries, the absolute folder, the user and the port.
func newCluster(opts Options) (*Cluster, error) {
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
	port := opts.Port
	if port == 0 {
		if port, err = freeport.TCP(); err != nil {
			return nil, err
		}
	}
	Track(dir)
	name := cmp.Or(opts.Name, fmt.Sprintf("node_%d", port))
	settings := make(map[string]string, len(opts.Settings))
	maps.Copy(settings, opts.Settings)
	return &Cluster{dir: dir, bin: bin, port: port, name: name, cred: cred, settings: settings}, nil
}

func (c *Cluster) dataDir() string { return filepath.Join(c.dir, "data") }

// run starts a postmaster on the data directory and waits until it
// accepts connections.
func (c *Cluster) run(ctx context.Context) error {
	c.mu.Lock()
	args := postgresArgs(c.dir, c.dataDir(), c.port, c.settings)
	c.mu.Unlock()
	logFile, err := os.OpenFile(filepath.Join(c.dir, "postgres.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	cmd := exec.Command(filepath.Join(c.bin, "postgres"), args...)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.Dir = c.dir
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: c.cred, Pdeathsig: syscall.SIGINT, Setpgid: true}
	if err := cmd.Start(); err != nil {
		logFile.Close()
		return fmt.Errorf("pgcluster: start postgres: %w", err)
	}
	p := &process{cmd: cmd, dir: c.dir, done: make(chan struct{})}
	go func() {
		p.waitErr = cmd.Wait()
		logFile.Close()
		close(p.done)
	}()
	c.mu.Lock()
	c.proc = p
	c.mu.Unlock()
	if err := c.waitReady(ctx, p); err != nil {
		p.stop(syscall.SIGINT)
		return err
	}
	return nil
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
func initData(ctx context.Context, bin, dir, dataDir string, cred *syscall.Credential, checksums bool) error {
	if _, err := os.Stat(filepath.Join(dataDir, "PG_VERSION")); errors.Is(err, os.ErrNotExist) {
		args := []string{"-D", dataDir, "-U", "postgres", "--auth=trust", "--encoding=UTF8", "--no-instructions"}
		if checksums {
			args = append(args, "--data-checksums")
		}
		initdb := exec.CommandContext(ctx, filepath.Join(bin, "initdb"), args...)
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

// Name is the server's name as a standby (its application_name).
func (c *Cluster) Name() string { return c.name }

// Stop shuts the server down (fast shutdown) and waits for it to exit. It is
// safe to call more than once.
func (c *Cluster) Stop() { c.current().stop(syscall.SIGINT) }

// Crash stops the server the way a crash would (immediate shutdown: no
// checkpoint, connections dropped; the next start runs crash recovery)
// and waits for it to exit. It works on a primary and on a standby.
func (c *Cluster) Crash() { c.current().stop(syscall.SIGQUIT) }

// Kill is kill -9 of the postmaster and all its children, as when the
// host dies: nothing of the server runs any more, not even the backends
// serving open connections. It waits for the postmaster to exit.
func (c *Cluster) Kill() {
	p := c.current()
	if p == nil {
		return
	}
	p.stopOnce.Do(func() {
		// Its children at once too: they are not in its process group
		// (procs.go), and would serve on until they noticed its death.
		_ = p.cmd.Process.Kill()
		killAll(p.dir)
		<-p.done
	})
}

// Restart stops the server if it runs (fast shutdown) and starts it again
// with the same folder, port and settings; after Crash or Kill the start
// runs crash recovery. A standby comes back as a standby.
func (c *Cluster) Restart(ctx context.Context) error {
	c.Stop()
	return c.run(ctx)
}

func (c *Cluster) current() *process {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.proc
}

// stop sends sig to the postmaster once and waits for it to exit (after
// 30 seconds, killing it). Stopped processes of the server (a test froze
// them) are resumed first, since the shutdown waits for them, and
// whatever of the server outlives its postmaster is killed.
func (p *process) stop(sig syscall.Signal) {
	if p == nil { // never started
		return
	}
	p.stopOnce.Do(func() {
		continueAll(p.dir)
		_ = p.cmd.Process.Signal(sig)
		select {
		case <-p.done:
		case <-time.After(30 * time.Second):
			_ = p.cmd.Process.Kill()
			<-p.done
		}
		killAll(p.dir)
	})
}

func (c *Cluster) waitReady(ctx context.Context, p *process) error {
	ctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	for {
		served, err := c.servedDataDir(ctx)
		if err == nil && served == c.dataDir() {
			return nil
		}
		if err == nil {
			// Another server took the port between freeport and our
			// bind: ours will exit, and connecting on would wrongly
			// answer for it.
			err = &PortTakenError{Port: c.port, By: served}
		}
		select {
		case <-p.done:
			var taken *PortTakenError
			if errors.As(err, &taken) {
				return taken
			}
			log, _ := os.ReadFile(filepath.Join(c.dir, "postgres.log"))
			return fmt.Errorf("pgcluster: postgres exited during start-up: %v\n%s", p.waitErr, tail(log, 2000))
		case <-ctx.Done():
			return fmt.Errorf("pgcluster: server not ready: %w (last error: %v)", ctx.Err(), err)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// servedDataDir is the data directory of the server answering on c's
// port.
func (c *Cluster) servedDataDir(ctx context.Context) (string, error) {
	conn, err := pgx.Connect(ctx, c.URL("postgres"))
	if err != nil {
		return "", err
	}
	defer conn.Close(ctx)
	var dir string
	err = conn.QueryRow(ctx, "SELECT current_setting('data_directory')").Scan(&dir)
	return dir, err
}

// PortTakenError is a start's error when another server answered on the
// cluster's port and ours could not bind it.
type PortTakenError struct {
	Port int
	By   string // the other server's data directory
}

func (e *PortTakenError) Error() string {
	return fmt.Sprintf("pgcluster: port %d is taken by the server of %s", e.Port, e.By)
}

// runOnFreePort is a first start: when the port was picked here
// (Options.Port 0) and another server took it meanwhile, it tries again
// on a new one. Restarts keep their port: URLs name it.
func (c *Cluster) runOnFreePort(ctx context.Context, picked bool) error {
	for attempt := 1; ; attempt++ {
		err := c.run(ctx)
		var taken *PortTakenError
		if !picked || !errors.As(err, &taken) || attempt == 3 {
			return err
		}
		port, err := freeport.TCP()
		if err != nil {
			return err
		}
		c.port = port
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
