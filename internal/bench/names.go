package bench

import (
	"strconv"
	"strings"
)

// FleetSize parses queengate@N: queengate run as a fleet of N gateways
// (--self), to compare with one gateway in the same run.
func FleetSize(name string) (n int, ok bool) {
	rest, found := strings.CutPrefix(name, "queengate@")
	if !found {
		return 0, false
	}
	n, err := strconv.Atoi(rest)
	return n, err == nil && n >= 1 && n <= 16
}

// BaseName is a target's kind: queengate@3 is queengate.
func BaseName(target string) string {
	if _, ok := FleetSize(target); ok {
		return "queengate"
	}
	return target
}
