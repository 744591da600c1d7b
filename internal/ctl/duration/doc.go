// Package duration reads and writes the durations operators type at
// queenctl: whole seconds for queue options and whole milliseconds for
// delays, a Go duration optionally after whole days (7d, 1d12h, 90s),
// within the wire's limits; and the same form back for display. It
// imports nothing of this module.
package duration
