package sidebyside

import (
	"bytes"
	"math"
	"slices"
	"strings"
	"testing"
)

// near: equal but for floating-point rounding.
func near(got, want float64) bool {
	return math.Abs(got-want) <= 1e-9*math.Max(1, math.Abs(want))
}

// costAt is a message's CPU when a cycle costs perCycle and a message
// perMessage, in batches of batch.
func costAt(perMessage, perCycle float64, batch int) float64 {
	return perMessage + perCycle/float64(batch)
}

// TestTheFitRecoversAKnownCycleCost: points made from a known fixed cost
// per cycle and cost per message give them back, over two batch sizes
// and over three.
func TestTheFitRecoversAKnownCycleCost(t *testing.T) {
	t.Parallel()
	const perMessage, perCycle = 2.9, 858.0
	for _, batches := range [][]int{{10, 100}, {10, 100, 1000}, {1000, 10, 100, 10}} {
		ys := make([]float64, len(batches))
		for i, b := range batches {
			ys[i] = costAt(perMessage, perCycle, b)
		}
		a, b, ok := fitCycleCost(batches, ys)
		if !ok || !near(a, perMessage) || !near(b, perCycle) {
			t.Errorf("batches %v: per message %v, per cycle %v, ok %v; want %v, %v, true", batches, a, b, ok, perMessage, perCycle)
		}
	}
}

// TestTheFitIsLeastSquares: over three points off any line, the fit is
// the least-squares line in 1 ÷ batch (computed here by hand).
func TestTheFitIsLeastSquares(t *testing.T) {
	t.Parallel()
	// x = 1/batch: 12/24, 6/24, 3/24, mean 7/24; y: 4, 3, 1, mean 8/3.
	// Sxy = 39/72, Sxx = 42/576: slope 52/7, intercept 8/3 - 52/7·7/24 = 1/2.
	a, b, ok := fitCycleCost([]int{2, 4, 8}, []float64{4, 3, 1})
	if !ok || !near(b, 52.0/7) || !near(a, 0.5) {
		t.Errorf("per message %v, per cycle %v, ok %v; want the least-squares line", a, b, ok)
	}
	// Off the line by 3/14, 9/14 and 6/14.
	if miss := largestMiss([]int{2, 4, 8}, []float64{4, 3, 1}, a, b); !near(miss, 9.0/14) {
		t.Errorf("largest miss %v, want 9/14", miss)
	}
}

// TestOneBatchSizeHasNoFit: one batch size, even measured twice, cannot
// tell a cycle's cost from a message's: no fit, and the report says so
// instead of printing one.
func TestOneBatchSizeHasNoFit(t *testing.T) {
	t.Parallel()
	for _, batches := range [][]int{{100}, {100, 100}, nil} {
		if _, _, ok := fitCycleCost(batches, make([]float64, len(batches))); ok {
			t.Errorf("batches %v: a fit, want none", batches)
		}
	}
	rep := &ConsumeReport{Splits: []ShapeSplit{
		splitOf("batch 100", 100, "queengate", true, 100_000, 1000, 0.3, 1.4),
		splitOf("batch 100", 100, "jetstream", true, 100_000, 1000, 0.2, 0.7),
		// Another batch size, but over other partitions: not a point of the fit.
		splitOf("10000 partitions", 10, "queengate", false, 100_000, 10_000, 0.3, 9),
	}}
	rep.Fits = fitCycles(rep.Splits)
	if len(rep.Fits) != 0 {
		t.Errorf("fits %+v from one batch size, want none", rep.Fits)
	}
	var out bytes.Buffer
	writeSplitAndFit(&out, 1, rep)
	if strings.Contains(out.String(), "fixed cost per cycle") || !strings.Contains(out.String(), "No fit") {
		t.Errorf("one batch size printed:\n%s\nwant the split, no fit and why", out.String())
	}
}

// splitOf is a side's split of a shape with a load generator and one
// serving process taking the given seconds over messages in cycles.
func splitOf(shape string, batch int, side string, inFit bool, messages, cycles int64, loadGen, serving float64) ShapeSplit {
	split := withTotals([]ProcessCPU{
		processCPU(loadGenerator, false, loadGen, messages, cycles),
		processCPU("server", true, serving, messages, cycles),
	}, messages, cycles)
	return ShapeSplit{Shape: shape, Batch: batch, Target: side, InFit: inFit, Cycles: float64(cycles),
		MessagesPerCycle: float64(messages) / float64(cycles), Processes: split}
}

// TestFitCyclesFitsEachProcessAndTheTotalsOfTheBatchShapes: from the
// splits of batch shapes made from known costs per process, each
// process's fit and the totals' give back the costs (the totals' the
// sums), and a shape outside the fit (other partitions) is left out.
func TestFitCyclesFitsEachProcessAndTheTotalsOfTheBatchShapes(t *testing.T) {
	t.Parallel()
	const messages = 100_000
	// Per message µs and per cycle µs: load generator 1 + 100/batch,
	// server 3 + 500/batch.
	var splits []ShapeSplit
	for _, batch := range []int{100, 10, 1000} {
		cycles := int64(messages / batch)
		seconds := func(perMessage, perCycle float64) float64 {
			return costAt(perMessage, perCycle, batch) * messages / 1e6
		}
		splits = append(splits, splitOf("batch", batch, "queengate", true, messages, cycles, seconds(1, 100), seconds(3, 500)))
	}
	splits = append(splits, splitOf("10000 partitions", 100, "queengate", false, messages, 1000, 50, 50))
	fits := fitCycles(splits)
	want := map[string][2]float64{loadGenerator: {1, 100}, "server": {3, 500}, servingTotal: {3, 500}, wholeTotal: {4, 600}}
	if len(fits) != len(want) {
		t.Fatalf("fits %+v, want one per process and total", fits)
	}
	for _, f := range fits {
		w, ok := want[f.Process]
		if !ok || f.Target != "queengate" || !slices.Equal(f.Batches, []int{10, 100, 1000}) || !near(f.PerMessageMicros, w[0]) ||
			!near(f.PerCycleMicros, w[1]) || f.MaxMissMicros > 1e-9 {
			t.Errorf("fit %+v, want queengate over 10, 100, 1000: per message %v, per cycle %v", f, w[0], w[1])
		}
	}
	var out bytes.Buffer
	writeSplitAndFit(&out, 1, &ConsumeReport{Splits: splits, Fits: fits})
	for _, line := range []string{"| queengate | server | 500 | 3.00 | 0.00 |", "queengate, serving processes: fixed cost per cycle 500 µs, per message 3.00 µs"} {
		if !strings.Contains(out.String(), line) {
			t.Errorf("printed:\n%s\nwant %q", out.String(), line)
		}
	}
}

// TestTheSplitAccountsEveryProcessOnce: a round's CPU by process is each
// process's seconds per message and per cycle; the serving total leaves
// the load generator out and is what the round's CPU per message counts;
// the whole adds it.
func TestTheSplitAccountsEveryProcessOnce(t *testing.T) {
	t.Parallel()
	const messages, cycles = 100_000, 1000
	split := []ProcessCPU{
		processCPU(loadGenerator, false, 0.3, messages, cycles),
		processCPU("gateway", true, 0.5, messages, cycles),
		processCPU("nats-server", true, 0.1, messages, cycles),
		processCPU("PostgreSQL", true, 0.8, messages, cycles),
	}
	rows := withTotals(split, messages, cycles)
	want := []struct {
		name             string
		perMessage, perC float64
	}{{loadGenerator, 3, 300}, {"gateway", 5, 500}, {"nats-server", 1, 100}, {"PostgreSQL", 8, 800}, {servingTotal, 14, 1400}, {wholeTotal, 17, 1700}}
	if len(rows) != len(want) {
		t.Fatalf("rows %+v, want %d", rows, len(want))
	}
	for i, w := range want {
		if rows[i].Process != w.name || !near(rows[i].MicrosPerMessage, w.perMessage) || !near(rows[i].MicrosPerCycle, w.perC) {
			t.Errorf("row %d: %+v, want %s at %v µs/msg, %v µs/cycle", i, rows[i], w.name, w.perMessage, w.perC)
		}
	}
	if got := servingMicrosPerMessage(split, messages); !near(got, 14) {
		t.Errorf("serving CPU %v µs/msg, want 14 (the load generator left out)", got)
	}
	if len(split) != 4 || cap(split) != 4 {
		t.Errorf("the totals were added to the round's own split: %+v", split)
	}
}

// TestASplitSummaryIsTheMedianOfItsRounds: a shape's split by process is
// each row's median over the rounds, the totals included.
func TestASplitSummaryIsTheMedianOfItsRounds(t *testing.T) {
	t.Parallel()
	round := func(target string, loadGen, server float64, cycles int64) consumeBenchResult {
		return consumeBenchResult{Target: target, Messages: 1000, Cycles: cycles, Split: []ProcessCPU{
			processCPU(loadGenerator, false, loadGen, 1000, cycles), processCPU("server", true, server, 1000, cycles)}}
	}
	results := []consumeBenchResult{
		round("queengate", 0.001, 0.010, 10), round("jetstream", 0.5, 0.5, 1),
		round("queengate", 0.003, 0.030, 12), round("queengate", 0.002, 0.050, 11),
	}
	splits := summariseSplits(consumeShape{name: "batch 100", batch: 100, inFit: true}, results)
	if len(splits) != 2 || splits[0].Target != "queengate" || splits[1].Target != "jetstream" || !splits[0].InFit {
		t.Fatalf("splits %+v, want queengate's then jetstream's, in the fit", splits)
	}
	q := splits[0]
	// Medians: load generator 2 µs/msg, server 30, serving 30, all
	// 0.013, 0.033, 0.052 → 33 µs/msg; cycles 11.
	want := map[string]float64{loadGenerator: 2, "server": 30, servingTotal: 30, wholeTotal: 33}
	if q.Cycles != 11 || !near(q.MessagesPerCycle, 1000.0/11) || len(q.Processes) != len(want) {
		t.Fatalf("%+v: want 11 cycles of 1000/11 messages and 4 rows", q)
	}
	for _, p := range q.Processes {
		if !near(p.MicrosPerMessage, want[p.Process]) {
			t.Errorf("%s: %v µs/msg, want %v", p.Process, p.MicrosPerMessage, want[p.Process])
		}
	}
}
