package consume_test

import (
	"fmt"
	"maps"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/prometheus/client_golang/prometheus"

	queengate "github.com/queengate/queengate"
	"github.com/queengate/queengate/gateway"
	"github.com/queengate/queengate/ingest"
	"github.com/queengate/queengate/internal/checkfor"
	"github.com/queengate/queengate/internal/gatewaytest"
	"github.com/queengate/queengate/internal/natsembed"
	"github.com/queengate/queengate/internal/peers"
	"github.com/queengate/queengate/routing"
)

// TestNamedPopsReachThePartitionsOwner: with NATS mapping named pops onto
// the routing shards (routing.PopMappings) as it maps pushes, a pop of a
// partition reaches the gateway that wrote the partition, so every cycle
// of two gateways' consumers with a next batch is served from the tail
// (in check mode: each read back from SQL); only each partition's last
// cycle, with nothing after it, misses.
func TestNamedPopsReachThePartitionsOwner(t *testing.T) {
	t.Parallel()
	const shards = 8
	mappings := routing.ShardMappings("queen", shards)
	maps.Copy(mappings, routing.PopMappings("queen", shards))
	e := &testEnv{Env: gatewaytest.NewEnvWith(t, natsembed.Config{Port: -1, Mappings: mappings})}
	// A member timeout far above a loaded machine's pauses: a shard that
	// moves mid-test sends its partition's pops to a gateway that did not
	// write it.
	cfg := &routing.Config{Shards: shards, HeartbeatEvery: 50 * time.Millisecond, MemberTimeout: 10 * time.Second,
		LeaveTimeout: 2 * time.Second}
	var (
		ings   []*ingest.Ingester
		served []func() float64
	)
	for range 2 {
		reg := prometheus.NewRegistry()
		_, ing := e.StartGateway(gatewayOpts{Consume: true, Reg: reg, Gateway: gateway.Config{Routing: cfg}})
		ings = append(ings, ing)
		served = append(served, shardsServed(t, reg))
	}
	// Settled: the gauges alone may add up mid-handover, while the
	// releasing gateway still subscribes a shard its new owner has
	// taken, and the fill's first pushes would go to either.
	checkfor.Check(t, 10*time.Second, checkfor.Cond("the two gateways to share the shards, each with one subscriber", func() bool {
		a, b := served[0](), served[1]()
		return a > 0 && b > 0 && a+b == shards && oneSubscriberPerShard(t, e.NS, shards)
	}))

	var partitions []string
	for i := range 16 {
		partitions = append(partitions, fmt.Sprintf("p%d", i))
	}
	e.fill(t, 9, partitions...)
	c := e.queenClient(t)
	cycles := 0
	for _, p := range partitions {
		a, err := c.Pop(t.Context(), e.Queue, p, queengate.PopRequest{Group: "g", Max: 2, LeaseMs: 600000})
		for err == nil && a.LeaseID != "" {
			ack := &queengate.PopAck{Partition: p, LeaseID: a.LeaseID, Items: completeAll(a)}
			a, err = c.Pop(t.Context(), e.Queue, p, queengate.PopRequest{Group: "g", Max: 2, LeaseMs: 600000, Ack: ack})
			cycles++
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	var n struct{ served, missed, refused int64 }
	for _, ing := range ings {
		c := ing.Tail().Counts()
		n.served, n.missed, n.refused = n.served+c.Served, n.missed+c.Missed, n.refused+c.Refused
	}
	if want := int64(cycles - len(partitions)); n.served != want || n.missed != int64(len(partitions)) || n.refused != 0 {
		t.Fatalf("%d cycles: %d served from a tail, %d missed, %d refused; want %d served, one missed a partition (its last), none refused",
			cycles, n.served, n.missed, n.refused, want)
	}
}

// oneSubscriberPerShard says whether the NATS server has exactly one
// subscription for each shard's push subject and for its pop subject.
func oneSubscriberPerShard(t *testing.T, ns *server.Server, shards int) bool {
	subjects := queengate.Subjects{Prefix: "queen"}
	for k := range shards {
		for _, verb := range []queengate.API{peers.Shard, peers.PopShard} {
			sz, err := ns.Subsz(&server.SubszOptions{Subscriptions: true, Test: fmt.Sprintf("%s.%d.q.p", subjects.Verb(verb), k)})
			if err != nil {
				t.Error(err)
				return false
			}
			if len(sz.Subs) != 1 {
				return false
			}
		}
	}
	return true
}

// shardsServed reads the routing gauge of the shards a gateway serves
// from its registry.
func shardsServed(t *testing.T, reg *prometheus.Registry) func() float64 {
	return func() float64 {
		families, err := reg.Gather()
		if err != nil {
			t.Error(err)
			return 0
		}
		for _, f := range families {
			if f.GetName() == "queengate_routing_shards_served" {
				return f.GetMetric()[0].GetGauge().GetValue()
			}
		}
		return 0
	}
}
