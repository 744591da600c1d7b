package floor

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/nats-io/nats.go"

	"github.com/queengate/queengate/internal/bench/proc"
	"github.com/queengate/queengate/internal/natsembed"
	"github.com/queengate/queengate/internal/pgtest"
)

func TestMain(m *testing.M) { pgtest.Run(m) }

// storedMessageBytes is about what a 100-byte message takes in a pop's
// answer (its offset, transactionId, createdAt and data in JSON).
const storedMessageBytes = 190

// BenchmarkNATSRequestReply is a pop's round trip with nothing behind it:
// a requester and a responder, each its own connection, and the server,
// all in this process, so the CPU reported counts the three. The request
// is a pop carrying an ack's size; the answer a batch of messages.
func BenchmarkNATSRequestReply(b *testing.B) {
	for _, messages := range []int{10, 100, 1000} {
		b.Run(fmt.Sprintf("answer=%d", messages), func(b *testing.B) {
			requester, responder := connectedPair(b)
			answer := make([]byte, messages*storedMessageBytes)
			if _, err := responder.Subscribe("floor.pop", func(m *nats.Msg) { _ = m.Respond(answer) }); err != nil {
				b.Fatal(err)
			}
			if err := responder.Flush(); err != nil {
				b.Fatal(err)
			}
			request := make([]byte, 300)
			measureCPU(b, nil, 1, func() {
				if _, err := requester.Request("floor.pop", request, 10*time.Second); err != nil {
					b.Fatal(err)
				}
			})
		})
	}
}

func connectedPair(b *testing.B) (requester, responder *nats.Conn) {
	srv, err := natsembed.Start(natsembed.Config{Port: -1, MaxPayload: 8 << 20})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(srv.Shutdown)
	connect := func() *nats.Conn {
		nc, err := nats.Connect(srv.ClientURL())
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(nc.Close)
		return nc
	}
	return connect(), connect()
}

// BenchmarkPostgresRowUpdates is the least a durable cycle writes: a
// cursor-sized row updated by key and returned, committed, from one
// connection; rows=8 updates eight in one statement, as cycles of several
// consumers fused into one statement would. The CPU reported, per row, is
// this process's and the connection's backend's. The test cluster runs
// without fsync, so a real server's commit costs more, never less.
func BenchmarkPostgresRowUpdates(b *testing.B) {
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, pgtest.NewDB(b))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = conn.Close(ctx) })
	const setup = `CREATE TABLE floor_cursor (id int PRIMARY KEY, next_offset bigint NOT NULL, lease_id uuid, lease_until timestamptz);
		INSERT INTO floor_cursor SELECT g, 0 FROM generate_series(1, 64) g`
	if _, err := conn.Exec(ctx, setup); err != nil {
		b.Fatal(err)
	}
	var backend int
	if err := conn.QueryRow(ctx, `SELECT pg_backend_pid()`).Scan(&backend); err != nil {
		b.Fatal(err)
	}
	for _, rows := range []int{1, 8} {
		b.Run(fmt.Sprintf("rows=%d", rows), func(b *testing.B) {
			ids := make([]int32, rows)
			next := int32(0)
			measureCPU(b, &backend, rows, func() {
				for i := range ids {
					next = next%64 + 1
					ids[i] = next
				}
				updated, err := conn.Query(ctx, `UPDATE floor_cursor SET next_offset = next_offset + 100, lease_id = gen_random_uuid(),
					lease_until = clock_timestamp() + interval '30 seconds' WHERE id = ANY($1) RETURNING id, lease_id, lease_until`, ids)
				if err != nil {
					b.Fatal(err)
				}
				n := 0
				for updated.Next() {
					n++
				}
				if err := updated.Err(); err != nil || n != rows {
					b.Fatalf("%d rows updated, want %d: %v", n, rows, err)
				}
			})
		})
	}
}

// measureCPU runs op b.N times and reports this process's CPU per unit
// (an op does units of work) and, given a backend's pid on this machine,
// that process's too.
func measureCPU(b *testing.B, backend *int, units int, op func()) {
	ownBefore, err := proc.OwnCPUSeconds()
	if err != nil {
		b.Fatal(err)
	}
	var backendBefore float64
	if backend != nil {
		if backendBefore, err = proc.CPUSeconds(*backend); err != nil {
			b.Fatalf("the backend's CPU (a server on this machine is needed): %v", err)
		}
	}
	for b.Loop() { // the set-up above is outside the timed loop
		op()
	}
	own, err := proc.OwnCPUSeconds()
	if err != nil {
		b.Fatal(err)
	}
	perUnit := func(seconds float64) float64 { return seconds * 1e6 / float64(b.N*units) }
	b.ReportMetric(perUnit(own-ownBefore), "cpu-µs/unit")
	if backend != nil {
		after, err := proc.CPUSeconds(*backend)
		if err != nil {
			b.Fatal(err)
		}
		b.ReportMetric(perUnit(after-backendBefore), "backend-cpu-µs/unit")
	}
}
