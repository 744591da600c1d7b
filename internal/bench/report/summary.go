package report

import (
	"fmt"
	"math"
	"time"

	"github.com/queengate/queengate/internal/bench"
)

// Summarise fills the per-target medians and, for several targets, the
// per-round ratios of queengate's throughput to each other target's.
func Summarise(r *bench.Report, targets []string) {
	byTarget := map[string][]bench.Result{}
	for _, res := range r.Results {
		byTarget[res.Target] = append(byTarget[res.Target], res)
	}
	r.Medians = nil
	for _, name := range targets {
		if rs := byTarget[name]; len(rs) > 0 {
			r.Medians = append(r.Medians, medianResult(rs))
		}
	}
	r.Ratios = nil
	qg := byTarget["queengate"]
	for _, name := range targets {
		if name == "queengate" || len(qg) == 0 {
			continue
		}
		if ratio, ok := throughputRatio(name, byTarget[name], qg); ok {
			r.Ratios = append(r.Ratios, ratio)
		}
	}
}

// medianResult is one target's rounds rs in one: the median of each
// figure, and the counts summed.
func medianResult(rs []bench.Result) bench.Result {
	med := rs[0]
	med.Round = 0
	pick := func(f func(bench.Result) float64) float64 {
		xs := make([]float64, len(rs))
		for i, x := range rs {
			xs[i] = f(x)
		}
		return MedianFloat(xs)
	}
	med.Throughput = pick(func(x bench.Result) float64 { return x.Throughput })
	med.P50 = time.Duration(pick(func(x bench.Result) float64 { return float64(x.P50) }))
	med.P90 = time.Duration(pick(func(x bench.Result) float64 { return float64(x.P90) }))
	med.P99 = time.Duration(pick(func(x bench.Result) float64 { return float64(x.P99) }))
	med.Max = time.Duration(pick(func(x bench.Result) float64 { return float64(x.Max) }))
	med.Elapsed = time.Duration(pick(func(x bench.Result) float64 { return float64(x.Elapsed) }))
	med.CPUSecondsPerMillion = pick(func(x bench.Result) float64 { return x.CPUSecondsPerMillion })
	med.AutovacuumCPUPerMillion = pick(func(x bench.Result) float64 { return x.AutovacuumCPUPerMillion })
	med.PrimaryCPUPerMillion = pick(func(x bench.Result) float64 { return x.PrimaryCPUPerMillion })
	med.StandbyCPUPerMillion = pick(func(x bench.Result) float64 { return x.StandbyCPUPerMillion })
	med.PostgresCPUPerMillion = pick(func(x bench.Result) float64 { return x.PostgresCPUPerMillion })
	med.PeakRSSBytes = int64(pick(func(x bench.Result) float64 { return float64(x.PeakRSSBytes) }))
	med.ProbeSkippedShare = pick(func(x bench.Result) float64 { return x.ProbeSkippedShare })
	med.ProbeNarrowedShare = pick(func(x bench.Result) float64 { return x.ProbeNarrowedShare })
	med.UnrolledShare = pick(func(x bench.Result) float64 { return x.UnrolledShare })
	med.CacheBytesPerHash = pick(func(x bench.Result) float64 { return x.CacheBytesPerHash })
	med.CacheBytesPerEntry = pick(func(x bench.Result) float64 { return x.CacheBytesPerEntry })
	med.GatewayPeakRSSBytes = int64(pick(func(x bench.Result) float64 { return float64(x.GatewayPeakRSSBytes) }))
	med.PartitionsTouched = int64(pick(func(x bench.Result) float64 { return float64(x.PartitionsTouched) }))
	med.Evictions = int64(pick(func(x bench.Result) float64 { return float64(x.Evictions) }))
	med.Suppressed = int64(pick(func(x bench.Result) float64 { return float64(x.Suppressed) }))
	med.MeanFrame = pick(func(x bench.Result) float64 { return x.MeanFrame })
	med.StoredBytesPerMessage = pick(func(x bench.Result) float64 { return x.StoredBytesPerMessage })
	med.Hydrations = int64(pick(func(x bench.Result) float64 { return float64(x.Hydrations) }))
	med.Births = int64(pick(func(x bench.Result) float64 { return float64(x.Births) }))
	med.Fills = int64(pick(func(x bench.Result) float64 { return float64(x.Fills) }))
	med.MaxGap = time.Duration(pick(func(x bench.Result) float64 { return float64(x.MaxGap) }))
	med.FleetGap = time.Duration(pick(func(x bench.Result) float64 { return float64(x.FleetGap) }))
	med.Retries = int64(pick(func(x bench.Result) float64 { return float64(x.Retries) }))
	med.Queued, med.Duplicate, med.Failed, med.Violations, med.Messages, med.Requests, med.DistinctIDs = 0, 0, 0, 0, 0, 0, 0
	for _, x := range rs {
		med.Queued += x.Queued
		med.Duplicate += x.Duplicate
		med.Failed += x.Failed
		med.Violations += x.Violations
		med.Messages += x.Messages
		med.Requests += x.Requests
		med.DistinctIDs += x.DistinctIDs
	}
	return med
}

// throughputRatio compares target name's rounds rs with queengate's qg,
// round by round: queengate ÷ the other, or for a fleet (queengate@N)
// the fleet ÷ queengate, so that above 1 always reads "faster". ok is
// false when no round has both throughputs.
func throughputRatio(name string, rs, qg []bench.Result) (ratio bench.Ratio, ok bool) {
	_, isFleet := bench.FleetSize(name)
	var ratios []float64
	for _, x := range rs {
		for _, q := range qg {
			switch {
			case q.Round != x.Round || x.Throughput <= 0 || q.Throughput <= 0:
			case isFleet:
				ratios = append(ratios, x.Throughput/q.Throughput)
			default:
				ratios = append(ratios, q.Throughput/x.Throughput)
			}
		}
	}
	if len(ratios) == 0 {
		return bench.Ratio{}, false
	}
	lo, hi := math.Inf(1), math.Inf(-1)
	for _, v := range ratios {
		lo, hi = math.Min(lo, v), math.Max(hi, v)
	}
	label := "queengate ÷ " + name
	if isFleet {
		label = name + " ÷ queengate"
	}
	return bench.Ratio{Target: name, Label: label, Min: lo, Median: MedianFloat(ratios), Max: hi}, true
}

// rssAllowanceBytes is what a gateway may hold beyond its cache budget
// (the runtime, buffers, connections) in the budget check.
const rssAllowanceBytes = 150 << 20

// BudgetChecks holds each gateway round of a run with many partitions to
// the cache's promises: it does not thrash (every hydration is a
// partition's first in the run, or one evicted before) and the gateway's
// memory stays within the budget plus rssAllowanceBytes.
func BudgetChecks(results []bench.Result, budgetMB int) []bench.Check {
	var checks []bench.Check
	for _, r := range results {
		if bench.BaseName(r.Target) != "queengate" {
			continue
		}
		if r.Hydrations >= 0 && r.Evictions >= 0 {
			checks = append(checks, bench.Check{Target: r.Target, Round: r.Round,
				Name: "hydrations ≤ partitions touched + evictions",
				Figures: fmt.Sprintf("%s ≤ %s + %s", FormatCount(r.Hydrations), FormatCount(r.PartitionsTouched),
					FormatCount(r.Evictions)),
				Met: r.Hydrations <= r.PartitionsTouched+r.Evictions})
		}
		if r.GatewayPeakRSSBytes > 0 {
			limit := int64(budgetMB)<<20 + rssAllowanceBytes
			checks = append(checks, bench.Check{Target: r.Target, Round: r.Round,
				Name: fmt.Sprintf("gateway peak RSS ≤ cache budget + %d MiB", rssAllowanceBytes>>20),
				Figures: fmt.Sprintf("%s MiB ≤ %d + %d MiB", FormatMiB(r.GatewayPeakRSSBytes), budgetMB,
					rssAllowanceBytes>>20),
				Met: r.GatewayPeakRSSBytes <= limit})
		}
	}
	return checks
}
