package pgstore

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/queengate/queengate/pgstore/internal/pgwire"
	"github.com/queengate/queengate/pgstore/internal/readpool"
)

// EncodeFrameArrays exposes the push path's binary array encoding to the
// benchmarks, so the write ceiling can be measured with the same client
// cost as the push.
func EncodeFrameArrays(txnIDs []string, data [][]byte) (any, any) {
	t := pgwire.NewArrayBuilder(pgwire.OIDText, len(txnIDs), 32*len(txnIDs))
	for _, id := range txnIDs {
		t.AppendString(id)
	}
	d := pgwire.NewArrayBuilder(pgwire.OIDJSON, len(data), 128*len(data))
	for _, p := range data {
		d.AppendBytes(p)
	}
	return t.Encoded(), d.Encoded()
}

// MigrateSchemaTo applies the migrations up to version upto and no
// routines: a database as an older release left it, for upgrade tests.
func MigrateSchemaTo(ctx context.Context, conn *pgx.Conn, upto int) ([]int, error) {
	return migrate(ctx, conn, upto, false)
}

// RoutinesChecksum is the checksum the database must record for its
// routines to be this build's.
func RoutinesChecksum() string {
	rs, err := Routines()
	if err != nil {
		return ""
	}
	return routinesChecksum(rs)
}

// SetSettleTimeout shortens the settling of unknown outcomes for tests
// that make it fail.
func (s *Store) SetSettleTimeout(d time.Duration) { s.settleTimeout = d }

// DefaultMaxData is the data limit of a store not given one.
const DefaultMaxData = defaultMaxData

// DropStep is how many frames one step of a delete or a purge deletes.
const DropStep = dropStep

// ReadPaths is how many reads meant for the read pool took each path
// (queengate_pg_read_pool_reads_total).
func (s *Store) ReadPaths() map[string]float64 {
	vec := s.reads.Collector().(*prometheus.CounterVec)
	out := map[string]float64{}
	for _, p := range []string{readpool.Standby, readpool.StandbyAfterWait, readpool.PrimaryStandbyBehind, readpool.PrimaryStandbyFailed} {
		out[p] = testutil.ToFloat64(vec.WithLabelValues(p))
	}
	return out
}
