package main

import (
	"fmt"
	"io"
	"net/http"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/queengate/queengate/internal/checkfor"
	"github.com/queengate/queengate/internal/natsembed"
	"github.com/queengate/queengate/internal/pgtest"
)

// TestStartsBeforePostgresAndNATS: started while neither is reachable,
// the daemon stays up, answers /healthz, says on /readyz what it waits
// for, and serves once both come up — no supervisor needed.
func TestStartsBeforePostgresAndNATS(t *testing.T) {
	t.Parallel()
	cluster := pgtest.NewCluster(t)
	cluster.Stop()
	port := freePort(t)
	d := launchDaemon(t, fmt.Sprintf("nats://127.0.0.1:%d", port), "QUEEN_PG_URL="+cluster.URL)
	d.waitLog(t, "waiting for PostgreSQL")

	if code, body := get(t, d.httpAddr, "/healthz"); code != http.StatusOK {
		t.Errorf("/healthz while waiting = %d %s, want 200", code, body)
	}
	code, body := get(t, d.httpAddr, "/readyz")
	if code != http.StatusServiceUnavailable || !strings.Contains(body, `"postgres":"unreachable`) || !strings.Contains(body, `"nats":"not connected`) {
		t.Errorf("/readyz while waiting = %d %s, want 503 naming postgres and nats", code, body)
	}

	cluster.Start(t)
	d.waitLog(t, "waiting for NATS")
	ns, err := natsembed.Start(natsembed.Config{Port: port})
	if err != nil {
		t.Fatal(err)
	}
	defer ns.Shutdown()
	d.waitLog(t, "queengate serving")
	checkfor.Check(t, 30*time.Second, checkfor.Cond("/readyz to answer ready", func() bool {
		code, _ := get(t, d.httpAddr, "/readyz")
		return code == http.StatusOK
	}))
	nc, err := nats.Connect(ns.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	m, err := nc.Request("queen.push.late.p", []byte(`{"transactionId":"l-1"}`), 10*time.Second)
	if err != nil || !strings.Contains(string(m.Data), `"status":"queued"`) {
		t.Fatalf("push once both are up: %v %v", m, err)
	}
}

// TestStopsWhileWaitingForPostgres: a signal while waiting ends the
// daemon cleanly (exit 0), and a refusal waiting cannot cure (a database
// that does not exist) ends it at once with the reason.
func TestStopsWhileWaitingForPostgres(t *testing.T) {
	t.Parallel()
	cluster := pgtest.NewCluster(t)
	cluster.Stop()
	d := launchDaemon(t, "", "QUEEN_PG_URL="+cluster.URL)
	d.waitLog(t, "waiting for PostgreSQL")
	if err := d.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := <-d.exited; err != nil {
		t.Errorf("SIGTERM while waiting: %v, want exit 0", err)
	}

	cluster.Start(t)
	missing := strings.Replace(cluster.URL, "/postgres", "/no_such_db", 1)
	out, err := runBinary(t, "QUEEN_PG_URL="+missing, "QUEEN_HTTP_ADDR=127.0.0.1:0", fmt.Sprintf("QUEEN_NATS_PORT=%d", freePort(t)))
	if err == nil || !strings.Contains(out, "no_such_db") {
		t.Errorf("a database that does not exist: exit %v, output %s; want exit 1 naming it", err, out)
	}
}

func get(t *testing.T, addr, path string) (int, string) {
	t.Helper()
	resp, err := http.Get("http://" + addr + path)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body)
}

// runBinary runs the daemon to its end with env and returns its output.
func runBinary(t *testing.T, env ...string) (string, error) {
	t.Helper()
	cmd := exec.Command(binary)
	cmd.Env = append(cleanEnv(), env...)
	out, err := cmd.CombinedOutput()
	return string(out), err
}
