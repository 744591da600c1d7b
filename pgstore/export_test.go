package pgstore

import (
	"time"

	"github.com/queengate/queengate/pgstore/internal/pgwire"
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
