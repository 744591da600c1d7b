package world

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"

	"github.com/queengate/queengate/internal/freeport"
	"github.com/queengate/queengate/internal/pgcluster"
	"github.com/queengate/queengate/internal/tcpproxy"
	"github.com/queengate/queengate/routing"
)

// World is everything the scenario runs and breaks: PostgreSQL behind a
// proxy (or a primary and a standby), a NATS cluster, and the gateways.
type World struct {
	// Queue is the scenario's queue: a failover under asynchronous
	// replication records what the standby held of it.
	Queue     string
	dir       string
	bin       string
	repl      Replication
	pgOpts    pgcluster.Options
	pg        *pgcluster.Cluster // the primary
	standby   *pgcluster.Cluster // with replication
	pgURL     string             // the primary, direct, for setup and the verifier
	gatewayPG string             // the gateways' PostgreSQL URL
	proxy     *tcpproxy.Proxy    // without replication
	failovers []Failover
	nodes     []*NATSNode
	gateways  []*Gateway
	log       func(format string, args ...any)
}

const routingShards = 64

// Start starts PostgreSQL (with repl; behind the proxy without a
// standby), natsNodes NATS servers and gateways queengate processes (the
// binary bin), their data and logs in dir, and waits until the gateways
// serve. log tells of the failovers, and of metrics it could not read.
func Start(ctx context.Context, dir, bin string, natsNodes, gateways int, repl Replication, log func(string, ...any)) (_ *World, err error) {
	w := &World{dir: dir, bin: bin, repl: repl, log: log}
	defer func() {
		if err != nil {
			w.Stop()
		}
	}()
	// PostgreSQL runs as its own user, which must reach its folder.
	if err := os.Chmod(dir, 0o755); err != nil {
		return nil, err
	}
	if repl.Standby {
		err = w.startReplicated(ctx)
	} else {
		err = w.startProxied(ctx)
	}
	if err != nil {
		return nil, err
	}
	if err := w.startNATS(natsNodes); err != nil {
		return nil, err
	}
	for i := range gateways {
		g := &Gateway{w: w, index: i}
		if err := g.start(); err != nil {
			return nil, err
		}
		w.gateways = append(w.gateways, g)
	}
	for _, g := range w.gateways {
		if err := g.waitServing(ctx); err != nil {
			return nil, err
		}
	}
	return w, nil
}

// startProxied starts one PostgreSQL, and the proxy the gateways reach
// it through.
func (w *World) startProxied(ctx context.Context) (err error) {
	w.pgOpts = pgcluster.Options{Dir: filepath.Join(w.dir, "pg"), Settings: map[string]string{"max_connections": "200"}}
	if w.pg, err = pgcluster.Start(ctx, w.pgOpts); err != nil {
		return err
	}
	w.pgOpts.Port = w.pg.Port()
	w.pgURL = w.pg.URL("postgres")
	if w.proxy, err = tcpproxy.Start(net.JoinHostPort("127.0.0.1", strconv.Itoa(w.pg.Port()))); err != nil {
		return err
	}
	u, _ := url.Parse(w.pgURL)
	u.Host = w.proxy.Addr()
	w.gatewayPG = u.String()
	return nil
}

// NATSURLs are the NATS servers' client URLs, comma-separated.
func (w *World) NATSURLs() string {
	urls := make([]string, len(w.nodes))
	for i, n := range w.nodes {
		urls[i] = fmt.Sprintf("nats://127.0.0.1:%d", n.opts.Port)
	}
	return strings.Join(urls, ",")
}

// Dir is the world's folder: PostgreSQL's data and the processes' logs.
func (w *World) Dir() string { return w.dir }

// PGURL is the primary's URL, direct (for setup and the verifier): after
// a failover, the promoted one's.
func (w *World) PGURL() string { return w.pgURL }

// Replication is the PostgreSQL the world runs.
func (w *World) Replication() Replication { return w.repl }

// Gateways are the queengate processes, in the order they were started.
func (w *World) Gateways() []*Gateway { return w.gateways }

// NATSNodes are the servers of the NATS cluster.
func (w *World) NATSNodes() []*NATSNode { return w.nodes }

// Connect is the i-th client's NATS connection: it starts on its own
// server of the cluster and moves to another when that one restarts.
func (w *World) Connect(i int, name string) (*nats.Conn, error) {
	urls := strings.Split(w.NATSURLs(), ",")
	servers := append([]string{urls[i%len(urls)]}, urls...)
	return nats.Connect(strings.Join(servers, ","), nats.DontRandomize(), nats.MaxReconnects(-1),
		nats.ReconnectWait(100*time.Millisecond), nats.Name(name))
}

// Stop ends every process of the world.
func (w *World) Stop() {
	for _, g := range w.gateways {
		if g.cmd != nil {
			g.kill()
		}
	}
	for _, n := range w.nodes {
		n.shutdown()
	}
	if w.proxy != nil {
		w.proxy.Close()
	}
	if w.pg != nil {
		w.pg.Stop()
	}
	if w.standby != nil {
		w.standby.Stop()
	}
}

// PGCrash stops PostgreSQL as a crash would, then starts it again.
func (w *World) PGCrash(ctx context.Context) error {
	w.pg.Crash()
	return w.pgStart(ctx)
}

// PGStop shuts PostgreSQL down cleanly, waits, and starts it again.
func (w *World) PGStop(ctx context.Context, down time.Duration) error {
	w.pg.Stop()
	Sleep(ctx, down)
	return w.pgStart(ctx)
}

func (w *World) pgStart(ctx context.Context) (err error) {
	w.pg, err = pgcluster.Start(context.WithoutCancel(ctx), w.pgOpts)
	return err
}

// PGFreeze stops every byte between the gateways and PostgreSQL for a
// while, then lets them flow again (and, with cut, resets the stalled
// connections, as a long partition ends).
func (w *World) PGFreeze(ctx context.Context, d time.Duration, cut bool) {
	w.proxy.Freeze(tcpproxy.Both)
	Sleep(ctx, d)
	if cut {
		w.proxy.Cut()
	}
	w.proxy.Thaw()
}

// CreateQueue makes the scenario's queue with its window and its
// maxAttempts (0 never dead-letters).
func (w *World) CreateQueue(ctx context.Context, queue string, windowSeconds, maxAttempts int) error {
	conn, err := pgx.Connect(ctx, w.pgURL)
	if err != nil {
		return err
	}
	defer conn.Close(ctx)
	_, err = conn.Exec(ctx, `INSERT INTO queen.queues (name, dedup_window_seconds, max_attempts) VALUES ($1, $2, $3)
		ON CONFLICT (name) DO UPDATE SET dedup_window_seconds = excluded.dedup_window_seconds, max_attempts = excluded.max_attempts`,
		queue, windowSeconds, maxAttempts)
	return err
}

// NATSNode is one server of the NATS cluster; a restart keeps its ports.
type NATSNode struct {
	opts *server.Options
	mu   sync.Mutex
	srv  *server.Server
}

func (w *World) startNATS(n int) error {
	clientPorts, routePorts := make([]int, n), make([]int, n)
	for i := range n {
		var err error
		if clientPorts[i], err = freeport.TCP(); err != nil {
			return err
		}
		if routePorts[i], err = freeport.TCP(); err != nil {
			return err
		}
	}
	for i := range n {
		opts := &server.Options{ServerName: fmt.Sprintf("chaos-nats-%d", i), Host: "127.0.0.1", Port: clientPorts[i],
			NoSigs: true, NoLog: true, MaxPayload: 1 << 20}
		opts.Cluster = server.ClusterOpts{Name: "chaos", Host: "127.0.0.1", Port: routePorts[i]}
		for j := range n {
			if j != i {
				opts.Routes = append(opts.Routes, &url.URL{Scheme: "nats", Host: fmt.Sprintf("127.0.0.1:%d", routePorts[j])})
			}
		}
		node := &NATSNode{opts: opts}
		if err := node.start(); err != nil {
			return err
		}
		w.nodes = append(w.nodes, node)
	}
	return nil
}

func (n *NATSNode) start() error {
	opts := *n.opts
	srv, err := server.NewServer(&opts)
	if err != nil {
		return err
	}
	// Every server maps pushes and named pops onto the routing shards: a
	// producer or a consumer may publish through any of them.
	mappings := routing.ShardMappings("queen", routingShards)
	maps.Copy(mappings, routing.PopMappings("queen", routingShards))
	for src, dest := range mappings {
		if err := srv.GlobalAccount().AddMapping(src, dest); err != nil {
			return err
		}
	}
	go srv.Start()
	if !srv.ReadyForConnections(10 * time.Second) {
		srv.Shutdown()
		return fmt.Errorf("NATS server %s did not start", opts.ServerName)
	}
	n.mu.Lock()
	n.srv = srv
	n.mu.Unlock()
	return nil
}

func (n *NATSNode) shutdown() {
	n.mu.Lock()
	srv := n.srv
	n.srv = nil
	n.mu.Unlock()
	if srv != nil {
		srv.Shutdown()
		srv.WaitForShutdown()
	}
}

// Restart stops the server, waits, and starts it on the same ports.
func (n *NATSNode) Restart(ctx context.Context, down time.Duration) error {
	n.shutdown()
	Sleep(ctx, down)
	return n.start()
}

// Gateway is one queengate process; it can be killed, stopped,
// paused and started again.
type Gateway struct {
	w      *World
	index  int
	mu     sync.Mutex
	cmd    *exec.Cmd
	exited chan struct{}
	admin  string
}

// Index is the gateway's place in Gateways, and in its log's name.
func (g *Gateway) Index() int { return g.index }

func (g *Gateway) start() error {
	port, err := freeport.TCP()
	if err != nil {
		return err
	}
	logFile, err := os.OpenFile(filepath.Join(g.w.dir, fmt.Sprintf("gateway-%d.log", g.index)), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	cmd := exec.Command(g.w.bin)
	cmd.Env = append(environWithoutQueen(),
		"QUEEN_PG_URL="+g.w.gatewayPG,
		"QUEEN_NATS_URL="+g.w.NATSURLs(),
		fmt.Sprintf("QUEEN_HTTP_ADDR=127.0.0.1:%d", port),
		fmt.Sprintf("QUEEN_ROUTING_SHARDS=%d", routingShards),
		"QUEEN_LOG_LEVEL=info",
		"GOMAXPROCS=1", // three gateways share the machine with PostgreSQL and the producers
	)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		logFile.Close()
		return err
	}
	exited := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		logFile.Close()
		close(exited)
	}()
	g.mu.Lock()
	g.cmd, g.exited, g.admin = cmd, exited, fmt.Sprintf("127.0.0.1:%d", port)
	g.mu.Unlock()
	return nil
}

// waitServing waits until the gateway's /readyz answers ready.
func (g *Gateway) waitServing(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	for {
		if ready(ctx, g.admin) {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("gateway %d not ready: %w", g.index, ctx.Err())
		case <-g.exited:
			return fmt.Errorf("gateway %d exited before it was ready (see gateway-%d.log)", g.index, g.index)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

func (g *Gateway) signal(sig syscall.Signal) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.cmd.Process.Signal(sig)
}

// stopWith sends sig and waits for the process to end.
func (g *Gateway) stopWith(sig syscall.Signal) error {
	if err := g.signal(sig); err != nil {
		return err
	}
	select {
	case <-g.exited:
		return nil
	case <-time.After(time.Minute):
		_ = g.signal(syscall.SIGKILL)
		<-g.exited
		return errors.New("did not exit within a minute")
	}
}

func (g *Gateway) kill() {
	g.mu.Lock()
	cmd, exited := g.cmd, g.exited
	g.mu.Unlock()
	if cmd != nil {
		_ = cmd.Process.Signal(syscall.SIGCONT)
		_ = cmd.Process.Kill()
		<-exited
	}
}

// RestartAfter ends the gateway with sig, waits, starts it again and
// waits until it serves.
func (g *Gateway) RestartAfter(ctx context.Context, sig syscall.Signal, down time.Duration) error {
	if err := g.stopWith(sig); err != nil {
		return err
	}
	Sleep(ctx, down)
	if err := g.start(); err != nil {
		return err
	}
	return g.waitServing(ctx)
}

// Pause stops the process (SIGSTOP) for d: alive to the kernel, silent to
// everyone else.
func (g *Gateway) Pause(ctx context.Context, d time.Duration) error {
	if err := g.signal(syscall.SIGSTOP); err != nil {
		return err
	}
	Sleep(ctx, d)
	return g.signal(syscall.SIGCONT)
}

// Sleep waits d, or less if ctx ends: faults, and the clients around
// them, last set times.
func Sleep(ctx context.Context, d time.Duration) {
	select {
	case <-ctx.Done():
	case <-time.After(d):
	}
}

// environWithoutQueen is this process's environment without QUEEN_*
// settings: the gateways get exactly the scenario's.
func environWithoutQueen() []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "QUEEN_") {
			env = append(env, kv)
		}
	}
	return env
}

// ready reports whether a gateway's /readyz answers 200.
func ready(ctx context.Context, admin string) bool {
	ctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+admin+"/readyz", nil)
	if err != nil {
		return false
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return false
	}
	resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}

// GatewayRSS is each gateway's resident memory now, from /proc.
func (w *World) GatewayRSS() []int64 {
	out := make([]int64, len(w.gateways))
	for i, g := range w.gateways {
		g.mu.Lock()
		pid := g.cmd.Process.Pid
		g.mu.Unlock()
		out[i] = procRSS(pid)
	}
	return out
}

func procRSS(pid int) int64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(rest), "kB")), 10, 64)
			return kb << 10
		}
	}
	return 0
}
