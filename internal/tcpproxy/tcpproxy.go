// Package tcpproxy is a TCP proxy for fault injection: it forwards
// connections to a target and can freeze them (bytes stop flowing, as
// when a network partition drops packets, without closing anything) in
// either direction, and cut them (close every connection at once, as a
// dead peer or a reset would).
package tcpproxy

import (
	"net"
	"sync"
)

// Direction is which way bytes flow.
type Direction int

const (
	// ToServer is client to target; ToClient target to client.
	ToServer Direction = 1 << iota
	ToClient
	Both = ToServer | ToClient
)

// Proxy forwards connections from its address to a target.
type Proxy struct {
	ln     net.Listener
	target string

	mu     sync.Mutex
	frozen Direction // applies to every connection, new ones too
	thaw   *sync.Cond
	conns  map[net.Conn]struct{}
	closed bool
	wg     sync.WaitGroup
}

// Start listens on a free loopback port and forwards to target.
func Start(target string) (*Proxy, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	p := &Proxy{ln: ln, target: target, conns: map[net.Conn]struct{}{}}
	p.thaw = sync.NewCond(&p.mu)
	p.wg.Add(1)
	go p.accept()
	return p, nil
}

// Addr is the proxy's address (host:port).
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

// Port is the proxy's port.
func (p *Proxy) Port() int { return p.ln.Addr().(*net.TCPAddr).Port }

// Freeze stops bytes flowing in d, on every connection and new ones,
// until Thaw. Connections stay open.
func (p *Proxy) Freeze(d Direction) {
	p.mu.Lock()
	p.frozen |= d
	p.mu.Unlock()
}

// Thaw lets bytes flow again in every direction.
func (p *Proxy) Thaw() {
	p.mu.Lock()
	p.frozen = 0
	p.thaw.Broadcast()
	p.mu.Unlock()
}

// Cut closes every connection now; new ones are still accepted.
func (p *Proxy) Cut() {
	p.mu.Lock()
	for c := range p.conns {
		_ = c.Close()
		delete(p.conns, c)
	}
	p.thaw.Broadcast()
	p.mu.Unlock()
}

// Close stops the proxy and closes every connection.
func (p *Proxy) Close() {
	p.mu.Lock()
	p.closed = true
	p.mu.Unlock()
	_ = p.ln.Close()
	p.Cut()
	p.wg.Wait()
}

func (p *Proxy) accept() {
	defer p.wg.Done()
	for {
		client, err := p.ln.Accept()
		if err != nil {
			return
		}
		server, err := net.Dial("tcp", p.target)
		if err != nil {
			_ = client.Close()
			continue
		}
		p.mu.Lock()
		if p.closed {
			p.mu.Unlock()
			_ = client.Close()
			_ = server.Close()
			return
		}
		p.conns[client], p.conns[server] = struct{}{}, struct{}{}
		p.mu.Unlock()
		p.wg.Add(2)
		go p.pipe(client, server, ToServer)
		go p.pipe(server, client, ToClient)
	}
}

// pipe copies src to dst, holding each chunk while d is frozen.
func (p *Proxy) pipe(src, dst net.Conn, d Direction) {
	defer p.wg.Done()
	defer func() {
		p.mu.Lock()
		delete(p.conns, src)
		delete(p.conns, dst)
		p.mu.Unlock()
		_ = src.Close()
		_ = dst.Close()
	}()
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			if !p.wait(src, d) {
				return
			}
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return // EOF or a cut: either way this connection is done
		}
	}
}

// wait blocks while d is frozen; false when src was cut meanwhile.
func (p *Proxy) wait(src net.Conn, d Direction) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	for p.frozen&d != 0 {
		if _, open := p.conns[src]; !open || p.closed {
			return false
		}
		p.thaw.Wait()
	}
	_, open := p.conns[src]
	return open && !p.closed
}
