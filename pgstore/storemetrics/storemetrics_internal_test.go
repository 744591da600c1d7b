package storemetrics

import (
	"fmt"
	"testing"
)

// largest keeps the n series of the largest values, largest first: the
// gauges read from the queues' figures export at most that many.
func TestLargestKeepsTheLargestSeries(t *testing.T) {
	series := []labelled{{1, []string{"a"}}, {5, []string{"b"}}, {3, []string{"c"}}, {0, []string{"d"}}}
	if got := fmt.Sprint(largest(series, 2)); got != "[{5 [b]} {3 [c]}]" {
		t.Errorf("largest 2: %s", got)
	}
	if got := len(largest(series[:1], 2)); got != 1 {
		t.Errorf("largest 2 of 1: %d series", got)
	}
}
