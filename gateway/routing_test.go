package gateway_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"

	"github.com/queengate/queengate/gateway"
	"github.com/queengate/queengate/ingest"
	"github.com/queengate/queengate/internal/checkfor"
	"github.com/queengate/queengate/internal/gatewaytest"
	"github.com/queengate/queengate/internal/natsembed"
	"github.com/queengate/queengate/internal/pgtest"
	"github.com/queengate/queengate/routing"
)

const testShards = 64

// fastRouting makes handovers quick enough for tests.
func fastRouting() *routing.Config {
	return &routing.Config{Shards: testShards, HeartbeatEvery: 50 * time.Millisecond,
		MemberTimeout: 250 * time.Millisecond, LeaveTimeout: 2 * time.Second}
}

func TestShardOfIsWhereTheServerMapsAPush(t *testing.T) {
	t.Parallel()
	e := newEnvWith(t, natsembed.Config{Port: -1, Mappings: routing.ShardMappings("queen", testShards)})
	got := make(chan *nats.Msg, 512)
	if _, err := e.Client.ChanSubscribe("queen.shard.>", got); err != nil {
		t.Fatal(err)
	}
	type push struct{ subject, queue, partition string }
	var pushes []push
	for i := range 200 {
		q, p := fmt.Sprintf("q%d", i%7), fmt.Sprintf("p-%d", i)
		pushes = append(pushes, push{"queen.push." + q + "." + p, q, p})
	}
	pushes = append(pushes, push{"queen.push.orders", "orders", ""}) // the Default form hashes the queue alone
	for _, p := range pushes {
		if err := e.Client.Publish(p.subject, nil); err != nil {
			t.Fatal(err)
		}
	}
	for _, p := range pushes {
		select {
		case m := <-got:
			tokens := []string{p.queue}
			want := "queen.shard.%d." + p.queue
			if p.partition != "" {
				tokens = append(tokens, p.partition)
				want += "." + p.partition
			}
			if w := fmt.Sprintf(want, routing.ShardOf(testShards, tokens...)); m.Subject != w {
				t.Errorf("%s arrived on %s; ShardOf says %s", p.subject, m.Subject, w)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("push %s never arrived on a shard subject", p.subject)
		}
	}
}

// TestPopMappingsPickThePushShard: a pop naming its partition, mapped by
// routing.PopMappings, arrives on the pop shard of the same number as
// the partition's pushes; a pop of any partition is left as sent.
func TestPopMappingsPickThePushShard(t *testing.T) {
	t.Parallel()
	e := newEnvWith(t, natsembed.Config{Port: -1, Mappings: routing.PopMappings("queen", testShards)})
	got := make(chan *nats.Msg, 256)
	for _, subject := range []string{"queen.popshard.>", "queen.consume.pop.>"} {
		if _, err := e.Client.ChanSubscribe(subject, got); err != nil {
			t.Fatal(err)
		}
	}
	pops := map[string]string{"queen.consume.pop.orders": "queen.consume.pop.orders"}
	for i := range 100 {
		q, p := fmt.Sprintf("q%d", i%7), fmt.Sprintf("p-%d", i)
		pops["queen.consume.pop."+q+"."+p] = fmt.Sprintf("queen.popshard.%d.%s.%s", routing.ShardOf(testShards, q, p), q, p)
	}
	for subject := range pops {
		if err := e.Client.Publish(subject, []byte(subject)); err != nil {
			t.Fatal(err)
		}
	}
	for range pops {
		select {
		case m := <-got:
			if want := pops[string(m.Data)]; m.Subject != want {
				t.Errorf("%s arrived on %s, want %s", m.Data, m.Subject, want)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("a pop never arrived")
		}
	}
}

// mappingGauge is queengate_routing_mapping{state} as reg has it.
func mappingGauge(t *testing.T, reg *prometheus.Registry, state string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != "queengate_routing_mapping" {
			continue
		}
		for _, m := range mf.GetMetric() {
			if m.GetLabel()[0].GetValue() == state {
				return m.GetGauge().GetValue()
			}
		}
	}
	return -1
}

func TestMappingProbe(t *testing.T) {
	t.Parallel()
	t.Run("present", func(t *testing.T) {
		t.Parallel()
		e := newEnvWith(t, natsembed.Config{Port: -1, Mappings: routing.ShardMappings("queen", testShards)})
		reg := prometheus.NewRegistry()
		e.StartGateway(gatewayOpts{Gateway: gateway.Config{Routing: fastRouting()}, Reg: reg})
		if v := mappingGauge(t, reg, "present"); v != 1 {
			t.Errorf("mapping{state=present} = %v, want 1", v)
		}
		wantStatus(t, e.Push(t, e.Subject("p"), msgs("a", "a")), "queued", "duplicate")
		wantStatus(t, e.Push(t, e.Subject(""), msgs("b")), "queued")
	})
	t.Run("absent: serves in the queue group, and says so", func(t *testing.T) {
		t.Parallel()
		e := newEnv(t)
		reg := prometheus.NewRegistry()
		e.StartGateway(gatewayOpts{Gateway: gateway.Config{Routing: fastRouting()}, Reg: reg})
		if v := mappingGauge(t, reg, "absent"); v != 1 {
			t.Errorf("mapping{state=absent} = %v, want 1", v)
		}
		wantStatus(t, e.Push(t, e.Subject("p"), msgs("a", "a")), "queued", "duplicate")
	})
	t.Run("another shard count: refuses to start", func(t *testing.T) {
		t.Parallel()
		e := newEnvWith(t, natsembed.Config{Port: -1, Mappings: routing.ShardMappings("queen", 2*testShards)})
		nc, err := nats.Connect(e.NS.ClientURL())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(nc.Close)
		ing, err := ingest.New(e.Store, ingest.Config{}, zerolog.Nop(), nil)
		if err != nil {
			t.Fatal(err)
		}
		gw, err := gateway.New(gateway.Config{Routing: fastRouting()}, nc, ing, zerolog.Nop(), nil)
		if err != nil {
			t.Fatal(err)
		}
		err = gw.Start(context.Background())
		if err == nil || !strings.Contains(err.Error(), "QUEEN_ROUTING_SHARDS") {
			t.Fatalf("Start with a mapping onto %d shards for a fleet of %d: %v, want an error naming QUEEN_ROUTING_SHARDS",
				2*testShards, testShards, err)
		}
	})
}

// fleetView watches the gateways' heartbeats from outside: which shards
// each says it serves.
type fleetView struct {
	mu      sync.Mutex
	serving map[string][]bool
}

func watchFleet(t *testing.T, nc *nats.Conn) *fleetView {
	t.Helper()
	f := &fleetView{serving: map[string][]bool{}}
	_, err := nc.Subscribe("queen.gateways.heartbeat", func(m *nats.Msg) {
		var hb struct{ ID, Serving string }
		if json.Unmarshal(m.Data, &hb) != nil {
			return
		}
		s, err := routing.DecodeServing(hb.Serving, testShards)
		if err != nil {
			return
		}
		f.mu.Lock()
		f.serving[hb.ID] = s
		f.mu.Unlock()
	})
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// servedOnceBy reports whether every shard is served by exactly one of
// the gateways and each serves some.
func (f *fleetView) servedOnceBy(gws ...*gateway.Gateway) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, gw := range gws {
		s := f.serving[gw.ID()]
		if s == nil || !contains(s, true) {
			return false
		}
	}
	for k := range testShards {
		n := 0
		for _, gw := range gws {
			if f.serving[gw.ID()][k] {
				n++
			}
		}
		if n != 1 {
			return false
		}
	}
	return true
}

func contains(s []bool, v bool) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}

// startMappedCluster starts n clustered nats-servers, each mapping pushes
// onto testShards shards, and waits for the full mesh.
func startMappedCluster(t *testing.T, n int) []*server.Server {
	t.Helper()
	var nodes []*server.Server
	for i := range n {
		opts := &server.Options{ServerName: fmt.Sprintf("N%d", i), Host: "127.0.0.1", Port: -1, NoLog: true, NoSigs: true,
			Cluster: server.ClusterOpts{Name: "queengate-routing", Host: "127.0.0.1", Port: -1}}
		if i > 0 {
			opts.Routes = server.RoutesFromStr(fmt.Sprintf("nats://127.0.0.1:%d", nodes[0].ClusterAddr().Port))
		}
		ns, err := server.NewServer(opts)
		if err != nil {
			t.Fatal(err)
		}
		for src, dest := range routing.ShardMappings("queen", testShards) {
			if err := ns.GlobalAccount().AddMapping(src, dest); err != nil {
				t.Fatal(err)
			}
		}
		go ns.Start()
		if !ns.ReadyForConnections(10 * time.Second) {
			t.Fatal("nats-server did not start")
		}
		t.Cleanup(ns.Shutdown)
		nodes = append(nodes, ns)
	}
	checkfor.Check(t, 10*time.Second, checkfor.Cond("the cluster's full mesh", func() bool {
		for _, ns := range nodes {
			if ns.NumRoutes() < n-1 {
				return false
			}
		}
		return true
	}))
	return nodes
}

// pushEach pushes ids to each partition and returns the answers by
// partition.
func (e *testEnv) pushEach(t *testing.T, partitions []string, ids ...string) map[string][]answer {
	t.Helper()
	out := map[string][]answer{}
	for _, p := range partitions {
		out[p] = e.Push(t, e.Subject(p), msgs(ids...))
	}
	return out
}

// TestFleetSharesShardsAndTakesOverFromAKilledGateway runs three gateways
// on a three-node NATS cluster: each shard is served by one of them, each
// partition's pushes reach one gateway only, and when one gateway dies
// outright (its connection gone, no goodbye) the other two serve its
// shards, answering its partitions' retries exactly.
func TestFleetSharesShardsAndTakesOverFromAKilledGateway(t *testing.T) {
	t.Parallel()
	nodes := startMappedCluster(t, 3)
	client, err := nats.Connect(nodes[2].ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(client.Close)
	url := pgtest.SharedURL(t)
	e := &testEnv{&gatewaytest.Env{T: t, NS: nodes[0], Client: client, Store: pgtest.Store(t, url), PGURL: url, Prefix: "queen",
		Queue: pgtest.UniqueName(t), Conns: map[*gateway.Gateway]*nats.Conn{}}}
	fleet := watchFleet(t, client)
	var gws []*gateway.Gateway
	var ings []*ingest.Ingester
	for i := range 3 {
		gw, ing := e.StartGateway(gatewayOpts{NATSURL: nodes[i].ClientURL(), Gateway: gateway.Config{Routing: fastRouting()}})
		gws, ings = append(gws, gw), append(ings, ing)
	}
	checkfor.Check(t, 10*time.Second, checkfor.Cond("every shard served by exactly one gateway", func() bool { return fleet.servedOnceBy(gws...) }))

	var partitions []string
	for i := range 30 {
		partitions = append(partitions, fmt.Sprintf("p%d", i))
	}
	first := e.pushEach(t, partitions, "a", "b")
	for _, p := range partitions {
		wantStatus(t, first[p], "queued", "queued")
		servedBy := 0
		for _, ing := range ings {
			if ing.Counts(first[p][0].PartitionID).Queued > 0 {
				servedBy++
			}
		}
		if servedBy != 1 {
			t.Errorf("partition %s was pushed through %d gateways, want 1", p, servedBy)
		}
	}

	killed := time.Now()
	e.Conns[gws[1]].Close()
	checkfor.Check(t, 10*time.Second, checkfor.Cond("the two survivors to serve every shard", func() bool { return fleet.servedOnceBy(gws[0], gws[2]) }))
	t.Logf("the survivors served the killed gateway's shards %v after its connection closed", time.Since(killed).Round(time.Millisecond))

	again := e.pushEach(t, partitions, "a", "b", "c")
	for _, p := range partitions {
		wantStatus(t, again[p], "duplicate", "duplicate", "queued")
		if off(again[p][0]) != off(first[p][0]) || off(again[p][1]) != off(first[p][1]) {
			t.Errorf("partition %s: retries answered %v, the originals were %v", p, again[p][:2], first[p])
		}
	}
}

// TestJoinAndGracefulLeaveLeaveNoShardUnserved pushes without pause while a
// gateway leaves (Stop) and another joins: handovers are make-before-break,
// so no request meets "no responders", and every answer is exact.
func TestJoinAndGracefulLeaveLeaveNoShardUnserved(t *testing.T) {
	t.Parallel()
	e := newEnvWith(t, natsembed.Config{Port: -1, Mappings: routing.ShardMappings("queen", testShards)})
	fleet := watchFleet(t, e.Client)
	opts := gatewayOpts{Gateway: gateway.Config{Routing: fastRouting()}}
	a, ingA := e.StartGateway(opts)
	b, ingB := e.StartGateway(opts)
	checkfor.Check(t, 10*time.Second, checkfor.Cond("A and B sharing the shards", func() bool { return fleet.servedOnceBy(a, b) }))

	var partitions []string
	for i := range 20 {
		partitions = append(partitions, fmt.Sprintf("p%d", i))
	}
	anchors := e.pushEach(t, partitions, "anchor")
	var rounds, noResponders atomic.Int64
	var failures []string
	var mu sync.Mutex
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		for n := 0; ; n++ {
			for _, p := range partitions {
				select {
				case <-stop:
					return
				default:
				}
				body := fmt.Sprintf(`[{"transactionId":"m-%d"},{"transactionId":"anchor"}]`, n)
				msg, err := e.Client.Request(e.Subject(p), []byte(body), 10*time.Second)
				var got []answer
				switch {
				case errors.Is(err, nats.ErrNoResponders):
					noResponders.Add(1)
					continue
				case err == nil && json.Unmarshal(msg.Data, &got) == nil && len(got) == 2 &&
					got[0].Status == "queued" && got[1].Status == "duplicate" && off(got[1]) == off(anchors[p][0]):
					continue
				}
				mu.Lock()
				failures = append(failures, fmt.Sprintf("%s round %d: %v %v", p, n, err, got))
				mu.Unlock()
			}
			rounds.Add(1)
		}
	}()
	waitRounds := func(what string) {
		at := rounds.Load()
		checkfor.Check(t, 30*time.Second, checkfor.Cond(what, func() bool { return rounds.Load() >= at+5 }))
	}
	waitRounds("pushes before the leave")
	b.Stop()
	waitRounds("pushes after the leave")
	if !fleet.servedOnceBy(a) {
		t.Error("after B's graceful leave, A does not serve every shard")
	}
	c, ingC := e.StartGateway(opts)
	checkfor.Check(t, 10*time.Second, checkfor.Cond("A and C sharing the shards", func() bool { return fleet.servedOnceBy(a, c) }))
	waitRounds("pushes after the join")
	close(stop)
	<-done

	if n := noResponders.Load(); n > 0 {
		t.Errorf("%d requests met no responders during a leave and a join", n)
	}
	for _, f := range failures {
		t.Error(f)
	}
	// A partition is hydrated once per gateway it meets (first contact);
	// the gaps a handover leaves are filled, not rehydrated.
	var hydrations, fills int64
	for _, ing := range []*ingest.Ingester{ingA, ingB, ingC} {
		st, _ := ing.CacheSummary()
		hydrations, fills = hydrations+st.Hydrations, fills+st.Fills
	}
	t.Logf("%d rounds over %d partitions: %d hydrations, %d fills", rounds.Load(), len(partitions), hydrations, fills)
	if max := int64(3 * len(partitions)); hydrations > max {
		t.Errorf("%d hydrations for %d partitions and two handovers, want at most %d", hydrations, len(partitions), max)
	}
}

// TestAGatewayThatCannotReachPostgresHandsItsShardsOver: a gateway whose
// store is down says so in its heartbeats, and the ready ones take its
// shards; it takes its share back once ready again.
func TestAGatewayThatCannotReachPostgresHandsItsShardsOver(t *testing.T) {
	t.Parallel()
	e := newEnvWith(t, natsembed.Config{Port: -1, Mappings: routing.ShardMappings("queen", testShards)})
	fleet := watchFleet(t, e.Client)
	a, _ := e.StartGateway(gatewayOpts{Gateway: gateway.Config{Routing: fastRouting()}})
	var bReady atomic.Bool
	bReady.Store(true)
	rb := fastRouting()
	rb.Ready = bReady.Load
	b, _ := e.StartGateway(gatewayOpts{Gateway: gateway.Config{Routing: rb}})
	checkfor.Check(t, 10*time.Second, checkfor.Cond("A and B sharing the shards", func() bool { return fleet.servedOnceBy(a, b) }))
	bReady.Store(false)
	checkfor.Check(t, 10*time.Second, checkfor.Cond("A serving every shard alone", func() bool { return fleet.servedOnceBy(a) && fleet.servingNone(b) }))
	bReady.Store(true)
	checkfor.Check(t, 10*time.Second, checkfor.Cond("B taking its share back", func() bool { return fleet.servedOnceBy(a, b) }))
}

// servingNone reports whether gw says it serves no shard.
func (f *fleetView) servingNone(gw *gateway.Gateway) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	s, ok := f.serving[gw.ID()]
	return ok && !contains(s, true)
}
