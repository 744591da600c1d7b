package consume

import (
	"math"
	"strings"
	"testing"

	queengate "github.com/queengate/queengate"
	"github.com/queengate/queengate/internal/wire"
)

// The widest group a groups answer can list, without its partitions,
// takes no more than groupTotalsSize: fitPartitions reserves that much per
// group, so the answer fits the max payload.
func TestTheWidestGroupTotalsFitTheirReserve(t *testing.T) {
	name := strings.Repeat("g", queengate.MaxNameBytes)
	widest := queengate.GroupView{Group: name, Lag: math.MinInt64, PartitionCount: math.MinInt, Unconfirmed: math.MinInt64,
		DeletedUnconsumed: math.MinInt64, IdleMs: math.MinInt64, DelayedPartitions: math.MinInt,
		Partitions: []queengate.GroupPartitionView{}, NextPartition: name}
	if size := wire.EncodedLen(widest); size > groupTotalsSize {
		t.Errorf("the widest group totals take %d bytes, over the %d reserved", size, groupTotalsSize)
	}
}
