package main

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/queengate/queengate/internal/testpki"
)

// TestLiveNATSCredentials runs a gateway whose embedded NATS requires a
// user, a password and TLS; queenctl connects with the same settings, as
// flags or as the daemon's own QUEEN_NATS_* variables.
func TestLiveNATSCredentials(t *testing.T) {
	t.Parallel()
	caFile, certFile, keyFile := testpki.Write(t, t.TempDir())
	g := startGateway(t, "QUEEN_NATS_USER=queen", "QUEEN_NATS_PASSWORD=pw-1",
		"QUEEN_NATS_SERVER_TLS_CERT="+certFile, "QUEEN_NATS_SERVER_TLS_KEY="+keyFile, "QUEEN_NATS_TLS_CA="+caFile)
	url := strings.Replace(g.natsURL, "nats://", "tls://", 1)

	ctl(t, "", "--nats", url, "--nats-tls-ca", caFile, "status").expect(t, exitUnreachable,
		"NATS at "+url+" refused the connection", "check --nats-user/--nats-password")
	ctl(t, "", "--nats", url, "--nats-user", "queen", "--nats-password", "pw-1", "status").expect(t, exitUnreachable,
		"is not trusted", "set --nats-tls-ca")
	ctl(t, "", "--nats", url, "--nats-user", "queen", "--nats-password", "wrong", "--nats-tls-ca", caFile, "status").expect(t, exitUnreachable,
		"refused the connection")
	ctl(t, "", "--nats-tls-ca", filepath.Join(t.TempDir(), "missing.pem"), "--nats", url, "status").expect(t, exitUsage,
		"--nats-tls-ca: stat ", "missing.pem: no such file or directory")

	withFlags := []string{"--nats", url, "--nats-user", "queen", "--nats-password", "pw-1", "--nats-tls-ca", caFile}
	ctl(t, "", flags(withFlags, "status")...).expect(t, exitOK, "ready:", "true")
	ctl(t, "", flags(withFlags, "push", "q", "p", "x", "--txn-id", "t-1")...).expect(t, exitOK, "1 queued")

	env := map[string]string{"QUEENCTL_NATS_URL": url, "QUEEN_NATS_USER": "queen", "QUEEN_NATS_PASSWORD": "pw-1", "QUEEN_NATS_TLS_CA": caFile}
	ctlEnv(t, env, "", "push", "q", "p", "x", "--txn-id", "t-1").expect(t, exitOK, "1 duplicate")
	ctlEnv(t, env, "", "get", "queue", "q").expect(t, exitOK, "p ")
}
