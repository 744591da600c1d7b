package main

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestLiveNATSCredentials runs a gateway whose embedded NATS requires a
// user, a password and TLS; queenctl connects with the same settings, as
// flags or as the daemon's own QUEEN_NATS_* variables.
func TestLiveNATSCredentials(t *testing.T) {
	t.Parallel()
	caFile, certFile, keyFile := writeTestPKI(t, t.TempDir())
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

// writeTestPKI writes a CA and a server certificate for 127.0.0.1.
func writeTestPKI(t *testing.T, dir string) (caFile, certFile, keyFile string) {
	t.Helper()
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	ca := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "queenctl test CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}
	caDER, err := x509.CreateCertificate(rand.Reader, ca, ca, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	leaf := &x509.Certificate{SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "127.0.0.1"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		KeyUsage: x509.KeyUsageDigitalSignature}
	leafDER, err := x509.CreateCertificate(rand.Reader, leaf, ca, &key.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	write := func(name, typ string, der []byte) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	return write("ca.pem", "CERTIFICATE", caDER), write("server.pem", "CERTIFICATE", leafDER), write("server-key.pem", "EC PRIVATE KEY", keyDER)
}
