package report

import (
	"math"
	"slices"
	"time"
)

// Percentile is the nearest-rank percentile (q in [0, 1]) of sorted
// durations: the smallest value such that at least q of all values are at
// or below it. Zero for no values.
func Percentile(sorted []time.Duration, q float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	rank := int(math.Ceil(q * float64(len(sorted))))
	return sorted[min(max(rank, 1), len(sorted))-1]
}

// MedianFloat is the median of xs (the mean of the middle two for an even
// count); NaN for none.
func MedianFloat(xs []float64) float64 {
	if len(xs) == 0 {
		return math.NaN()
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	n := len(s)
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}
