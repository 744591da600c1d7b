package gateway_test

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/rs/zerolog"

	"github.com/queengate/queengate/gateway"
	"github.com/queengate/queengate/ingest"
	"github.com/queengate/queengate/internal/natsembed"
	"github.com/queengate/queengate/internal/pgtest"
)

// BenchmarkGatewayPush drives an in-process gateway (embedded NATS, real
// PostgreSQL) with request-reply producers, the way issue 3 asks it to be
// measured. One op is one request; it reports msg/s and the p50/p99
// request latency. Producers, NATS, the gateway and PostgreSQL share the
// machine. Compare msg/s with pgstore's BenchmarkCeiling in the same run:
//
//	go test -run '^$' -bench 'GatewayPush|Ceiling/batch=1000' -benchtime 20000x ./gateway ./pgstore
func BenchmarkGatewayPush(b *testing.B) {
	cases := []struct {
		name                   string
		producers, perRequest  int
		partitions, windowSecs int
	}{
		{"a/producers=1/msgs=100/window=3600", 1, 100, 1, 3600},
		{"b/producers=64/msgs=100/partitions=100/window=0", 64, 100, 100, 0},
		{"b/producers=64/msgs=100/partitions=100/window=3600", 64, 100, 100, 3600},
		{"c/producers=64/msgs=1/partitions=100/window=3600", 64, 1, 100, 3600},
	}
	for _, c := range cases {
		b.Run(c.name, func(b *testing.B) {
			benchGateway(b, c.producers, c.perRequest, c.partitions, c.windowSecs)
		})
	}
}

func benchGateway(b *testing.B, producers, perRequest, partitions, windowSecs int) {
	ns, err := natsembed.Start(natsembed.Config{Port: -1})
	if err != nil {
		b.Fatal(err)
	}
	defer ns.Shutdown()
	url := pgtest.NewDB(b)
	store := pgtest.Store(b, url)
	ctx := context.Background()
	// Create the partitions with the window under test before timing.
	for p := range partitions {
		if _, err := store.EnsurePartition(ctx, "bench", fmt.Sprintf("p%d", p)); err != nil {
			b.Fatal(err)
		}
	}
	if _, err := store.Pool().Exec(ctx, "UPDATE queen.queues SET dedup_window_seconds = $1", windowSecs); err != nil {
		b.Fatal(err)
	}
	gwConn, err := nats.Connect(ns.ClientURL())
	if err != nil {
		b.Fatal(err)
	}
	defer gwConn.Close()
	ing, err := ingest.New(store, ingest.Config{}, zerolog.Nop(), nil)
	if err != nil {
		b.Fatal(err)
	}
	if err := ing.Start(ctx); err != nil {
		b.Fatal(err)
	}
	gw, err := gateway.New(gateway.Config{}, gwConn, ing, zerolog.Nop(), nil)
	if err != nil {
		b.Fatal(err)
	}
	if err := gw.Start(ctx); err != nil {
		b.Fatal(err)
	}
	defer gw.Stop()

	// Producers share a few connections, as clients of one process would.
	conns := make([]*nats.Conn, min(producers, 8))
	for i := range conns {
		if conns[i], err = nats.Connect(ns.ClientURL()); err != nil {
			b.Fatal(err)
		}
		defer conns[i].Close()
	}
	bodies := func(p, seq int) []byte {
		body := make([]byte, 0, perRequest*120)
		body = append(body, '[')
		for i := range perRequest {
			if i > 0 {
				body = append(body, ',')
			}
			body = fmt.Appendf(body, `{"transactionId":"b-%d-%d-%d","data":{"orderId":%d,"amount":99.5,"note":"about a hundred bytes of payload"}}`, p, seq, i, seq)
		}
		return append(body, ']')
	}

	var (
		next      atomic.Int64
		mu        sync.Mutex
		latencies = make([]time.Duration, 0, b.N)
		wg        sync.WaitGroup
	)
	b.ResetTimer()
	start := time.Now()
	for p := range producers {
		wg.Go(func() {
			nc := conns[p%len(conns)]
			subject := fmt.Sprintf("queen.push.bench.p%d", p%partitions)
			local := make([]time.Duration, 0, b.N/producers+1)
			for {
				seq := int(next.Add(1))
				if seq > b.N {
					break
				}
				body := bodies(p, seq)
				t0 := time.Now()
				m, err := nc.Request(subject, body, time.Minute)
				if err != nil {
					b.Error(err)
					return
				}
				if m.Header.Get("Nats-Service-Error-Code") != "" {
					b.Errorf("rejected: %s", m.Data)
					return
				}
				local = append(local, time.Since(t0))
			}
			mu.Lock()
			latencies = append(latencies, local...)
			mu.Unlock()
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	b.StopTimer()
	if len(latencies) == 0 {
		return
	}
	slices.Sort(latencies)
	pct := func(q float64) float64 {
		return float64(latencies[min(len(latencies)-1, int(q*float64(len(latencies))))].Microseconds()) / 1000
	}
	b.ReportMetric(float64(len(latencies)*perRequest)/elapsed.Seconds(), "msg/s")
	b.ReportMetric(pct(0.50), "p50-ms")
	b.ReportMetric(pct(0.99), "p99-ms")
}
