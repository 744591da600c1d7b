package pgstore_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/queengate/queengate/internal/pgtest"
	"github.com/queengate/queengate/model"
	"github.com/queengate/queengate/pgstore"
)

// BenchmarkFrameLayouts weighs two ways to store a bundle of many
// partitions' small frames, on tables of their own shaped like the log:
//
//   - row-per-frame: today's log_segments, one row per frame with its
//     transactionIds, data and hashes, the primary key and the
//     (partition_id, created_at) index;
//   - row-per-frame+allocator: the same, with each frame's partition
//     row updated in the same statement (its allocator and stored bytes,
//     as log_push_bundle does), to weigh what the allocator costs;
//   - row-per-bundle: one row per bundle holding every frame's arrays
//     (past PostgreSQL's TOAST threshold, so lz4 compresses it), and a
//     narrow row per frame naming the bundle and the frame's first slot,
//     with the same two indexes, for reads by partition.
//
// It reports messages/s of a single connection writing bundles, the
// bytes the frames' tables and indexes take per message (not the
// partition rows, a table of fixed size), and the time to read
// one frame back by partition and offset. Payloads are either the same
// 100 bytes every time (queenbench's, which any compressor erases) or
// 100 bytes of JSON whose ids, numbers and text vary as real ones do.
func BenchmarkFrameLayouts(b *testing.B) {
	const framesPerBundle, frameLen, partitions = 100, 10, 100_000
	for _, payload := range []string{"same", "varied"} {
		for _, layout := range []string{"row-per-frame", "row-per-frame+allocator", "row-per-bundle"} {
			b.Run(fmt.Sprintf("payload=%s/layout=%s", payload, layout), func(b *testing.B) {
				st := pgtest.Store(b, pgtest.NewDB(b))
				ctx := context.Background()
				l := newLayout(b, st, layout)
				gen := layoutPayloads{varied: payload == "varied", rng: rand.New(rand.NewPCG(1, 2))}
				offsets := make(map[int64]int64)
				var written int64
				for b.Loop() {
					frames := make([]model.Frame, framesPerBundle)
					for i := range frames {
						pid := gen.rng.Int64N(partitions) + 1
						frames[i] = gen.frame(pid, offsets[pid], frameLen)
						offsets[pid] += frameLen
					}
					l.write(ctx, b, frames)
					written += framesPerBundle * frameLen
				}
				b.ReportMetric(float64(written)/b.Elapsed().Seconds(), "msgs/s")
				b.ReportMetric(float64(l.bytes(ctx, b))/float64(written), "stored-B/msg")
				b.ReportMetric(l.readMicros(ctx, b, offsets), "µs/frame-read")
			})
		}
	}
}

type layoutPayloads struct {
	varied bool
	rng    *rand.Rand
	next   int
}

var layoutWords = []string{"shipped", "pending", "refunded", "priority", "gift", "express", "returned", "EUR", "USD", "web", "mobile", "store"}

func (g *layoutPayloads) frame(pid, base int64, n int) model.Frame {
	fr := model.Frame{PartitionID: pid, TxnIDs: make([]string, n), Hashes: make([]model.Hash, n), Data: make([][]byte, n)}
	for i := range n {
		g.next++
		fr.TxnIDs[i] = fmt.Sprintf("%016x-%d", g.rng.Uint64(), g.next)
		fr.Hashes[i] = model.HashTxnID(fr.TxnIDs[i])
		if !g.varied {
			fr.Data[i] = []byte(`{"orderId":9137,"amount":99.5,"note":"abcdefghijklmnopqrstuvwxyzabcdefghijklmnopqrstuvwxyzabcdefghijk"}`)
			continue
		}
		w := func() string { return layoutWords[g.rng.IntN(len(layoutWords))] }
		fr.Data[i] = fmt.Appendf(nil, `{"orderId":%d,"amount":%d.%02d,"customer":"%08x","status":"%s","tags":["%s","%s"],"session":%d}`,
			g.rng.IntN(10_000_000), g.rng.IntN(1000), g.rng.IntN(100), g.rng.Uint32(), w(), w(), w(), base+int64(i))
	}
	return fr
}

type layout struct {
	st                *pgstore.Store
	bundle, allocator bool
	nextID            int64
}

func newLayout(b *testing.B, st *pgstore.Store, name string) *layout {
	l := &layout{st: st, bundle: name == "row-per-bundle", allocator: name == "row-per-frame+allocator"}
	ddl := `CREATE TABLE lay_frames (partition_id bigint, base_offset bigint, end_offset bigint, created_at timestamptz,
		txn_ids text[] COMPRESSION lz4, data json[] COMPRESSION lz4, hashes uuid[], PRIMARY KEY (partition_id, base_offset));
		ALTER TABLE lay_frames ALTER hashes SET STORAGE EXTERNAL;
		CREATE INDEX ON lay_frames (partition_id, created_at)`
	if l.bundle {
		ddl = `CREATE TABLE lay_bundles (id bigint PRIMARY KEY, created_at timestamptz,
			txn_ids text[] COMPRESSION lz4, data json[] COMPRESSION lz4, hashes uuid[] COMPRESSION lz4);
		CREATE TABLE lay_frames (partition_id bigint, base_offset bigint, end_offset bigint, created_at timestamptz,
			bundle_id bigint, first int, PRIMARY KEY (partition_id, base_offset));
		CREATE INDEX ON lay_frames (partition_id, created_at)`
	}
	if l.allocator {
		// Shaped like log_partitions: a row per partition, half-full pages
		// so that updates stay on their page (HOT).
		ddl += `; CREATE TABLE lay_partitions (id bigint PRIMARY KEY, queue_id bigint, name text, last_offset bigint,
			txns_start bigint, created_at timestamptz, stored_bytes bigint) WITH (fillfactor = 50);
		INSERT INTO lay_partitions SELECT i, 1, 'p' || i, -1, 0, now(), 0 FROM generate_series(1, 100000) i`
	}
	if _, err := st.Pool().Exec(context.Background(), ddl); err != nil {
		b.Fatal(err)
	}
	return l
}

// write stores one bundle in one statement, as a push does.
func (l *layout) write(ctx context.Context, b *testing.B, frames []model.Frame) {
	var pids, bases, ends, firsts []int64
	var txnIDs []string
	var data []string
	var hashes []model.Hash
	for _, fr := range frames {
		pids = append(pids, fr.PartitionID)
		firsts = append(firsts, int64(len(txnIDs)+1))
		txnIDs = append(txnIDs, fr.TxnIDs...)
		for i := range fr.Data {
			data = append(data, string(fr.Data[i]))
			hashes = append(hashes, fr.Hashes[i])
		}
	}
	// Offsets only need to be unique within a partition: the bundle's
	// sequence number makes them so.
	for i := range frames {
		bases = append(bases, l.nextID*int64(len(frames))+int64(i))
		ends = append(ends, firsts[i]+int64(len(frames[i].TxnIDs))-1)
	}
	var err error
	if l.bundle {
		l.nextID++
		_, err = l.st.Pool().Exec(ctx, `
			WITH b AS (INSERT INTO lay_bundles VALUES ($1, now(), $2::text[], $3::json[], $4::uuid[]) RETURNING id)
			INSERT INTO lay_frames SELECT p, o, o + e - f, now(), (SELECT id FROM b), f
			  FROM unnest($5::bigint[], $6::bigint[], $7::bigint[], $8::bigint[]) AS u(p, o, f, e)`,
			l.nextID, txnIDs, data, hashes, pids, bases, firsts, ends)
	} else if l.allocator {
		l.nextID++
		_, err = l.st.Pool().Exec(ctx, `
			WITH alloc AS (UPDATE lay_partitions lp SET last_offset = lp.last_offset + u.e - u.f + 1,
			                      stored_bytes = lp.stored_bytes + 100 * (u.e - u.f + 1)
			                 FROM unnest($4::bigint[], $6::bigint[], $7::bigint[]) AS u(p, f, e) WHERE lp.id = u.p)
			INSERT INTO lay_frames SELECT p, o, o + e - f, now(), ($1::text[])[f:e], ($2::json[])[f:e], ($3::uuid[])[f:e]
			  FROM unnest($4::bigint[], $5::bigint[], $6::bigint[], $7::bigint[]) AS u(p, o, f, e)`,
			txnIDs, data, hashes, pids, bases, firsts, ends)
	} else {
		l.nextID++
		_, err = l.st.Pool().Exec(ctx, `
			INSERT INTO lay_frames SELECT p, o, o + e - f, now(), ($1::text[])[f:e], ($2::json[])[f:e], ($3::uuid[])[f:e]
			  FROM unnest($4::bigint[], $5::bigint[], $6::bigint[], $7::bigint[]) AS u(p, o, f, e)`,
			txnIDs, data, hashes, pids, bases, firsts, ends)
	}
	if err != nil {
		b.Fatal(err)
	}
}

func (l *layout) bytes(ctx context.Context, b *testing.B) int64 {
	var n int64
	q := `SELECT pg_total_relation_size('lay_frames')`
	if l.bundle {
		q += ` + pg_total_relation_size('lay_bundles')`
	}
	if err := l.st.Pool().QueryRow(ctx, q).Scan(&n); err != nil {
		b.Fatal(err)
	}
	return n
}

// readMicros is the mean time to read 200 frames' data back, one query
// each, by partition and offset.
func (l *layout) readMicros(ctx context.Context, b *testing.B, offsets map[int64]int64) float64 {
	q := `SELECT data FROM lay_frames WHERE partition_id = $1 ORDER BY base_offset LIMIT 1`
	if l.bundle {
		q = `SELECT bu.data[f.first : f.first + f.end_offset - f.base_offset]
		       FROM lay_frames f JOIN lay_bundles bu ON bu.id = f.bundle_id
		      WHERE f.partition_id = $1 ORDER BY f.base_offset LIMIT 1`
	}
	b.StopTimer()
	defer b.StartTimer()
	var pids []int64
	for pid := range offsets {
		if pids = append(pids, pid); len(pids) == 200 {
			break
		}
	}
	start := time.Now()
	for _, pid := range pids {
		var got []string
		if err := l.st.Pool().QueryRow(ctx, q, pid).Scan(&got); err != nil && err != pgx.ErrNoRows {
			b.Fatal(err)
		}
	}
	return float64(time.Since(start).Microseconds()) / float64(len(pids))
}
