package pgstore_test

import (
	"context"
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/queengate/queengate/internal/pgtest"
	"github.com/queengate/queengate/model"
	"github.com/queengate/queengate/pgstore"
)

// The push path against the physical write ceiling of the same table, in
// the style of pgx's BenchmarkWrite…RowsVia… family. Compare rows/s of
// PushSkipProbe with the faster Ceiling variant of the same batch size, in
// the same run (go tool task bench:pgstore).

var benchBatchSizes = []int{1, 100, 1000}

// benchRows generates batches of ~100-byte messages with unique ids.
type benchRows struct {
	prefix string
	next   int
}

func (r *benchRows) frame(pid, verified int64, n int) model.Frame {
	fr := model.Frame{PartitionID: pid, Verified: verified, VerifiedWindow: model.MaxOptionSeconds,
		TxnIDs: make([]string, n), Hashes: make([]model.Hash, n), Data: make([][]byte, n)}
	for i := range n {
		r.next++
		id := r.prefix + strconv.Itoa(r.next)
		fr.TxnIDs[i] = id
		fr.Hashes[i] = model.HashTxnID(id)
		fr.Data[i] = fmt.Appendf(nil, `{"orderId":%d,"amount":99.5,"customer":"customer-42","note":"benchmark payload of about 100 bytes"}`, r.next)
	}
	return fr
}

func benchSetup(b *testing.B) (*pgstore.Store, model.Partition) {
	b.Helper()
	st := pgtest.Store(b, pgtest.NewDB(b))
	p, err := st.EnsurePartition(context.Background(), "bench", "Default")
	if err != nil {
		b.Fatal(err)
	}
	return st, p
}

func reportRows(b *testing.B, rowsPerOp int) {
	b.ReportMetric(float64(rowsPerOp)*float64(b.N)/b.Elapsed().Seconds(), "rows/s")
}

// BenchmarkPushSkipProbe is the steady state with a warm cache: p_verified
// equals last_offset, so SQL locks, allocates and writes without probing.
func BenchmarkPushSkipProbe(b *testing.B) {
	for _, n := range benchBatchSizes {
		b.Run(fmt.Sprintf("batch=%d", n), func(b *testing.B) {
			st, p := benchSetup(b)
			ctx := context.Background()
			rows := benchRows{prefix: "skip-"}
			last := int64(-1)
			b.ReportAllocs()
			for b.Loop() {
				res, err := st.Push(ctx, []model.Frame{rows.frame(p.ID, last, n)})
				if err != nil {
					b.Fatal(err)
				}
				if res[0].Probed() {
					b.Fatal("probe ran")
				}
				last = res[0].LastOffset
			}
			reportRows(b, n)
		})
	}
}

// BenchmarkPushFullProbe pushes new ids with p_verified = -1 against a
// window holding 100,000 hashes (100 frames of 1000), so every push unrolls
// them all. The window is kept at that size by deleting each pushed frame's
// log_txns row outside the timer.
func BenchmarkPushFullProbe(b *testing.B) {
	const windowHashes = 100_000
	for _, n := range benchBatchSizes {
		b.Run(fmt.Sprintf("batch=%d/window=%d", n, windowHashes), func(b *testing.B) {
			st, p := benchSetup(b)
			ctx := context.Background()
			rows := benchRows{prefix: "probe-"}
			for range windowHashes / 1000 {
				if _, err := st.Push(ctx, []model.Frame{rows.frame(p.ID, 1<<62, 1000)}); err != nil {
					b.Fatal(err)
				}
			}
			if _, err := st.Pool().Exec(ctx, "VACUUM ANALYZE queen.log_txns"); err != nil {
				b.Fatal(err)
			}
			b.ReportAllocs()
			for b.Loop() {
				res, err := st.Push(ctx, []model.Frame{rows.frame(p.ID, -1, n)})
				if err != nil {
					b.Fatal(err)
				}
				if !res[0].Probed() || res[0].BaseOffset < 0 {
					b.Fatalf("probe ran %v, base %d", res[0].Probed(), res[0].BaseOffset)
				}
				b.StopTimer()
				if _, err := st.Pool().Exec(ctx, "DELETE FROM queen.log_txns WHERE partition_id = $1 AND base_offset = $2",
					p.ID, res[0].BaseOffset); err != nil {
					b.Fatal(err)
				}
				b.StartTimer()
			}
			reportRows(b, n)
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/windowHashes, "ns/window-hash")
		})
	}
}

// BenchmarkPushNarrowed pushes 100-message frames with 20 retries against
// the same 100,000-hash window as BenchmarkPushFullProbe, the way the
// cache sends them: vouched up to the allocator, with the 20 stored slots
// named as candidates. Compare its ns/op with the full probe's: the probe
// now reads 20 slots instead of the window.
func BenchmarkPushNarrowed(b *testing.B) {
	const windowHashes = 100_000
	st, p := benchSetup(b)
	ctx := context.Background()
	rows := benchRows{prefix: "narrow-"}
	var stored []string
	for range windowHashes / 1000 {
		fr := rows.frame(p.ID, 1<<62, 1000)
		if _, err := st.Push(ctx, []model.Frame{fr}); err != nil {
			b.Fatal(err)
		}
		stored = append(stored, fr.TxnIDs...)
	}
	if _, err := st.Pool().Exec(ctx, "VACUUM ANALYZE queen.log_txns"); err != nil {
		b.Fatal(err)
	}
	last := int64(windowHashes - 1)
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		fr := rows.frame(p.ID, last, 100)
		for k := 0; k < 100; k += 5 { // 20 retries of stored ids, named where they are
			off := int64((i*7919 + k*104729) % windowHashes)
			fr.TxnIDs[k], fr.Hashes[k] = stored[off], model.HashTxnID(stored[off])
			fr.Candidates = append(fr.Candidates, model.Candidate{Index: int32(k), Offset: off})
		}
		i++
		res, err := st.Push(ctx, []model.Frame{fr})
		if err != nil {
			b.Fatal(err)
		}
		if res[0].Probe != model.ProbeNarrowed || res[0].Unrolled != 20 || res[0].LastOffset != last+80 {
			b.Fatalf("probe %v unrolled %d last %d", res[0].Probe, res[0].Unrolled, res[0].LastOffset)
		}
		last = res[0].LastOffset
	}
	reportRows(b, 100)
}

// BenchmarkCeiling writes the same frames straight into log_segments, with
// no lock, no allocator, no log_txns and no deduplication: the physical
// limit this machine's PostgreSQL puts on the push. The row-per-message
// variant measures the layout the schema did not choose.
func BenchmarkCeiling(b *testing.B) {
	for _, n := range benchBatchSizes {
		b.Run(fmt.Sprintf("batch=%d/via=copy", n), func(b *testing.B) {
			st, p := benchSetup(b)
			ctx := context.Background()
			rows := benchRows{prefix: "copy-"}
			off := int64(0)
			b.ReportAllocs()
			for b.Loop() {
				fr := rows.frame(p.ID, -1, n)
				data := make([]string, n)
				for i, d := range fr.Data {
					data[i] = string(d)
				}
				row := []any{p.ID, off, off + int64(n) - 1, time.Now(), fr.TxnIDs, data}
				if _, err := st.Pool().CopyFrom(ctx, pgx.Identifier{"queen", "log_segments"},
					[]string{"partition_id", "base_offset", "end_offset", "created_at", "txn_ids", "data"},
					pgx.CopyFromRows([][]any{row})); err != nil {
					b.Fatal(err)
				}
				off += int64(n)
			}
			reportRows(b, n)
		})
		b.Run(fmt.Sprintf("batch=%d/via=insert", n), func(b *testing.B) {
			st, p := benchSetup(b)
			ctx := context.Background()
			rows := benchRows{prefix: "insert-"}
			off := int64(0)
			b.ReportAllocs()
			for b.Loop() {
				fr := rows.frame(p.ID, -1, n)
				data := make([]string, n)
				for i, d := range fr.Data {
					data[i] = string(d)
				}
				if _, err := st.Pool().Exec(ctx, `
					INSERT INTO queen.log_segments (partition_id, base_offset, end_offset, created_at, txn_ids, data)
					SELECT $1, $2, $3, clock_timestamp(), array_agg(t ORDER BY i), array_agg(d::json ORDER BY i)
					  FROM unnest($4::text[], $5::text[]) WITH ORDINALITY AS u(t, d, i)`,
					p.ID, off, off+int64(n)-1, fr.TxnIDs, data); err != nil {
					b.Fatal(err)
				}
				off += int64(n)
			}
			reportRows(b, n)
		})
		b.Run(fmt.Sprintf("batch=%d/via=insert-binary", n), func(b *testing.B) {
			// The same single-statement INSERT with the arrays encoded the
			// way the push encodes them: the fairest ceiling for it.
			st, p := benchSetup(b)
			ctx := context.Background()
			rows := benchRows{prefix: "binary-"}
			off := int64(0)
			b.ReportAllocs()
			for b.Loop() {
				fr := rows.frame(p.ID, -1, n)
				txnIDs, data := pgstore.EncodeFrameArrays(fr.TxnIDs, fr.Data)
				if _, err := st.Pool().Exec(ctx, `
					INSERT INTO queen.log_segments (partition_id, base_offset, end_offset, created_at, txn_ids, data)
					VALUES ($1, $2, $3, clock_timestamp(), $4, $5)`,
					p.ID, off, off+int64(n)-1, txnIDs, data); err != nil {
					b.Fatal(err)
				}
				off += int64(n)
			}
			reportRows(b, n)
		})
		b.Run(fmt.Sprintf("batch=%d/via=copy-row-per-message", n), func(b *testing.B) {
			st, p := benchSetup(b)
			ctx := context.Background()
			if _, err := st.Pool().Exec(ctx, `CREATE TABLE bench_messages (
				partition_id bigint, "offset" bigint, created_at timestamptz, txn_id text, data json,
				PRIMARY KEY (partition_id, "offset"))`); err != nil {
				b.Fatal(err)
			}
			rows := benchRows{prefix: "msg-"}
			off := int64(0)
			b.ReportAllocs()
			for b.Loop() {
				fr := rows.frame(p.ID, -1, n)
				now := time.Now()
				src := make([][]any, n)
				for i := range n {
					src[i] = []any{p.ID, off, now, fr.TxnIDs[i], string(fr.Data[i])}
					off++
				}
				if _, err := st.Pool().CopyFrom(ctx, pgx.Identifier{"bench_messages"},
					[]string{"partition_id", "offset", "created_at", "txn_id", "data"}, pgx.CopyFromRows(src)); err != nil {
					b.Fatal(err)
				}
			}
			reportRows(b, n)
		})
	}
}

// BenchmarkPushWide is fan-in: one bundle carries a frame for each of 100
// partitions, as a shard's flush does when many partitions are busy.
func BenchmarkPushWide(b *testing.B) {
	for _, n := range []int{1, 10} {
		for _, verified := range []string{"skip", "probe"} {
			b.Run(fmt.Sprintf("partitions=100/batch=%d/%s", n, verified), func(b *testing.B) {
				st := pgtest.Store(b, pgtest.NewDB(b))
				ctx := context.Background()
				var pids []int64
				for i := range 100 {
					p, err := st.EnsurePartition(ctx, "bench", fmt.Sprintf("p%d", i))
					if err != nil {
						b.Fatal(err)
					}
					pids = append(pids, p.ID)
				}
				rows := benchRows{prefix: "wide-"}
				last := make([]int64, len(pids))
				for i := range last {
					last[i] = -1
				}
				b.ReportAllocs()
				for b.Loop() {
					bundle := make([]model.Frame, len(pids))
					for i, pid := range pids {
						v := int64(-1)
						if verified == "skip" {
							v = last[i]
						}
						bundle[i] = rows.frame(pid, v, n)
					}
					res, err := st.Push(ctx, bundle)
					if err != nil {
						b.Fatal(err)
					}
					for i := range res {
						last[i] = res[i].LastOffset
					}
				}
				reportRows(b, n*len(pids))
			})
		}
	}
}

// BenchmarkPushOnConflict is PushSkipProbe per conflict mode: ignore
// sends and stores no data hashes (its cost must be none), flag and
// reject hash each message's data in the client and store it.
func BenchmarkPushOnConflict(b *testing.B) {
	for _, mode := range []model.ConflictMode{model.ConflictIgnore, model.ConflictFlag} {
		for _, n := range []int{100, 1000} {
			b.Run(fmt.Sprintf("mode=%s/batch=%d", mode, n), func(b *testing.B) {
				st, p := benchSetup(b)
				ctx := context.Background()
				if _, _, err := st.Configure(ctx, "bench", model.OptionsPatch{OnConflict: &mode}, false); err != nil {
					b.Fatal(err)
				}
				rows := benchRows{prefix: "conflict-"}
				last := int64(-1)
				b.ReportAllocs()
				for b.Loop() {
					fr := rows.frame(p.ID, last, n)
					if mode.Compares() {
						fr.DataHashes = model.HashEachData(fr.Data, nil)
					}
					res, err := st.Push(ctx, []model.Frame{fr})
					if err != nil {
						b.Fatal(err)
					}
					last = res[0].LastOffset
				}
				reportRows(b, n)
			})
		}
	}
}

// BenchmarkOriginals is the conflict check of a push's duplicates: the
// stored data hashes of n offsets spread over 1000-message frames.
func BenchmarkOriginals(b *testing.B) {
	st, p := benchSetup(b)
	ctx := context.Background()
	mode := model.ConflictFlag
	if _, _, err := st.Configure(ctx, "bench", model.OptionsPatch{OnConflict: &mode}, false); err != nil {
		b.Fatal(err)
	}
	rows := benchRows{prefix: "orig-"}
	last := int64(-1)
	for range 20 {
		fr := rows.frame(p.ID, last, 1000)
		fr.DataHashes = model.HashEachData(fr.Data, nil)
		res, err := st.Push(ctx, []model.Frame{fr})
		if err != nil {
			b.Fatal(err)
		}
		last = res[0].LastOffset
	}
	for _, n := range []int{1, 20, 200} {
		b.Run(fmt.Sprintf("offsets=%d", n), func(b *testing.B) {
			offsets := make([]int64, n)
			for i := range offsets {
				offsets[i] = int64(i) * (last + 1) / int64(n)
			}
			for b.Loop() {
				got, err := st.Originals(ctx, p.ID, offsets)
				if err != nil || len(got) != n {
					b.Fatalf("%d of %d originals, %v", len(got), n, err)
				}
			}
			reportRows(b, n)
		})
	}
}

// BenchmarkPushPartitions is the many-partitions shape: bundles of 100
// frames of 1, 10 or 100 messages, and single 10-message frames (a small
// request that fusion cannot help), each frame to a partition of its own
// drawn from 1k–100k, every one of which already holds a 10-message frame
// (a warm database, vacuumed since). "skip" is vouched (nothing to
// probe), "full" probes each partition's stored hashes. It reports the
// cost per frame and per message: what SQL pays per partition written.
func BenchmarkPushPartitions(b *testing.B) {
	for _, parts := range []int{1_000, 10_000, 100_000} {
		for _, shape := range benchPartitionShapes {
			for _, probe := range []string{"skip", "full"} {
				b.Run(fmt.Sprintf("partitions=%d/bundle=%dx%d/%s", parts, shape.frames, shape.messages, probe),
					func(b *testing.B) {
						benchPushPartitions(b, parts, shape.frames, shape.messages, probe == "full", (*pgstore.Store).Push)
					})
			}
		}
	}
}

// benchPartitionShapes are the bundles of BenchmarkPushPartitions: frames
// of so many messages each.
var benchPartitionShapes = []struct{ frames, messages int }{{100, 1}, {100, 10}, {100, 100}, {1, 10}}

func benchPushPartitions(b *testing.B, parts, frames, n int, full bool,
	push func(*pgstore.Store, context.Context, []model.Frame) ([]model.FrameResult, error)) {
	st, pids := benchPartitions(b, parts)
	ctx := context.Background()
	rows := benchRows{prefix: "parts-"}
	verified := int64(1 << 62)
	if full {
		verified = -1
	}
	// One bundle first: the session plans the routine's statements once,
	// and the loop measures running them.
	warm := make([]model.Frame, frames)
	for i := range warm {
		warm[i] = rows.frame(pids[len(pids)-1-i], verified, n)
	}
	if _, err := push(st, ctx, warm); err != nil {
		b.Fatal(err)
	}
	// Each iteration writes 100 frames, in one bundle or in several.
	pushes := max(1, 100/frames)
	next := 0
	b.ReportAllocs()
	for b.Loop() {
		for range pushes {
			bundle := make([]model.Frame, frames)
			for i := range bundle {
				bundle[i] = rows.frame(pids[next%len(pids)], verified, n)
				next++
			}
			res, err := push(st, ctx, bundle)
			if err != nil {
				b.Fatal(err)
			}
			if res[0].Probed() != full || res[0].BaseOffset < 0 {
				b.Fatalf("probe ran %v, base %d", res[0].Probed(), res[0].BaseOffset)
			}
		}
	}
	perFrame := float64(b.Elapsed().Nanoseconds()) / 1e3 / float64(b.N*pushes*frames)
	b.ReportMetric(perFrame, "µs/frame")
	b.ReportMetric(perFrame/float64(n), "µs/msg")
	reportRows(b, n*frames*pushes)
}

// benchPartitions makes n partitions of one queue, each holding one
// 10-message frame, and returns their ids in a random order.
func benchPartitions(b *testing.B, n int) (*pgstore.Store, []int64) {
	b.Helper()
	st, first := benchSetup(b)
	ctx := context.Background()
	for _, q := range []string{
		`INSERT INTO queen.log_partitions (queue_id, name)
		 SELECT $1, 'p' || g FROM generate_series(2, $2::integer) AS g`,
		`INSERT INTO queen.log_segments (partition_id, base_offset, end_offset, created_at, txn_ids, data, data_bytes)
		 SELECT p.id, 0, 9, now(), array_fill('prefilled'::text, ARRAY[10]), array_fill('{}'::json, ARRAY[10]), 20
		   FROM queen.log_partitions p WHERE p.queue_id = $1 AND $2 > 0`,
		`INSERT INTO queen.log_txns (partition_id, base_offset, end_offset, created_at, hashes)
		 SELECT p.id, 0, 9, now(), ARRAY(SELECT gen_random_uuid() FROM generate_series(1, 10 + 0 * p.id))
		   FROM queen.log_partitions p WHERE p.queue_id = $1 AND $2 > 0`,
		`UPDATE queen.log_partitions SET last_offset = 9, stored_bytes = 20 WHERE queue_id = $1 AND $2 > 0`,
	} {
		if _, err := st.Pool().Exec(ctx, q, first.QueueID, n); err != nil {
			b.Fatal(err)
		}
	}
	// Vacuumed: the partition rows' dead versions would otherwise decide
	// the figures (every lookup by id visits them), as autovacuum's timing
	// does on a real database.
	if _, err := st.Pool().Exec(ctx, "VACUUM ANALYZE"); err != nil {
		b.Fatal(err)
	}
	rows, err := st.Pool().Query(ctx, "SELECT id FROM queen.log_partitions ORDER BY random()")
	if err != nil {
		b.Fatal(err)
	}
	pids, err := pgx.CollectRows(rows, pgx.RowTo[int64])
	if err != nil {
		b.Fatal(err)
	}
	return st, pids
}
