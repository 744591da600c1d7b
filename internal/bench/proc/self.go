package proc

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/queengate/queengate/internal/bench"
	"github.com/queengate/queengate/internal/freeport"
	"github.com/queengate/queengate/internal/pgadmin"
	"github.com/queengate/queengate/internal/pgcluster"
	"github.com/queengate/queengate/routing"
)

// Self is what --self starts: a PostgreSQL (unless one is given), a
// nats-server mapping pushes onto the gateways' routing shards, and a fleet
// of queengate processes, resized per target (queengate@3 runs three).
type Self struct {
	dir     string
	cluster *pgcluster.Cluster
	PGURL   string
	NATSURL string
	nats    *NATSServer
	bin     string
	prefix  string
	w       bench.Workload
	started int // gateways ever started, to name their logs
	size    int // the fleet's size as last resized
	// gateways is the live fleet, oldest first.
	gateways []*gatewayProcess

	// With w.Replication, cluster is the primary and standby its standby
	// (nil for ReplicationNone); postmasters are their postmasters'
	// process ids, for PostgresCPU.
	standby     *pgcluster.Cluster
	postmasters [2]int
	// ReadURL is the gateways' --pg-read-url with a standby: a
	// multi-host URL asking for a standby, as a deployment reading from
	// standbys gives it; "" otherwise.
	ReadURL string
}

type gatewayProcess struct {
	cmd       *exec.Cmd
	adminAddr string
	exited    chan struct{}
}

// benchPGSettings make a disposable cluster comparable to what the peers
// get: crash-safe (fsync on) but, like JetStream's default file store,
// without waiting for the disk on every commit.
var benchPGSettings = map[string]string{
	"synchronous_commit": "off",
	"shared_buffers":     "1GB",
	"max_connections":    "300",
	"max_wal_size":       "4GB",
	// Every automatic vacuum and analyze logs the CPU it used: queenbench
	// adds it up (the "autovac" column).
	"log_autovacuum_min_duration": "0",
}

// StartSelf starts what --self runs for workload w: PostgreSQL unless
// pgURL is given, the nats-server, and the fleet of gateways (gatewayBin,
// else built from this repository) on the subject prefix.
func StartSelf(ctx context.Context, w bench.Workload, pgURL, gatewayBin, prefix string, log func(string, ...any)) (*Self, error) {
	dir, err := os.MkdirTemp("", "queenbench-")
	if err != nil {
		return nil, err
	}
	// The PostgreSQL server may run as another user (root cannot run it):
	// it must be able to reach its folder below this one.
	if err := os.Chmod(dir, 0o755); err != nil {
		return nil, err
	}
	env := &Self{dir: dir, PGURL: pgURL, prefix: prefix, w: w, bin: gatewayBin}
	ok := false
	defer func() {
		if !ok {
			env.Stop()
		}
	}()
	if env.PGURL == "" {
		if err := env.startPostgres(ctx, log); err != nil {
			return nil, err
		}
	}
	if env.bin == "" {
		env.bin = filepath.Join(dir, "queengate")
		log("building queengate")
		out, err := exec.CommandContext(ctx, "go", "build", "-o", env.bin, "github.com/queengate/queengate/cmd/queengate").CombinedOutput()
		if err != nil {
			return nil, fmt.Errorf("build queengate (run queenbench from the repository, or pass --gateway-bin): %v\n%s", err, out)
		}
	}
	// The NATS server runs apart from the gateways, so that any of them
	// can be stopped or killed; its CPU counts as the target's, as the
	// embedded server's would.
	mappings := routing.ShardMappings(prefix, routing.DefaultShards)
	maps.Copy(mappings, routing.PopMappings(prefix, routing.DefaultShards))
	env.nats, err = StartNATSServer(ctx, "", mappings)
	if err != nil {
		return nil, err
	}
	env.NATSURL = env.nats.URL
	if err := env.Resize(ctx, max(w.Gateways, 1)); err != nil {
		return nil, err
	}
	ok = true
	return env, nil
}

// startPostgres starts the PostgreSQL of e.w.Replication in e.dir, with
// the database "bench", and sets e.PGURL.
func (e *Self) startPostgres(ctx context.Context, log func(string, ...any)) error {
	if e.w.Replication == "" {
		log("starting a PostgreSQL cluster in %s", e.dir)
		var err error
		if e.cluster, err = pgcluster.Start(ctx, pgcluster.Options{Dir: filepath.Join(e.dir, "pg"), Settings: benchPGSettings}); err != nil {
			return err
		}
		if err := pgadmin.CreateDatabase(ctx, e.cluster.URL("postgres"), "bench", ""); err != nil {
			return err
		}
		e.PGURL = e.cluster.URL("bench")
		e.postmasters[0], err = PostmasterPID(ctx, e.cluster.URL("postgres"))
		return err
	}
	log("starting a PostgreSQL primary in %s, replication %s", e.dir, e.w.Replication)
	var err error
	e.cluster, e.standby, err = startReplicated(ctx, e.dir, e.w)
	if err != nil {
		return err
	}
	// Created on the primary, the database reaches the standby by WAL.
	if err := pgadmin.CreateDatabase(ctx, e.cluster.URL("postgres"), "bench", ""); err != nil {
		return err
	}
	nodes := []*pgcluster.Cluster{e.cluster}
	if e.standby != nil {
		nodes = append(nodes, e.standby)
	}
	// The gateways find the primary as they would behind a failover
	// manager: a multi-host URL asking for the node that takes writes.
	e.PGURL = pgcluster.MultiHostURL("bench", "read-write", nodes...)
	if e.standby != nil {
		// The gateways' read pool connects to the database there.
		if err := e.standby.WaitCaughtUp(ctx, e.cluster); err != nil {
			return err
		}
		e.ReadURL = pgcluster.MultiHostURL("bench", "standby", e.standby)
	}
	for i, c := range nodes {
		if e.postmasters[i], err = PostmasterPID(ctx, c.URL("postgres")); err != nil {
			return err
		}
	}
	return nil
}

// startReplicated starts, for w.Replication, a primary in dir/pg with
// the benchmark's settings but synchronous_commit on (remote_apply for
// that mode) and, but for ReplicationNone, a standby in dir/standby on
// this machine, synchronous for the synchronous modes. The single
// server's synchronous_commit=off would make the modes equal: a commit
// that waits for nothing does not wait for a standby either. Every mode
// runs the same primary (data checksums, WAL for replicas), so they
// differ only in the standby.
func startReplicated(ctx context.Context, dir string, w bench.Workload) (primary, standby *pgcluster.Cluster, err error) {
	// StartPrimary leaves synchronous_commit to SetSync, which sets it.
	primary, err = pgcluster.StartPrimary(ctx, pgcluster.Options{Dir: filepath.Join(dir, "pg"), Name: "primary", Settings: benchPGSettings})
	if err != nil {
		return nil, nil, err
	}
	commit := w.SynchronousCommit()
	synchronous := w.Replication == bench.ReplicationSync || w.Replication == bench.ReplicationRemoteApply
	if !synchronous {
		// No standby named: commits wait for the primary's own flush.
		if err := primary.SetSync(ctx, commit); err != nil {
			primary.Stop()
			return nil, nil, err
		}
	}
	if w.Replication == bench.ReplicationNone {
		return primary, nil, nil
	}
	standby, err = pgcluster.StartStandby(ctx, primary, pgcluster.StandbyOptions{Dir: filepath.Join(dir, "standby"), Name: "standby",
		Sync: synchronous, Commit: commit})
	if err != nil {
		primary.Stop()
		return nil, nil, err
	}
	return primary, standby, nil
}

// PostmasterPID is the process id of the postmaster serving url, when it
// runs on this machine: the parent of the session's backend.
func PostmasterPID(ctx context.Context, url string) (int, error) {
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		return 0, err
	}
	defer conn.Close(ctx)
	var backend int
	if err := conn.QueryRow(ctx, "SELECT pg_backend_pid()").Scan(&backend); err != nil {
		return 0, err
	}
	st, err := ReadStat(backend)
	if err != nil {
		return 0, fmt.Errorf("PostgreSQL does not run on this machine, or cannot be read: %w", err)
	}
	return st.PPID, nil
}

// PostgresCPU is the CPU seconds the primary's processes and the
// standby's (0 without one) have used so far; ok is false unless
// queenbench runs them.
func (e *Self) PostgresCPU() (primary, standby float64, ok bool) {
	if e.postmasters[0] == 0 {
		return 0, 0, false
	}
	var err error
	if primary, err = TreeCPUSeconds(e.postmasters[0]); err != nil {
		return 0, 0, false
	}
	if e.postmasters[1] != 0 {
		if standby, err = TreeCPUSeconds(e.postmasters[1]); err != nil {
			return 0, 0, false
		}
	}
	return primary, standby, true
}

// Resize makes the fleet n gateways. A fleet of another size is stopped
// (SIGTERM) and started afresh, since each gateway's ingest shards are
// its share of the machine (fleetShards) and fixed at start. A fleet that
// lost a gateway to a kill is topped up.
func (e *Self) Resize(ctx context.Context, n int) error {
	if e.size != n {
		for i := len(e.gateways) - 1; i >= 0; i-- {
			e.gateways[i].stop()
		}
		e.gateways, e.size = nil, n
	}
	for len(e.gateways) < n {
		gw, err := e.startGateway(ctx)
		if err != nil {
			return err
		}
		e.gateways = append(e.gateways, gw)
	}
	return nil
}

// fleetShare is each gateway's share of this machine's cores in a fleet
// of n, as its ingest shards (QUEEN_SHARDS) and Go's GOMAXPROCS: as if
// each had its own machine of that size (one gateway takes one shard per
// core by default). Without it, three gateways on two cores run six
// concurrent bundles where one runs two, and three Go runtimes each spin
// two threads looking for work: the comparison then measures
// oversubscription. The variable in queenbench's own environment
// overrides it.
func fleetShare(env string, n int) string {
	if v := os.Getenv(env); v != "" {
		return v
	}
	return strconv.Itoa(max(1, runtime.NumCPU()/n))
}

// Kill ends gateway i at once (SIGKILL), as a crash would.
func (e *Self) Kill(i int) error {
	if i >= len(e.gateways) {
		return fmt.Errorf("no gateway %d to kill: %d run", i, len(e.gateways))
	}
	g := e.gateways[i]
	e.gateways = append(e.gateways[:i:i], e.gateways[i+1:]...)
	if err := g.cmd.Process.Kill(); err != nil {
		return err
	}
	<-g.exited
	return nil
}

// gatewayEnv is the configuration of a gateway of the fleet, its admin
// HTTP server on adminPort.
func (e *Self) gatewayEnv(adminPort int) []string {
	env := []string{
		"QUEEN_PG_URL=" + e.PGURL,
		"QUEEN_NATS_URL=" + e.NATSURL,
		"QUEEN_SUBJECT_PREFIX=" + e.prefix,
		"QUEEN_HTTP_ADDR=127.0.0.1:" + strconv.Itoa(adminPort),
		"QUEEN_FLUSH_SIZE=" + strconv.Itoa(e.w.FlushSize),
		"QUEEN_FLUSH_LINGER=" + e.w.Linger.String(),
		"QUEEN_MAX_BUFFERED=1000000",
		"QUEEN_SHARDS=" + fleetShare("QUEEN_SHARDS", e.size),
		"GOMAXPROCS=" + fleetShare("GOMAXPROCS", e.size),
		"QUEEN_LOG_LEVEL=warn",
	}
	if e.w.CacheMB > 0 {
		env = append(env, "QUEEN_DEDUP_CACHE_MB="+strconv.Itoa(e.w.CacheMB))
	}
	if e.ReadURL != "" {
		// Reads, explain, message gets and listings go to the standby
		// (pushes and pops stay on the primary), as deployment (c) of
		// docs/operations.md runs them.
		env = append(env, "QUEEN_PG_READ_URL="+e.ReadURL)
	}
	return env
}

// startGateway starts one more gateway and waits until it is ready.
func (e *Self) startGateway(ctx context.Context) (*gatewayProcess, error) {
	adminPort, err := freeport.TCP()
	if err != nil {
		return nil, err
	}
	i := e.started
	e.started++
	cmd := exec.Command(e.bin)
	cmd.Env = append(os.Environ(), e.gatewayEnv(adminPort)...)
	logFile, err := os.Create(filepath.Join(e.dir, fmt.Sprintf("queengate-%d.log", i)))
	if err != nil {
		return nil, err
	}
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGTERM}
	if err := cmd.Start(); err != nil {
		logFile.Close()
		return nil, err
	}
	gw := &gatewayProcess{cmd: cmd, adminAddr: "127.0.0.1:" + strconv.Itoa(adminPort), exited: make(chan struct{})}
	go func() {
		_ = cmd.Wait()
		logFile.Close()
		close(gw.exited)
	}()
	deadline := time.Now().Add(60 * time.Second)
	for {
		resp, err := http.Get("http://" + gw.adminAddr + "/readyz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return gw, nil
			}
		}
		select {
		case <-gw.exited:
			log, _ := os.ReadFile(logFile.Name())
			return nil, fmt.Errorf("queengate %d exited during start-up:\n%s", i, log)
		case <-ctx.Done():
			gw.stop()
			return nil, ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			_ = cmd.Process.Kill()
			<-gw.exited
			return nil, errors.New("queengate not ready within 60 s")
		}
	}
}

// stop ends the gateway gracefully (SIGTERM: it hands its shards over and
// answers what it accepted), killing it after 30 s.
func (g *gatewayProcess) stop() {
	_ = g.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-g.exited:
	case <-time.After(30 * time.Second):
		_ = g.cmd.Process.Kill()
		<-g.exited
	}
}

// AutovacuumCPU is the CPU seconds automatic vacuums and analyzes have
// reported in this cluster's log so far; ok is false when queenbench does
// not run the cluster.
func (e *Self) AutovacuumCPU() (float64, bool) {
	if e.cluster == nil {
		return 0, false
	}
	log, err := os.ReadFile(filepath.Join(e.cluster.Dir(), "postgres.log"))
	if err != nil {
		return 0, false
	}
	return sumAutovacuumCPU(log), true
}

// autovacuumUsage matches the usage PostgreSQL logs for an automatic
// vacuum or analyze: "system usage: CPU: user: 0.50 s, system: 0.01 s".
var autovacuumUsage = regexp.MustCompile(`system usage: CPU: user: ([0-9.]+) s, system: ([0-9.]+) s`)

func sumAutovacuumCPU(log []byte) float64 {
	total := 0.0
	for _, m := range autovacuumUsage.FindAllSubmatch(log, -1) {
		user, _ := strconv.ParseFloat(string(m[1]), 64)
		sys, _ := strconv.ParseFloat(string(m[2]), 64)
		total += user + sys
	}
	return total
}

// AdminAddrs are the gateways' admin HTTP addresses, oldest first.
func (e *Self) AdminAddrs() []string {
	var out []string
	for _, g := range e.gateways {
		out = append(out, g.adminAddr)
	}
	return out
}

// Size is how many gateways run.
func (e *Self) Size() int { return len(e.gateways) }

// Gateway is gateway i's admin HTTP address and process id.
func (e *Self) Gateway(i int) (adminAddr string, pid int) {
	g := e.gateways[i]
	return g.adminAddr, g.cmd.Process.Pid
}

// PIDs are the processes whose CPU is the target's: the NATS server and
// the gateways.
func (e *Self) PIDs() []int {
	return append([]int{e.nats.PID()}, e.GatewayPIDs()...)
}

// NATSPID is the NATS server's process (apart from the gateways: none of
// them embeds one).
func (e *Self) NATSPID() int { return e.nats.PID() }

// GatewayPIDs are the gateways' processes.
func (e *Self) GatewayPIDs() []int {
	var out []int
	for _, g := range e.gateways {
		out = append(out, g.cmd.Process.Pid)
	}
	return out
}

// Stop stops the gateways, the NATS server, then PostgreSQL (the primary
// before its standby, so that no commit waits for a standby gone), and
// removes the folder.
func (e *Self) Stop() {
	for i := len(e.gateways) - 1; i >= 0; i-- {
		e.gateways[i].stop()
	}
	e.gateways = nil
	if e.nats != nil {
		_ = e.nats.Stop()
	}
	if e.cluster != nil {
		e.cluster.Stop()
	}
	if e.standby != nil {
		e.standby.Stop()
	}
	_ = os.RemoveAll(e.dir)
}
