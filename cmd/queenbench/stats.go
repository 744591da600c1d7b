package main

import (
	"math"
	"slices"
	"time"
)

// percentile is the nearest-rank percentile (q in [0, 1]) of sorted
// durations: the smallest value such that at least q of all values are at
// or below it. Zero for no values.
func percentile(sorted []time.Duration, q float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	rank := int(math.Ceil(q * float64(len(sorted))))
	return sorted[min(max(rank, 1), len(sorted))-1]
}

// medianFloat is the median of xs (the mean of the middle two for an even
// count); NaN for none.
func medianFloat(xs []float64) float64 {
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

// exactness counts answers per (partition, transactionId) to check the
// run's exactness: every distinct id answered not-failed must be queued
// exactly once, and a duplicate must have an original that was queued.
type exactness struct {
	ids map[string]*idCount
}

type idCount struct{ queued, duplicate int32 }

func newExactness() *exactness { return &exactness{ids: map[string]*idCount{}} }

// key is the scope of deduplication: one partition of one queue.
func exactnessKey(b *Batch, i int) string { return b.Queue + "\x1f" + b.Partition + "\x1f" + b.IDs[i] }

func (e *exactness) record(b *Batch, statuses []Status) {
	for i, s := range statuses {
		if s == StatusFailed {
			continue
		}
		k := exactnessKey(b, i)
		c := e.ids[k]
		if c == nil {
			c = &idCount{}
			e.ids[k] = c
		}
		if s == StatusQueued {
			c.queued++
		} else {
			c.duplicate++
		}
	}
}

// merge adds another producer's counts.
func (e *exactness) merge(o *exactness) {
	for k, oc := range o.ids {
		c := e.ids[k]
		if c == nil {
			e.ids[k] = oc
			continue
		}
		c.queued += oc.queued
		c.duplicate += oc.duplicate
	}
}

// verdict returns the distinct ids answered and the violations: ids queued
// more than once, plus ids answered only as duplicates (a duplicate of
// something never stored).
func (e *exactness) verdict() (distinct, violations int64) {
	for _, c := range e.ids {
		distinct++
		if c.queued > 1 {
			violations += int64(c.queued - 1)
		}
		if c.queued == 0 {
			violations++
		}
	}
	return distinct, violations
}
