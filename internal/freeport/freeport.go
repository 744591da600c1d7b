// Package freeport finds a TCP port on 127.0.0.1 that nothing listens on,
// for the servers the test harnesses, queenbench and queenchaos start.
// The port is free when asked; a server that binds it later may, rarely,
// find it taken by another process meanwhile.
package freeport

import "net"

// TCP is a port on 127.0.0.1 that was free a moment ago.
func TCP() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}
