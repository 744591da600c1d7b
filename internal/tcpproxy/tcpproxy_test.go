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

func TestFreezeHoldsBytesAndThawDeliversThem(t *testing.T) {
	p, err := Start(echo(t))
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	c, err := net.Dial("tcp", p.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	r := bufio.NewReader(c)
	if got, err := roundTrip(c, r, 5*time.Second); err != nil || got != "ping\n" {
		t.Fatalf("through the proxy: %q, %v", got, err)
	}
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
	p, err := Start(echo(t))
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	c, err := net.Dial("tcp", p.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	r := bufio.NewReader(c)
	// A round trip first: Dial returns once the kernel has the connection,
	// possibly before the proxy has accepted it, and Cut closes only what
	// the proxy holds.
	if got, err := roundTrip(c, r, 5*time.Second); err != nil || got != "ping\n" {
		t.Fatalf("before the cut: %q, %v", got, err)
	}
	p.Freeze(Both)
	p.Cut()
	p.Thaw()
	if _, err := roundTrip(c, r, 5*time.Second); err == nil {
		t.Fatal("a cut connection still answered")
	}
	c2, err := net.Dial("tcp", p.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer c2.Close()
	if got, err := roundTrip(c2, bufio.NewReader(c2), 5*time.Second); err != nil || got != "ping\n" {
		t.Fatalf("a new connection after the cut: %q, %v", got, err)
	}
}
