package consume_test

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/rs/zerolog"

	queengate "github.com/queengate/queengate"
	"github.com/queengate/queengate/consume"
	"github.com/queengate/queengate/gateway"
	"github.com/queengate/queengate/ingest"
	"github.com/queengate/queengate/internal/checkfor"
	"github.com/queengate/queengate/internal/natsembed"
	"github.com/queengate/queengate/internal/pgtest"
)

// BenchmarkIdleLongPolls measures what long-polling consumers cost while
// nothing arrives: QG_IDLE_POLLERS (default 10000) pops of one group wait
// QG_IDLE_WAIT_MS each (default 20000, the most a pop may) and poll again,
// on one in-process gateway, for QG_IDLE_SECONDS (default 30) after a
// warm-up. It reports the statements of the gateway's consumer store per
// second (connections acquired: one per statement), the database's
// transactions per second (pg_stat_database, all clients), and the CPU
// of the whole process (gateway, embedded NATS and the pollers' client:
// an upper bound on the gateway's) as % of one core:
//
//	go test -run '^$' -bench IdleLongPolls -benchtime 1x ./consume
func BenchmarkIdleLongPolls(b *testing.B) {
	pollers, waitMs, seconds := envInt("QG_IDLE_POLLERS", 10000), envInt("QG_IDLE_WAIT_MS", queengate.MaxWaitMs), envInt("QG_IDLE_SECONDS", 30)
	ns, err := natsembed.Start(natsembed.Config{Port: -1})
	if err != nil {
		b.Fatal(err)
	}
	defer ns.Shutdown()
	url := pgtest.NewDB(b)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	connect := func() *nats.Conn {
		nc, err := nats.Connect(ns.ClientURL())
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(nc.Close)
		return nc
	}
	ing, err := ingest.New(pgtest.Store(b, url), ingest.Config{}, zerolog.Nop(), nil)
	if err != nil {
		b.Fatal(err)
	}
	if err := ing.Start(ctx); err != nil {
		b.Fatal(err)
	}
	consumerStore := pgtest.Store(b, url)
	consumers := consume.New(consumerStore)
	gw, err := gateway.New(gateway.Config{Endpoints: []gateway.EndpointSet{consumers}, DrainTimeout: 100 * time.Millisecond},
		connect(), ing, zerolog.Nop(), nil)
	if err != nil {
		b.Fatal(err)
	}
	ing.OnCommit(gw.PublishCommitted)
	if err := gw.Start(ctx); err != nil {
		b.Fatal(err)
	}
	defer gw.Stop()
	// As in the daemon: writing the waiting group's activity is part of
	// what idle polls cost.
	flusher := consumers.ActivityFlusher(zerolog.Nop())
	if err := flusher.Start(ctx); err != nil {
		b.Fatal(err)
	}
	defer flusher.Stop()
	client, err := queengate.NewClient(connect())
	if err != nil {
		b.Fatal(err)
	}
	if _, err := client.Push(ctx, "idle", "p", queengate.Message{TransactionID: "one", Data: []byte(`1`)}); err != nil {
		b.Fatal(err)
	}
	a, err := client.Pop(ctx, "idle", "", queengate.PopRequest{Group: "g"})
	if err != nil || len(a.Messages) != 1 {
		b.Fatalf("pop: %+v, %v", a, err)
	}
	if _, err := client.Ack(ctx, "idle", a.Partition, queengate.AckRequest{Group: "g", LeaseID: a.LeaseID,
		Items: []queengate.AckItem{{TransactionID: "one", Status: queengate.AckCompleted}}}); err != nil {
		b.Fatal(err)
	}
	var wg sync.WaitGroup
	for range pollers {
		wg.Go(func() {
			for ctx.Err() == nil {
				if a, err := client.Pop(ctx, "idle", "", queengate.PopRequest{Group: "g", WaitMs: int64(waitMs)}); err == nil && len(a.Messages) > 0 {
					b.Errorf("a pop got %d messages while nothing arrived", len(a.Messages))
				}
			}
		})
	}
	defer wg.Wait()
	defer cancel()
	// Warm-up: every poller's first pop done and the poller asleep.
	checkfor.Check(b, 5*time.Minute, checkfor.Cond(fmt.Sprint(pollers, " pops asleep"), func() bool { return consumers.Sleeping("idle") == pollers }))
	commits := func() int64 {
		var n int64
		if err := consumerStore.Pool().QueryRow(ctx, "SELECT xact_commit FROM pg_stat_database WHERE datname = current_database()").Scan(&n); err != nil {
			b.Fatal(err)
		}
		return n
	}
	b.ResetTimer()
	s0, x0, cpu0, t0 := consumerStore.Pool().Stat().AcquireCount(), commits(), processCPU(), time.Now()
	time.Sleep(time.Duration(seconds) * time.Second) // the measured window: what idle costs over it
	s1, x1, cpu1, wall := consumerStore.Pool().Stat().AcquireCount(), commits(), processCPU(), time.Since(t0)
	b.ReportMetric(float64(s1-s0-1)/wall.Seconds(), "statements/s") // less the commits read
	b.ReportMetric(float64(x1-x0)/wall.Seconds(), "xact/s")
	b.ReportMetric(100*(cpu1-cpu0).Seconds()/wall.Seconds(), "cpu%")
	b.ReportMetric(float64(pollers), "pollers")
	fmt.Fprintf(os.Stderr, "%d pollers waiting %d ms: %.1f statements/s, %.1f xact/s, process CPU %.1f %% of a core over %s\n",
		pollers, waitMs, float64(s1-s0-1)/wall.Seconds(), float64(x1-x0)/wall.Seconds(), 100*(cpu1-cpu0).Seconds()/wall.Seconds(), wall.Round(time.Second))
}

func envInt(name string, def int) int {
	if n, err := strconv.Atoi(os.Getenv(name)); err == nil && n > 0 {
		return n
	}
	return def
}

// processCPU is the user and system time this process used so far.
func processCPU() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
