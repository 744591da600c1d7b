package proc

import (
	"context"
	"encoding/json"
	"fmt"
	"os"

	"github.com/nats-io/nats-server/v2/server"
)

// natsDirEnv names the JetStream store directory of the nats-server role;
// without it, JetStream is off.
const natsDirEnv = "QUEENBENCH_NATS_DIR"

// natsMappingsEnv holds the nats-server role's subject mappings, as a JSON
// object of source to destination (the gateways' routing shards).
const natsMappingsEnv = "QUEENBENCH_NATS_MAPPINGS"

// playNATSServer is the nats-server role of queenbench: it runs a
// JetStream server in this process, so that the benchmark can measure the
// server's CPU and memory apart from the load generator's. It announces
// the server's client URL once the server accepts connections.
func playNATSServer(ctx context.Context, announce func(string) error) (string, error) {
	dir := os.Getenv(natsDirEnv)
	ns, err := server.NewServer(&server.Options{
		ServerName: "queenbench-nats",
		Host:       "127.0.0.1",
		Port:       -1,
		JetStream:  dir != "",
		StoreDir:   dir,
		MaxPayload: 8 << 20,
		NoSigs:     true,
		NoLog:      true,
	})
	if err != nil {
		return "", fmt.Errorf("new server: %w", err)
	}
	if m := os.Getenv(natsMappingsEnv); m != "" {
		var mappings map[string]string
		if err := json.Unmarshal([]byte(m), &mappings); err != nil {
			return "", fmt.Errorf("%s: %w", natsMappingsEnv, err)
		}
		for src, dest := range mappings {
			if err := ns.GlobalAccount().AddMapping(src, dest); err != nil {
				return "", fmt.Errorf("map %s: %w", src, err)
			}
		}
	}
	go ns.Start()
	if !ns.ReadyForConnections(roleReadyTimeout) {
		ns.Shutdown()
		return "", fmt.Errorf("not ready for connections after %v", roleReadyTimeout)
	}
	if err := announce(ns.ClientURL()); err != nil {
		ns.Shutdown()
		return "", fmt.Errorf("announce readiness: %w", err)
	}
	<-ctx.Done()
	ns.Shutdown()
	ns.WaitForShutdown()
	return "", nil
}

// roleNATSServer is the nats-server role (playNATSServer).
const roleNATSServer = "nats-server"

// NATSServer is a nats-server role running as a child process.
type NATSServer struct {
	// URL is the server's client URL.
	URL string
	*Child
}

// StartNATSServer re-executes queenbench in the nats-server role with
// its JetStream store in dir (none: JetStream off) and the given subject
// mappings, and waits for it to accept connections. ctx bounds the start
// only; the process runs until Stop.
func StartNATSServer(ctx context.Context, dir string, mappings map[string]string) (*NATSServer, error) {
	m, err := json.Marshal(mappings)
	if err != nil {
		return nil, err
	}
	c, err := StartRole(ctx, roleNATSServer, natsDirEnv+"="+dir, natsMappingsEnv+"="+string(m))
	if err != nil {
		return nil, err
	}
	return &NATSServer{URL: c.Ready, Child: c}, nil
}
