package pgwire_test

import (
	"context"
	"encoding/json"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/queengate/queengate/internal/pgtest"
	"github.com/queengate/queengate/model"
	"github.com/queengate/queengate/pgstore/internal/pgwire"
)

func TestMain(m *testing.M) { pgtest.Run(m) }

// echoBundleSQL reads log_push_bundle's 15 arguments back as PostgreSQL
// has them, typed as the routine's parameters, in text.
const echoBundleSQL = `SELECT $1::bigint[]::text, $2::bigint[]::text, $3::integer[]::text, $4::integer[]::text,
	$5::text[]::text, $6::uuid[]::text, $7::json[]::text, $8::bigint[]::text, $9::integer[]::text,
	$10::integer[]::text, $11::bigint[]::text, $12::integer[]::text, $13::uuid[]::text, $14::integer[]::text,
	$15::text[]::text`

// bundleOIDs are the array types of log_push_bundle's parameters.
var bundleOIDs = []uint32{pgtype.Int8ArrayOID, pgtype.Int8ArrayOID, pgtype.Int4ArrayOID, pgtype.Int4ArrayOID,
	pgtype.TextArrayOID, pgtype.UUIDArrayOID, pgtype.JSONArrayOID, pgtype.Int8ArrayOID, pgtype.Int4ArrayOID,
	pgtype.Int4ArrayOID, pgtype.Int8ArrayOID, pgtype.Int4ArrayOID, pgtype.UUIDArrayOID, pgtype.Int4ArrayOID, pgtype.TextArrayOID}

// pgxBundleArgs are log_push_bundle's arguments for frames as plain Go
// slices, for pgx's own codecs to encode: what the push sent before it
// encoded them itself.
func pgxBundleArgs(frames []model.Frame) []any {
	var (
		pids, verified, sizes, candOff                 = []int64{}, []int64{}, []int64{}, []int64{}
		windows, counts, candCounts, candIdx, dhCounts = []int32{}, []int32{}, []int32{}, []int32{}, []int32{}
		txnIDs, data                                   = []string{}, []string{}
		hashes, dataHashes                             = []pgtype.UUID{}, []pgtype.UUID{}
		metaCounts                                     = []int32{}
		meta                                           = []*string{}
	)
	for _, fr := range frames {
		pids, verified = append(pids, fr.PartitionID), append(verified, fr.Verified)
		windows = append(windows, int32(min(fr.VerifiedWindow, math.MaxInt32)))
		counts = append(counts, int32(len(fr.Hashes)))
		txnIDs = append(txnIDs, fr.TxnIDs...)
		size := int64(0)
		for k := range fr.Hashes {
			hashes = append(hashes, pgtype.UUID{Bytes: fr.Hashes[k], Valid: true})
			d := model.StoredData(fr.Data[k])
			data, size = append(data, string(d)), size+int64(len(d))
		}
		sizes = append(sizes, size)
		candCounts = append(candCounts, int32(len(fr.Candidates)))
		for _, c := range fr.Candidates {
			candIdx, candOff = append(candIdx, c.Index+1), append(candOff, c.Offset)
		}
		dhCounts = append(dhCounts, int32(len(fr.DataHashes)))
		for _, h := range fr.DataHashes {
			dataHashes = append(dataHashes, pgtype.UUID{Bytes: h, Valid: true})
		}
		metaCounts, meta = appendMetaArgs(metaCounts, meta, fr.Meta)
	}
	return []any{pids, verified, windows, counts, txnIDs, hashes, data, sizes, candCounts, candIdx, candOff, dhCounts, dataHashes,
		metaCounts, meta}
}

// appendMetaArgs appends a frame's p_meta_counts and p_meta elements.
func appendMetaArgs(counts []int32, out []*string, meta [][]byte) ([]int32, []*string) {
	if shared(meta) { // sent once, as one element
		return append(counts, -1), append(out, new(string(meta[0])))
	}
	counts = append(counts, int32(len(meta)))
	for _, m := range meta {
		var s *string
		if m != nil {
			s = new(string(m))
		}
		out = append(out, s)
	}
	return counts, out
}

// shared says every message's meta is the one slice, as pgwire sends
// once (p_meta_counts -1).
func shared(meta [][]byte) bool {
	if len(meta) < 2 || meta[0] == nil {
		return false
	}
	for _, m := range meta[1:] {
		if len(m) != len(meta[0]) || &m[0] != &meta[0][0] {
			return false
		}
	}
	return true
}

// randomFrames are frames of random contents: empty and multibyte
// transactionIds, data absent (JSON null), large or full of escapes and
// non-ASCII, data hashes or none, candidates or none, extreme vouches.
func randomFrames(r *rand.Rand) []model.Frame {
	frames := make([]model.Frame, 1+r.IntN(6))
	for i := range frames {
		n := 1 + r.IntN(8)
		fr := model.Frame{PartitionID: r.Int64() - math.MaxInt64/2, Verified: pick(r, -1, 0, math.MaxInt64, r.Int64N(1<<40)),
			VerifiedWindow: int(pick(r, 0, 3600, math.MaxInt32, math.MaxInt32+1+r.Int64N(1<<40))),
			TxnIDs:         make([]string, n), Hashes: make([]model.Hash, n), Data: make([][]byte, n)}
		for k := range n {
			fr.TxnIDs[k] = randomText(r, r.IntN(40))
			fr.Hashes[k] = model.HashTxnID(fr.TxnIDs[k])
			fr.Data[k] = randomData(r)
		}
		switch r.IntN(3) {
		case 0: // headers on some messages, none on others
			fr.Meta = make([][]byte, n)
			for k := range n {
				if r.IntN(2) == 0 {
					fr.Meta[k] = model.AppendMeta(nil, []model.Header{{Name: "h", Values: []string{randomText(r, r.IntN(20))}}}, r.IntN(2) == 0)
				}
			}
		case 1: // one meta every message shares
			one := model.AppendMeta(nil, []model.Header{{Name: "h", Values: []string{randomText(r, r.IntN(20))}}}, r.IntN(2) == 0)
			fr.Meta = make([][]byte, n)
			for k := range n {
				fr.Meta[k] = one
			}
		}
		if r.IntN(2) == 0 {
			fr.DataHashes = model.HashEachData(fr.Data, fr.Meta)
		}
		for k := range n {
			if r.IntN(3) == 0 {
				fr.Candidates = append(fr.Candidates, model.Candidate{Index: int32(k), Offset: r.Int64N(math.MaxInt64)})
			}
		}
		frames[i] = fr
	}
	return frames
}

func pick(r *rand.Rand, choices ...int64) int64 { return choices[r.IntN(len(choices))] }

// randomText is n characters of ASCII, accented Latin, CJK, emoji, quotes
// and backslashes (no NUL: PostgreSQL's text has none).
func randomText(r *rand.Rand, n int) string {
	const alphabet = "ab z09-_\"\\'{}[],:éü€中文🙂\t\n"
	runes := []rune(alphabet)
	var sb strings.Builder
	for range n {
		sb.WriteRune(runes[r.IntN(len(runes))])
	}
	return sb.String()
}

// randomData is a message's data: none, a JSON value, or a large one.
func randomData(r *rand.Rand) []byte {
	switch r.IntN(6) {
	case 0:
		return nil // stored as JSON null
	case 1:
		return []byte("null")
	case 2:
		big, _ := json.Marshal(map[string]string{"blob": randomText(r, 50_000+r.IntN(50_000))})
		return big
	default:
		v, _ := json.Marshal(map[string]any{"text": randomText(r, r.IntN(60)), "n": r.Float64(), "list": []int{r.IntN(9)}})
		return v
	}
}

// echo reads the bundle's arguments back from PostgreSQL twice: as
// EncodeBundle encoded them, sent through pgconn as the push sends them,
// and as pgx encodes the same values.
func echo(t *testing.T, conn *pgx.Conn, frames []model.Frame) (ours, pgxs []string) {
	t.Helper()
	ctx := context.Background()
	b, err := pgwire.EncodeBundle(frames)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Release()
	rr := conn.PgConn().ExecParams(ctx, echoBundleSQL, b.Params(), bundleOIDs, []int16{pgtype.BinaryFormatCode}, nil)
	for rr.NextRow() {
		for _, v := range rr.Values() {
			ours = append(ours, string(v))
		}
	}
	if _, err := rr.Close(); err != nil {
		t.Fatalf("the bundle as encoded: %v", err)
	}
	pgxs = make([]string, len(bundleOIDs))
	targets := make([]any, len(pgxs))
	for i := range pgxs {
		targets[i] = &pgxs[i]
	}
	if err := conn.QueryRow(ctx, echoBundleSQL, pgxBundleArgs(frames)...).Scan(targets...); err != nil {
		t.Fatalf("the bundle as pgx encodes it: %v", err)
	}
	return ours, pgxs
}

// checkEcho fails when PostgreSQL reads one of the bundle's arguments
// otherwise from EncodeBundle than from pgx.
func checkEcho(t *testing.T, conn *pgx.Conn, frames []model.Frame) {
	t.Helper()
	ours, pgxs := echo(t, conn, frames)
	if len(ours) != len(pgxs) {
		t.Fatalf("%d arguments read back, pgx's %d", len(ours), len(pgxs))
	}
	for i := range ours {
		if ours[i] != pgxs[i] {
			t.Fatalf("argument $%d reads %.300q, pgx's %.300q", i+1, ours[i], pgxs[i])
		}
	}
}

func connect(t testing.TB) *pgx.Conn {
	t.Helper()
	conn, err := pgx.Connect(context.Background(), pgtest.SharedURL(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close(context.Background()) })
	return conn
}

// TestBundleReadsInPostgreSQLAsPgxSendsIt: PostgreSQL reads every
// argument of a bundle EncodeBundle encoded (random contents, through
// pgconn in the binary format, as the push sends it) as it reads the same
// values pgx's codecs encode, which the push sent before.
func TestBundleReadsInPostgreSQLAsPgxSendsIt(t *testing.T) {
	conn := connect(t)
	r := rand.New(rand.NewPCG(35, 2))
	for range 60 { // FuzzBundleReadsInPostgreSQLAsPgxSendsIt goes on from here
		checkEcho(t, conn, randomFrames(r))
	}
}

// FuzzBundleReadsInPostgreSQLAsPgxSendsIt is the same for frames drawn
// from any seed.
func FuzzBundleReadsInPostgreSQLAsPgxSendsIt(f *testing.F) {
	for seed := range uint64(8) {
		f.Add(seed, seed*7919)
	}
	conn := connect(f)
	f.Fuzz(func(t *testing.T, a, b uint64) {
		checkEcho(t, conn, randomFrames(rand.New(rand.NewPCG(a, b))))
	})
}

// TestABundleWithoutFramesIsEmptyArrays: no frames, every argument an
// empty array, as pgx sends empty slices.
func TestABundleWithoutFramesIsEmptyArrays(t *testing.T) {
	conn := connect(t)
	ours, _ := echo(t, conn, nil)
	if want := strings.TrimSuffix(strings.Repeat("{} ", len(bundleOIDs)), " "); strings.Join(ours, " ") != want {
		t.Fatalf("read back %q, want %q", ours, want)
	}
	checkEcho(t, conn, nil)
}

// TestInvalidFramesAreRefused: frames whose slices do not match are not
// encoded.
func TestInvalidFramesAreRefused(t *testing.T) {
	for name, fr := range map[string]model.Frame{
		"no messages":       {},
		"fewer ids":         {TxnIDs: []string{}, Hashes: make([]model.Hash, 1), Data: make([][]byte, 1)},
		"fewer data":        {TxnIDs: []string{"a"}, Hashes: make([]model.Hash, 1), Data: nil},
		"fewer data hashes": {TxnIDs: []string{"a", "b"}, Hashes: make([]model.Hash, 2), Data: make([][]byte, 2), DataHashes: make([]model.Hash, 1)},
	} {
		if _, err := pgwire.EncodeBundle([]model.Frame{fr}); err == nil {
			t.Errorf("%s: encoded", name)
		}
	}
}
