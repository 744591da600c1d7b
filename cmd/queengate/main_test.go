package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/prometheus/client_golang/prometheus/testutil/promlint"

	"github.com/queengate/queengate/internal/freeport"
	"github.com/queengate/queengate/internal/gatewaybin"
	"github.com/queengate/queengate/internal/natsembed"
	"github.com/queengate/queengate/internal/pgtest"
)

var binary string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "queengate-bin-")
	if err != nil {
		panic(err)
	}
	if binary, err = gatewaybin.Build(dir); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	pgtest.Run(m, func() { _ = os.RemoveAll(dir) })
}

func freePort(t *testing.T) int {
	t.Helper()
	port, err := freeport.TCP()
	if err != nil {
		t.Fatal(err)
	}
	return port
}

// daemon is a running queengate binary.
type daemon struct {
	cmd      *exec.Cmd
	natsURL  string
	httpAddr string
	logs     chan map[string]any
	exited   chan error
}

// startDaemon runs the binary with env and waits until it serves; natsURL
// empty means its embedded NATS server.
func startDaemon(t *testing.T, natsURL string, env ...string) *daemon {
	t.Helper()
	d := launchDaemon(t, natsURL, env...)
	d.waitLog(t, "queengate serving")
	return d
}

// launchDaemon runs the binary and waits only for its admin server.
func launchDaemon(t *testing.T, natsURL string, env ...string) *daemon {
	t.Helper()
	cmd := exec.Command(binary)
	cmd.Env = append(cleanEnv(), env...)
	cmd.Env = append(cmd.Env, "QUEEN_HTTP_ADDR=127.0.0.1:0")
	if natsURL == "" {
		port := freePort(t)
		natsURL = fmt.Sprintf("nats://127.0.0.1:%d", port)
		cmd.Env = append(cmd.Env, fmt.Sprintf("QUEEN_NATS_PORT=%d", port))
	} else {
		cmd.Env = append(cmd.Env, "QUEEN_NATS_URL="+natsURL)
	}
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	d := &daemon{cmd: cmd, natsURL: natsURL, logs: make(chan map[string]any, 1024), exited: make(chan error, 1)}
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			var line map[string]any
			if json.Unmarshal(sc.Bytes(), &line) != nil {
				line = map[string]any{"message": sc.Text()}
			}
			t.Logf("queengate: %s", sc.Text())
			select {
			case d.logs <- line:
			default:
			}
		}
		close(d.logs)
		d.exited <- cmd.Wait()
	}()
	t.Cleanup(func() { _ = cmd.Process.Kill() })
	listening := d.waitLog(t, "admin HTTP listening")
	d.httpAddr, _ = listening["http"].(string)
	return d
}

func (d *daemon) waitLog(t *testing.T, message string) map[string]any {
	t.Helper()
	timeout := time.After(60 * time.Second)
	for {
		select {
		case line, ok := <-d.logs:
			if !ok {
				t.Fatalf("queengate exited before logging %q", message)
			}
			if line["message"] == message {
				return line
			}
		case <-timeout:
			t.Fatalf("queengate did not log %q within 60 s", message)
		}
	}
}

// TestSIGTERMLosesNothingAccepted pushes from many producers while the
// daemon receives SIGTERM: every request gets an answer (stored, or 503,
// or no responder once the subscription is gone), none hangs, everything
// answered as stored is in PostgreSQL, and the daemon exits 0. NATS runs
// outside the daemon here, so that a request in transit when the process
// ends is not lost by the transport rather than by the gateway.
func TestSIGTERMLosesNothingAccepted(t *testing.T) {
	t.Parallel()
	url := pgtest.NewDB(t)
	ns, err := natsembed.Start(natsembed.Config{Port: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer ns.Shutdown()
	d := startDaemon(t, ns.ClientURL(), "QUEEN_PG_URL="+url, "QUEEN_FLUSH_LINGER=20ms")
	nc, err := nats.Connect(d.natsURL)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()

	var (
		mu       sync.Mutex
		stored   = map[string]bool{}
		refused  int
		hung     int
		answered = make(chan struct{}, 1024)
		stop     = make(chan struct{})
		wg       sync.WaitGroup
	)
	for p := range 16 {
		wg.Go(func() {
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				ids := []string{fmt.Sprintf("t-%d-%d-a", p, i), fmt.Sprintf("t-%d-%d-b", p, i)}
				body := fmt.Sprintf(`[{"transactionId":%q},{"transactionId":%q}]`, ids[0], ids[1])
				m, err := nc.Request(fmt.Sprintf("queen.push.sigterm.p%d", p%4), []byte(body), 20*time.Second)
				mu.Lock()
				switch {
				case errors.Is(err, nats.ErrNoResponders):
					refused++
				case errors.Is(err, nats.ErrTimeout):
					hung++
				case err != nil:
					mu.Unlock()
					return // the connection went away with the server
				case m.Header.Get("Nats-Service-Error-Code") != "":
					if m.Header.Get("Nats-Service-Error-Code") != "503" {
						t.Errorf("unexpected rejection %v: %s", m.Header, m.Data)
					}
					refused++
				default:
					var answers []struct{ TransactionID, Status string }
					if err := json.Unmarshal(m.Data, &answers); err != nil {
						t.Errorf("answer %s: %v", m.Data, err)
					}
					for _, a := range answers {
						if a.Status != "queued" {
							t.Errorf("answer %+v", a)
						}
						stored[a.TransactionID] = true
					}
					select {
					case answered <- struct{}{}:
					default:
					}
				}
				mu.Unlock()
			}
		})
	}
	// SIGTERM once load has built up: 50 requests answered, many more in
	// the gateway's buffers.
	for range 50 {
		<-answered
	}
	if err := d.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	var exitErr error
	select {
	case exitErr = <-d.exited:
	case <-time.After(60 * time.Second):
		t.Fatal("queengate did not exit within 60 s of SIGTERM")
	}
	close(stop)
	wg.Wait()
	if exitErr != nil {
		t.Errorf("queengate exited with %v, want 0", exitErr)
	}
	stopped := false
	for line := range d.logs { // closed once the process exited
		if line["message"] == "stopped" {
			_, stopped = line["took_ms"].(float64) // a unit in the name
		}
	}
	if !stopped {
		t.Error(`no "stopped" log line with its duration in took_ms`)
	}
	if hung > 0 {
		t.Errorf("%d requests got no answer at all: accepted and lost", hung)
	}
	st := pgtest.Store(t, url)
	rows, err := st.Pool().Query(context.Background(), "SELECT unnest(txn_ids) FROM queen.log_segments")
	if err != nil {
		t.Fatal(err)
	}
	inDB := map[string]bool{}
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			t.Fatal(err)
		}
		inDB[id] = true
	}
	for id := range stored {
		if !inDB[id] {
			t.Errorf("%s answered queued but not in PostgreSQL", id)
		}
	}
	t.Logf("%d messages answered stored, %d in PostgreSQL, %d requests refused during shutdown", len(stored), len(inDB), refused)
	if len(stored) == 0 {
		t.Fatal("no message was stored before the shutdown")
	}
}

func TestVersionAndConfigErrors(t *testing.T) {
	t.Parallel()
	out, err := exec.Command(binary, "--version").CombinedOutput()
	if err != nil || !strings.HasPrefix(string(out), "queengate ") {
		t.Errorf("--version: %q, %v", out, err)
	}
	cases := []struct {
		env  []string
		args []string
		want string
	}{
		{nil, nil, "pg-url: set QUEEN_PG_URL"},
		{[]string{"QUEEN_PG_URL=postgres://127.0.0.1:1/x", "QUEEN_MAX_BATCH=many"}, nil, "QUEEN_MAX_BATCH=\"many\": not an integer"},
		{[]string{"QUEEN_PG_URL=postgres://127.0.0.1:1/x", "QUEEN_FLUSH_LINGER=5"}, nil, "QUEEN_FLUSH_LINGER=\"5\": not a duration"},
		{[]string{"QUEEN_PG_URL=postgres://127.0.0.1:1/x"}, []string{"--flush-size", "0"}, "flush-size: 0, must be at least 1"},
		{[]string{"QUEEN_PG_URL=postgres://127.0.0.1:1/x"}, []string{"--failover-journal", "0"}, "failover-journal: 0, must be at least 1"},
		{[]string{"QUEEN_PG_URL=postgres://127.0.0.1:1/x", "QUEEN_MEMORY_LIMIT_MB=lots"}, nil, "QUEEN_MEMORY_LIMIT_MB=\"lots\": not an integer"},
		{[]string{"QUEEN_PG_URL=postgres://127.0.0.1:1/x"}, []string{"--memory-limit-mb", "-2"}, "memory-limit-mb: -2, must be -1 (none)"},
		{[]string{"QUEEN_PG_URL=postgres://127.0.0.1:1/x"}, []string{"--subject-prefix", "a..b"}, "subject prefix"},
		{[]string{"QUEEN_PG_URL=postgres://127.0.0.1:1/x"}, []string{"stray"}, "unexpected arguments"},
		{[]string{"QUEEN_PG_URL=postgres://127.0.0.1:1/x", "QUEEN_RETENTION_SLACK=1s"}, nil, "retention-slack: 1s, must be at least 5s"},
		{[]string{"QUEEN_PG_URL=postgres://127.0.0.1:1/x?pool_max_conns=2"}, nil, "pool_max_conns=2 is too few"},
		{[]string{"QUEEN_PG_URL=postgres://127.0.0.1:1/x", "QUEEN_NATS_CREDS=/x.creds"}, nil, "needs a NATS server run with an operator"},
		{[]string{"QUEEN_PG_URL=postgres://127.0.0.1:1/x", "QUEEN_NATS_USER=u", "QUEEN_NATS_TOKEN=t"}, nil, "give one of nats-user, nats-token, nats-nkey"},
		{[]string{"QUEEN_PG_URL=postgres://127.0.0.1:1/x", "QUEEN_NATS_URL=nats://x:4222", "QUEEN_NATS_SERVER_TLS_CERT=c"}, nil, "configure the embedded server"},
		{[]string{"QUEEN_PG_URL=postgres://127.0.0.1:1/x", "QUEEN_NATS_URL=nats://x:4222", "QUEEN_NATS_CONFIG=n.conf"}, nil, "nats-config and nats-server-tls-*"},
		{[]string{"QUEEN_PG_URL=postgres://127.0.0.1:1/x", "QUEEN_NATS_CONFIG=/no/such/nats.conf"}, nil, "embedded nats-server config"},
		{[]string{"QUEEN_LOCAL_PG_DIR=/tmp/x", "QUEEN_PG_READ_URL=postgres://127.0.0.1:1/x"}, nil, "pg-read-url: reads from standbys need --pg-url"},
		{[]string{"QUEEN_PG_URL=postgres://127.0.0.1:1/x"}, []string{"--pg-read-wait", "-1s"}, "pg-read-wait: -1s, must be 0 (none) or positive"},
		{[]string{"QUEEN_PG_URL=postgres://127.0.0.1:1/x", "QUEEN_PG_READ_URL=postgres://127.0.0.1:port/x"}, nil, "read pool: pgstore: parse connection string"},
	}
	for _, c := range cases {
		cmd := exec.Command(binary, c.args...)
		cmd.Env = append(cleanEnv(), c.env...)
		out, err := cmd.CombinedOutput()
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.ExitCode() != 1 || !strings.Contains(string(out), c.want) {
			t.Errorf("env %v args %v: exit %v, output %q; want exit 1 mentioning %q", c.env, c.args, err, out, c.want)
		}
	}
}

func cleanEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "QUEEN_") {
			env = append(env, kv)
		}
	}
	return env
}

// TestDaemonWithEmbeddedNATS runs the daemon as a newcomer would (embedded
// NATS), pushes through it and reads its admin endpoints.
func TestDaemonWithEmbeddedNATS(t *testing.T) {
	t.Parallel()
	d := startDaemon(t, "", "QUEEN_PG_URL="+pgtest.NewDB(t))
	nc, err := nats.Connect(d.natsURL)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	m, err := nc.Request("queen.push.orders.eu", []byte(`{"transactionId":"o-1","data":{"total":3}}`), 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(m.Data), `"status":"queued"`) {
		t.Fatalf("answer %s", m.Data)
	}
	// The micro service answers discovery requests.
	info, err := nc.Request("$SRV.INFO.queengate", nil, 5*time.Second)
	if err != nil || !strings.Contains(string(info.Data), `"queen.push.\u003e"`) && !strings.Contains(string(info.Data), `queen.push.>`) {
		t.Errorf("$SRV.INFO: %v %s", err, info.Data)
	}
	for path, want := range map[string]string{
		"/healthz": `"status":"ok"`,
		"/readyz":  `"status":"ready"`,
		"/metrics": `queengate_messages_total{status="queued"} 1`,
	} {
		resp, err := http.Get("http://" + d.httpAddr + path)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), want) {
			t.Errorf("GET %s = %d, want 200 containing %s:\n%.2000s", path, resp.StatusCode, want, body)
		}
	}
	checkMetrics(t, d.httpAddr)
	_ = d.cmd.Process.Signal(syscall.SIGTERM)
	if err := <-d.exited; err != nil {
		t.Errorf("exit after SIGTERM: %v", err)
	}
}

// checkMetrics lints the daemon's /metrics with promlint and looks for
// the figures an operator looks for first.
func checkMetrics(t *testing.T, httpAddr string) {
	t.Helper()
	resp, err := http.Get("http://" + httpAddr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		t.Fatal(err)
	}
	problems, err := promlint.New(bytes.NewReader(body)).Lint()
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		t.Errorf("promlint: %s: %s", p.Metric, p.Text)
	}
	text := string(body)
	for _, want := range []string{
		`queengate_build_info{goversion="go`,
		`queengate_request_duration_seconds_count{endpoint="push",result="ok"} 1`,
		`queengate_pg_pool_acquired_connections `,
		`queengate_pg_pool_max_connections `,
		`queengate_nats_connected 1`,
		`queengate_timers_pending `,
	} {
		if !strings.Contains(text, want) {
			t.Errorf("/metrics lacks %q", want)
		}
	}
	if strings.Contains(text, "queengate_timer_") {
		t.Error("/metrics mixes queengate_timer_ and queengate_timers_: one scheme")
	}
	if strings.Contains(text, "queengate_pg_read_pool_acquired_connections") {
		t.Error("/metrics has read pool statistics without --pg-read-url")
	}
}

// TestPushExample runs examples/push, as the README tells a newcomer to.
func TestPushExample(t *testing.T) {
	t.Parallel()
	d := startDaemon(t, "", "QUEEN_PG_URL="+pgtest.NewDB(t))
	out, err := exec.Command("go", "run", "../../examples/push", "--nats-url", d.natsURL).CombinedOutput()
	if err != nil {
		t.Fatalf("examples/push: %v\n%s", err, out)
	}
	for _, want := range []string{"first order-9140-paid -> queued", "retry order-9140-paid -> duplicate", "ack   order-9140-shipped -> queued"} {
		if !strings.Contains(string(out), want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
}

// TestHelpDescribesTheDaemon: --help says what queengate is, lists every
// flag with its environment variable, and exits 0.
func TestHelpDescribesTheDaemon(t *testing.T) {
	t.Parallel()
	for _, flag := range []string{"--help", "-h"} {
		out, err := exec.Command(binary, flag).CombinedOutput()
		if err != nil {
			t.Fatalf("%s: %v\n%s", flag, err, out)
		}
		for _, want := range []string{"queengate is an exactly-once ingestion gateway", "Usage:", "QUEEN_PG_URL",
			"-http-addr", "the operator API (/configure, /queues, /status, /timers)"} {
			if !strings.Contains(string(out), want) {
				t.Errorf("%s output lacks %q:\n%s", flag, want, out)
			}
		}
	}
}
