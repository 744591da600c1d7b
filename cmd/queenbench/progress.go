package main

import (
	"fmt"
	"io"
	"os"
	"strings"
	"sync/atomic"
	"time"
)

// isTerminal reports whether w is a character device (a terminal).
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}

// startProgress draws a progress bar on w while a run goes, when w is a
// terminal; it returns the function that stops and clears it.
func startProgress(w io.Writer, g *generator, answered *atomic.Int64, deadline time.Time) func() {
	if w == nil || !isTerminal(w) {
		return func() {}
	}
	done := make(chan struct{})
	finished := make(chan struct{})
	start := time.Now()
	go func() {
		defer close(finished)
		tick := time.NewTicker(200 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-done:
				fmt.Fprint(w, "\r\033[K")
				return
			case <-tick.C:
			}
			n := answered.Load()
			frac := 0.0
			switch {
			case g.limit > 0:
				frac = float64(n) / float64(g.limit)
			case !deadline.IsZero():
				frac = time.Since(start).Seconds() / deadline.Sub(start).Seconds()
			}
			frac = min(max(frac, 0), 1)
			const width = 30
			bar := strings.Repeat("#", int(frac*width)) + strings.Repeat(".", width-int(frac*width))
			rate := float64(n) / time.Since(start).Seconds()
			fmt.Fprintf(w, "\r[%s] %3.0f%%  %d messages  %.0f msg/s", bar, frac*100, n, rate)
		}
	}()
	return func() {
		close(done)
		<-finished
	}
}
