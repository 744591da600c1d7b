package tcpproxy

import (
	"bufio"
	"net"
	"testing"
	"time"
)

// echo is a server that answers each line with the same line.
func echo(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				r := bufio.NewReader(c)
				for {
					line, err := r.ReadString('\n')
					if err != nil {
						return
					}
					if _, err := c.Write([]byte(line)); err != nil {
						return
					}
				}
			}()
		}
	}()
	return ln.Addr().String()
}

func roundTrip(c net.Conn, r *bufio.Reader, timeout time.Duration) (string, error) {
	if _, err := c.Write([]byte("ping\n")); err != nil {
		return "", err
	}
	_ = c.SetReadDeadline(time.Now().Add(timeout))
	return r.ReadString('\n')
}

// connected dials through p and makes one round trip: Dial returns once
// the kernel has the connection, possibly before the proxy has accepted
// it, and Freeze and Cut act only on what the proxy holds.
func connected(t *testing.T, p *Proxy) (net.Conn, *bufio.Reader) {
	t.Helper()
	c, err := net.Dial("tcp", p.Addr())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	r := bufio.NewReader(c)
	if got, err := roundTrip(c, r, 5*time.Second); err != nil || got != "ping\n" {
		t.Fatalf("through the proxy: %q, %v", got, err)
	}
	return c, r
}

func startProxy(t *testing.T) *Proxy {
	t.Helper()
	p, err := Start(echo(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Close)
	return p
}

func TestFreezeHoldsBytesAndThawDeliversThem(t *testing.T) {
	p := startProxy(t)
	c, r := connected(t, p)
	p.Freeze(ToClient)
	if got, err := roundTrip(c, r, 200*time.Millisecond); err == nil {
		t.Fatalf("a frozen direction delivered %q", got)
	}
	p.Thaw()
	_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
	if got, err := r.ReadString('\n'); err != nil || got != "ping\n" {
		t.Fatalf("after the thaw, the held answer: %q, %v", got, err)
	}
}

func TestCutClosesConnectionsButAcceptsNewOnes(t *testing.T) {
	p := startProxy(t)
	c, r := connected(t, p)
	p.Freeze(Both)
	p.Cut()
	p.Thaw()
	if _, err := roundTrip(c, r, 5*time.Second); err == nil {
		t.Fatal("a cut connection still answered")
	}
	connected(t, p) // a new connection after the cut works
}
