package main

import (
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nkeys"

	"github.com/queengate/queengate/internal/pgtest"
	"github.com/queengate/queengate/internal/testpki"
)

func pushOK(t *testing.T, nc *nats.Conn, subject string) {
	t.Helper()
	m, err := nc.Request(subject, []byte(`{"transactionId":"a-1","data":1}`), 10*time.Second)
	if err != nil || !strings.Contains(string(m.Data), `"status":"queued"`) {
		t.Fatalf("push: %v %v", err, m)
	}
}

// TestEmbeddedNATSRequiresTheGatewaysCredentials: with credentials set,
// the embedded server requires them of every client, the gateway included.
func TestEmbeddedNATSRequiresTheGatewaysCredentials(t *testing.T) {
	t.Parallel()
	seed, err := nkeys.CreateUser()
	if err != nil {
		t.Fatal(err)
	}
	seedBytes, _ := seed.Seed()
	seedFile := filepath.Join(t.TempDir(), "user.nk")
	if err := os.WriteFile(seedFile, seedBytes, 0o600); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name string
		env  []string
		opt  nats.Option
	}{
		{"user", []string{"QUEEN_NATS_USER=queen", "QUEEN_NATS_PASSWORD=pw-1"}, nats.UserInfo("queen", "pw-1")},
		{"token", []string{"QUEEN_NATS_TOKEN=tok-1"}, nats.Token("tok-1")},
		{"nkey", []string{"QUEEN_NATS_NKEY=" + seedFile}, func() nats.Option {
			o, err := nats.NkeyOptionFromSeed(seedFile)
			if err != nil {
				t.Fatal(err)
			}
			return o
		}()},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			d := startDaemon(t, "", append(c.env, "QUEEN_PG_URL="+pgtest.NewDB(t))...)
			if nc, err := nats.Connect(d.natsURL, nats.MaxReconnects(0)); err == nil {
				nc.Close()
				t.Fatal("a client without credentials connected")
			} else if !strings.Contains(strings.ToLower(err.Error()), "authorization") {
				t.Errorf("unauthenticated connect: %v, want an authorization violation", err)
			}
			nc, err := nats.Connect(d.natsURL, c.opt)
			if err != nil {
				t.Fatal(err)
			}
			defer nc.Close()
			pushOK(t, nc, "queen.push.auth.p")
		})
	}
}

// TestAdminTokenAtProcessLevel: QUEEN_ADMIN_TOKEN guards /configure of the
// running daemon; an unauthenticated configure changes nothing.
func TestAdminTokenAtProcessLevel(t *testing.T) {
	t.Parallel()
	pgURL := pgtest.NewDB(t)
	d := startDaemon(t, "", "QUEEN_PG_URL="+pgURL, "QUEEN_ADMIN_TOKEN=tok-admin")
	post := func(token string) int {
		req, _ := http.NewRequest("POST", "http://"+d.httpAddr+"/configure",
			strings.NewReader(`{"queue":"guarded","options":{"dedupWindowSeconds":0}}`))
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp.StatusCode
	}
	if code := post(""); code != http.StatusUnauthorized {
		t.Errorf("configure without the token: %d, want 401", code)
	}
	store := pgtest.Store(t, pgURL)
	if _, err := store.QueueConfig(t.Context(), "guarded"); err == nil {
		t.Fatal("the refused configure created the queue")
	}
	if code := post("tok-admin"); code != http.StatusOK {
		t.Errorf("configure with the token: %d, want 200", code)
	}
	if c, err := store.QueueConfig(t.Context(), "guarded"); err != nil || c.DedupWindowSeconds != 0 {
		t.Errorf("after the authorized configure: %+v, %v", c, err)
	}
	// The admin HTTP is loopback by default.
	if host, _, _ := net.SplitHostPort(d.httpAddr); host != "127.0.0.1" {
		t.Errorf("admin HTTP listens on %s, want loopback", d.httpAddr)
	}
}

// TestEmbeddedNATSOverTLS: the embedded server with a certificate; the
// gateway connects to itself over TLS with the CA it is given.
func TestEmbeddedNATSOverTLS(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	caFile, certFile, keyFile := testpki.Write(t, dir)
	d := startDaemon(t, "", "QUEEN_PG_URL="+pgtest.NewDB(t),
		"QUEEN_NATS_SERVER_TLS_CERT="+certFile, "QUEEN_NATS_SERVER_TLS_KEY="+keyFile, "QUEEN_NATS_TLS_CA="+caFile)
	url := strings.Replace(d.natsURL, "nats://", "tls://", 1)
	if nc, err := nats.Connect(strings.Replace(d.natsURL, "nats://", "tls://", 1), nats.MaxReconnects(0)); err == nil {
		nc.Close()
		t.Fatal("a client that does not trust the CA connected")
	}
	nc, err := nats.Connect(url, nats.RootCAs(caFile))
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	if !nc.TLSRequired() {
		t.Error("connection is not TLS")
	}
	pushOK(t, nc, "queen.push.tls.p")
}
