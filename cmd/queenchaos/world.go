package main

import (
	"context"
	"errors"
	"fmt"
	"net"
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

	"github.com/queengate/queengate/internal/pgcluster"
	"github.com/queengate/queengate/internal/tcpproxy"
	"github.com/queengate/queengate/routing"
)

// world is everything the scenario runs and breaks: PostgreSQL behind a
// proxy (or a primary and a standby), a NATS cluster, and the gateways.
type world struct {
	dir       string
	bin       string
	repl      replication
	pgOpts    pgcluster.Options
	pg        *pgcluster.Cluster // the primary
	standby   *pgcluster.Cluster // with replication
	pgURL     string             // the primary, direct, for setup and the verifier
	gatewayPG string             // the gateways' PostgreSQL URL
	proxy     *tcpproxy.Proxy    // without replication
	queue     string             // the scenario's queue
	failovers []failoverRec
	nodes     []*natsNode
	gateways  []*gatewayProc
	log       func(format string, args ...any)
}

const routingShards = 64

// startWorld starts PostgreSQL (with repl), the proxy, n NATS servers
// and g gateways.
func startWorld(ctx context.Context, dir, bin string, natsNodes, gateways int, repl replication, log func(string, ...any)) (_ *world, err error) {
	w := &world{dir: dir, bin: bin, repl: repl, log: log}
	defer func() {
		if err != nil {
			w.stop()
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
		g := &gatewayProc{w: w, index: i}
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
func (w *world) startProxied(ctx context.Context) (err error) {
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

func (w *world) natsURLs() string {
	urls := make([]string, len(w.nodes))
	for i, n := range w.nodes {
		urls[i] = fmt.Sprintf("nats://127.0.0.1:%d", n.opts.Port)
	}
	return strings.Join(urls, ",")
}

func (w *world) stop() {
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

// pgCrash stops PostgreSQL as a crash would, then starts it again.
func (w *world) pgCrash(ctx context.Context) error {
	w.pg.Crash()
	return w.pgStart(ctx)
}

// pgStop shuts PostgreSQL down cleanly, waits, and starts it again.
func (w *world) pgStop(ctx context.Context, down time.Duration) error {
	w.pg.Stop()
	sleep(ctx, down)
	return w.pgStart(ctx)
}

func (w *world) pgStart(ctx context.Context) (err error) {
	w.pg, err = pgcluster.Start(context.WithoutCancel(ctx), w.pgOpts)
	return err
}

// pgFreeze stops every byte between the gateways and PostgreSQL for a
// while, then lets them flow again (and, with cut, resets the stalled
// connections, as a long partition ends).
func (w *world) pgFreeze(ctx context.Context, d time.Duration, cut bool) {
	w.proxy.Freeze(tcpproxy.Both)
	sleep(ctx, d)
	if cut {
		w.proxy.Cut()
	}
	w.proxy.Thaw()
}

// createQueue makes the scenario's queue with its window and its
// maxAttempts (0 never dead-letters).
func (w *world) createQueue(ctx context.Context, queue string, windowSeconds, maxAttempts int) error {
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

// natsNode is one server of the NATS cluster; a restart keeps its ports.
type natsNode struct {
	opts *server.Options
	mu   sync.Mutex
	srv  *server.Server
}

func (w *world) startNATS(n int) error {
	clientPorts, routePorts := make([]int, n), make([]int, n)
	for i := range n {
		var err error
		if clientPorts[i], err = freePort(); err != nil {
			return err
		}
		if routePorts[i], err = freePort(); err != nil {
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
		node := &natsNode{opts: opts}
		if err := node.start(); err != nil {
			return err
		}
		w.nodes = append(w.nodes, node)
	}
	return nil
}

func (n *natsNode) start() error {
	opts := *n.opts
	srv, err := server.NewServer(&opts)
	if err != nil {
		return err
	}
	// Every server maps pushes onto the routing shards: a producer may
	// publish through any of them.
	for src, dest := range routing.ShardMappings("queen", routingShards) {
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

func (n *natsNode) shutdown() {
	n.mu.Lock()
	srv := n.srv
	n.srv = nil
	n.mu.Unlock()
	if srv != nil {
		srv.Shutdown()
		srv.WaitForShutdown()
	}
}

// restart stops the server, waits, and starts it on the same ports.
func (n *natsNode) restart(ctx context.Context, down time.Duration) error {
	n.shutdown()
	sleep(ctx, down)
	return n.start()
}

// gatewayProc is one queengate process; it can be killed, stopped,
// paused and started again.
type gatewayProc struct {
	w      *world
	index  int
	mu     sync.Mutex
	cmd    *exec.Cmd
	exited chan struct{}
	admin  string
}

func (g *gatewayProc) start() error {
	port, err := freePort()
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
		"QUEEN_NATS_URL="+g.w.natsURLs(),
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
func (g *gatewayProc) waitServing(ctx context.Context) error {
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

func (g *gatewayProc) signal(sig syscall.Signal) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.cmd.Process.Signal(sig)
}

// stopWith sends sig and waits for the process to end.
func (g *gatewayProc) stopWith(sig syscall.Signal) error {
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

func (g *gatewayProc) kill() {
	g.mu.Lock()
	cmd, exited := g.cmd, g.exited
	g.mu.Unlock()
	if cmd != nil {
		_ = cmd.Process.Signal(syscall.SIGCONT)
		_ = cmd.Process.Kill()
		<-exited
	}
}

// restartAfter ends the gateway with sig, waits, starts it again and
// waits until it serves.
func (g *gatewayProc) restartAfter(ctx context.Context, sig syscall.Signal, down time.Duration) error {
	if err := g.stopWith(sig); err != nil {
		return err
	}
	sleep(ctx, down)
	if err := g.start(); err != nil {
		return err
	}
	return g.waitServing(ctx)
}

// pause stops the process (SIGSTOP) for d: alive to the kernel, silent to
// everyone else.
func (g *gatewayProc) pause(ctx context.Context, d time.Duration) error {
	if err := g.signal(syscall.SIGSTOP); err != nil {
		return err
	}
	sleep(ctx, d)
	return g.signal(syscall.SIGCONT)
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// sleep waits d, or less if ctx ends; faults last a set time.
func sleep(ctx context.Context, d time.Duration) {
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
