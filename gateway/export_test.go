package gateway

import (
	"testing"
	"time"
)

// DecodeServing reads a heartbeat's serving set, for tests that watch the
// fleet from outside.
var DecodeServing = func(s string, n int) ([]bool, error) {
	b, err := decodeBitset(s, n)
	if err != nil {
		return nil, err
	}
	out := make([]bool, n)
	for k := range out {
		out[k] = b.has(k)
	}
	return out, nil
}

// SetRecheck sets how long a long poll sleeps at most between pops.
func (c *Consumers) SetRecheck(d time.Duration) { c.recheck = d }

// Waiting reports whether a pop waits for a commit to queue.
func (c *Consumers) Waiting(queue string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.waiting[queue] != nil
}

// MetricValue is a counter's value, or a histogram's sample count, as a
// registry has it.
var MetricValue = metricValue

// LogBuffer collects a logger's output across goroutines.
type LogBuffer = logBuffer

// Lines are the JSON log lines whose message is msg.
func (l *logBuffer) Lines(t *testing.T, msg string) []map[string]any { return l.lines(t, msg) }
