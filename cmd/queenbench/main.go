// Command queenbench measures queengate and the alternatives a user would
// pick instead, with the same messages, side by side in one run.
package main

import (
	"errors"
	"flag"
	"fmt"
	"os"

	"github.com/queengate/queengate/internal/bench/proc"
)

func main() {
	// queenbench re-executes itself to run servers it measures as separate
	// processes, so their CPU and memory are not mixed with the load
	// generator's.
	proc.PlayRole()
	if err := run(os.Args[1:], os.Stdout, os.Stderr); err != nil {
		if !errors.Is(err, flag.ErrHelp) {
			fmt.Fprintln(os.Stderr, "queenbench:", err)
		}
		os.Exit(exitCode(err))
	}
}
