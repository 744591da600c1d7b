package gateway_test

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/rs/zerolog"

	"github.com/queengate/queengate/gateway"
	"github.com/queengate/queengate/ingest"
	"github.com/queengate/queengate/internal/checkfor"
	"github.com/queengate/queengate/internal/pgtest"
)

// startClusterNode starts one nats-server of a two-node cluster; routes is
// the other node's cluster URL, or empty for the first node.
func startClusterNode(t *testing.T, name, routes string) *server.Server {
	t.Helper()
	opts := &server.Options{
		ServerName: name, Host: "127.0.0.1", Port: -1, NoLog: true, NoSigs: true,
		Cluster: server.ClusterOpts{Name: "queengate-test", Host: "127.0.0.1", Port: -1},
	}
	if routes != "" {
		opts.Routes = server.RoutesFromStr(routes)
	}
	ns, err := server.NewServer(opts)
	if err != nil {
		t.Fatal(err)
	}
	go ns.Start()
	if !ns.ReadyForConnections(10 * time.Second) {
		t.Fatal("nats-server did not start")
	}
	t.Cleanup(ns.Shutdown)
	return ns
}

// TestAnswersSurviveNATSReconnect loses the gateway's NATS server while a
// flush is in flight: the flush completes, and its answer is sent once the
// gateway has reconnected (here, to the other node of the cluster).
func TestAnswersSurviveNATSReconnect(t *testing.T) {
	t.Parallel()
	nodeB := startClusterNode(t, "B", "")
	nodeA := startClusterNode(t, "A", fmt.Sprintf("nats://127.0.0.1:%d", nodeB.ClusterAddr().Port))
	checkfor.Check(t, 10*time.Second, checkfor.Cond("the route between A and B", func() bool { return nodeA.NumRoutes() > 0 && nodeB.NumRoutes() > 0 }))

	gwConn, err := nats.Connect(nodeA.ClientURL()+","+nodeB.ClientURL(), nats.DontRandomize(),
		nats.MaxReconnects(-1), nats.ReconnectWait(50*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(gwConn.Close)
	store := pgtest.Store(t, pgtest.SharedURL(t))
	log := zerolog.New(zerolog.NewTestWriter(t)).Level(zerolog.WarnLevel)
	ing, err := ingest.New(store, ingest.Config{}, log, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := ing.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	gw, err := gateway.New(gateway.Config{}, gwConn, ing, log, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := gw.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(gw.Stop)

	client, err := nats.Connect(nodeB.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(client.Close)
	queue := pgtest.UniqueName(t)
	acks := make(chan *nats.Msg, 8)
	if _, err := client.ChanSubscribe("queen.ack."+queue+".p", acks); err != nil {
		t.Fatal(err)
	}
	// Wait until a push through B reaches the gateway on A and its answer
	// comes back: routes and interest are established.
	checkfor.Check(t, 10*time.Second, checkfor.Cond("a first push through the cluster", func() bool {
		_, err := client.Request("queen.push."+queue+".p", []byte(`{"transactionId":"warm-up"}`), time.Second)
		return err == nil
	}))

	_, release := blockPartition(t, store, queue, "p")
	if err := client.Publish("queen.push."+queue+".p", []byte(`[{"transactionId":"in-flight"},{"transactionId":"warm-up"}]`)); err != nil {
		t.Fatal(err)
	}
	checkfor.Check(t, 10*time.Second, checkfor.Cond("the push to be accepted", func() bool { return ing.Buffered() == 2 }))
	nodeA.Shutdown()
	checkfor.Check(t, 10*time.Second, checkfor.Cond("the gateway to notice", func() bool { return !gwConn.IsConnected() || gwConn.ConnectedServerName() == "B" }))
	release()

	select {
	case m := <-acks:
		var answers []answer
		if err := json.Unmarshal(m.Data, &answers); err != nil {
			t.Fatalf("ack %s: %v", m.Data, err)
		}
		wantStatus(t, answers, "queued", "duplicate")
	case <-time.After(30 * time.Second):
		t.Fatal("the answer of the flush in flight never arrived after the reconnect")
	}
	if name := gwConn.ConnectedServerName(); name != "B" {
		t.Errorf("gateway connected to %q after A left", name)
	}
}
