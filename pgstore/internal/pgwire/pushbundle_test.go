package pgwire

import (
	"encoding/binary"
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgtype"
)

// TestTimestamptzReadsAsPgxReadsIt: a binary timestamptz reads as pgx's
// codec scans it into a time.Time, to the nanosecond and the location;
// infinities are refused by both.
func TestTimestamptzReadsAsPgxReadsIt(t *testing.T) {
	m := pgtype.NewMap()
	r := rand.New(rand.NewPCG(35, 4))
	values := []int64{0, 1, -1, 999_999, -999_999, 1_000_000, -1_000_001, math.MaxInt64, math.MinInt64}
	for range 1000 {
		values = append(values, r.Int64N(1<<50)-1<<49) // years ~1964 to ~2035, and around
	}
	for _, us := range values {
		src := binary.BigEndian.AppendUint64(nil, uint64(us))
		var want time.Time
		wantErr := m.Scan(pgtype.TimestamptzOID, pgtype.BinaryFormatCode, src, &want)
		got, err := timestamptzValue(src)
		if (err == nil) != (wantErr == nil) || !got.Equal(want) || got.Location() != want.Location() {
			t.Fatalf("%d µs: read %v (%v), pgx reads %v (%v)", us, got, err, want, wantErr)
		}
	}
}
