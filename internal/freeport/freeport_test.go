package freeport

import (
	"net"
	"strconv"
	"testing"
)

// TestTCPIsBindable: the port given can be listened on at once.
func TestTCPIsBindable(t *testing.T) {
	port, err := TCP()
	if err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(port))
	if err != nil {
		t.Fatalf("port %d: %v", port, err)
	}
	l.Close()
}
