package natsembed_test

import (
	"net"
	"strings"
	"testing"

	"github.com/queengate/queengate/internal/natsembed"
)

// TestEmbeddedNATSOnABusyPortFailsAtOnce: the error names the cause
// instead of waiting for a server that never listens.
func TestEmbeddedNATSOnABusyPortFailsAtOnce(t *testing.T) {
	t.Parallel()
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	port := busy.Addr().(*net.TCPAddr).Port
	ns, err := natsembed.Start(natsembed.Config{Port: port})
	if err == nil {
		ns.Shutdown()
		t.Fatal("the embedded server started on a busy port")
	}
	if !strings.Contains(err.Error(), "address already in use") || !strings.Contains(err.Error(), "QUEEN_NATS_PORT") {
		t.Errorf("error %q: want it to say the address is in use and what to set", err)
	}
}
