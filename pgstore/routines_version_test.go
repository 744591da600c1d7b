package pgstore_test

import (
	"flag"
	"fmt"
	"os"
	"regexp"
	"strconv"
	"testing"

	"github.com/queengate/queengate/pgstore"
)

var updateRoutines = flag.Bool("update", false,
	"TestRoutinesVersion: bump RoutinesVersion in routines.go if the routine files changed, and record them in "+routinesSumFile)

// routinesSumFile records the routine set RoutinesVersion names:
// "<version> <sha256 of the routine files>".
const routinesSumFile = "testdata/routines.sum"

const updateRoutinesCommand = "go test ./pgstore -run TestRoutinesVersion -update"

// TestRoutinesVersion keeps RoutinesVersion honest: a build installs its
// routines only over a lower version, so a change to any file of
// pgstore/routines without a new version would never reach a database
// that has the old set (it would be refused as other text).
func TestRoutinesVersion(t *testing.T) {
	sum := pgstore.RoutinesChecksum()
	recorded, err := os.ReadFile(routinesSumFile)
	if err != nil {
		t.Fatal(err)
	}
	var (
		version   int
		recordSum string
	)
	if _, err := fmt.Sscanf(string(recorded), "%d %64s\n", &version, &recordSum); err != nil {
		t.Fatalf("%s: %v; want \"<version> <sha256>\"", routinesSumFile, err)
	}
	next := nextRoutinesVersion(pgstore.RoutinesVersion, version, sum, recordSum)
	if *updateRoutines {
		updateRoutinesVersion(t, next, sum)
		return
	}
	switch {
	case next == pgstore.RoutinesVersion && next == version:
		// the files are the set recorded, under its version
	case sum != recordSum && pgstore.RoutinesVersion <= version:
		t.Errorf("the routine files changed (checksum %.12s; %s records %.12s at version %d) and RoutinesVersion (%d) did not: "+
			"databases with version %d would refuse them. Run\n\t%s\nwhich bumps RoutinesVersion in pgstore/routines.go to %d and records the set; commit both",
			sum, routinesSumFile, recordSum, version, pgstore.RoutinesVersion, version, updateRoutinesCommand, next)
	case pgstore.RoutinesVersion < version:
		t.Errorf("RoutinesVersion is %d, lower than the %d %s records: a version never goes down. Run\n\t%s",
			pgstore.RoutinesVersion, version, routinesSumFile, updateRoutinesCommand)
	default:
		t.Errorf("RoutinesVersion is %d, %s records version %d (checksum %.12s, the files' %.12s): record the new set. Run\n\t%s",
			pgstore.RoutinesVersion, routinesSumFile, version, recordSum, sum, updateRoutinesCommand)
	}
}

// nextRoutinesVersion is the version the routine files with checksum sum
// must have, given the constant's version and the set recorded under
// recordedVersion: the higher of the two, and past the recorded one when
// the text changed.
func nextRoutinesVersion(constant, recordedVersion int, sum, recordedSum string) int {
	if sum != recordedSum && constant <= recordedVersion {
		return recordedVersion + 1
	}
	return max(constant, recordedVersion)
}

func TestNextRoutinesVersion(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		constant, recorded int
		changed            bool
		want               int
	}{
		{constant: 3, recorded: 3, changed: false, want: 3},
		{constant: 3, recorded: 3, changed: true, want: 4},  // changed, not bumped
		{constant: 4, recorded: 3, changed: true, want: 4},  // bumped by hand
		{constant: 2, recorded: 3, changed: false, want: 3}, // lowered
		{constant: 2, recorded: 3, changed: true, want: 4},
		{constant: 5, recorded: 3, changed: false, want: 5},
	} {
		sum := "a"
		if c.changed {
			sum = "b"
		}
		if got := nextRoutinesVersion(c.constant, c.recorded, sum, "a"); got != c.want {
			t.Errorf("nextRoutinesVersion(%d, %d, changed %v) = %d, want %d", c.constant, c.recorded, c.changed, got, c.want)
		}
	}
}

var routinesVersionLine = regexp.MustCompile(`(?m)^const RoutinesVersion = \d+$`)

// updateRoutinesVersion writes version into routines.go and version with
// sum into routinesSumFile.
func updateRoutinesVersion(t *testing.T, version int, sum string) {
	src, err := os.ReadFile("routines.go")
	if err != nil {
		t.Fatal(err)
	}
	if n := len(routinesVersionLine.FindAllIndex(src, -1)); n != 1 {
		t.Fatalf("routines.go has %d lines %q, want 1", n, routinesVersionLine)
	}
	src = routinesVersionLine.ReplaceAll(src, []byte("const RoutinesVersion = "+strconv.Itoa(version)))
	if err := os.WriteFile("routines.go", src, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(routinesSumFile, fmt.Appendf(nil, "%d %s\n", version, sum), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("RoutinesVersion %d (was %d), %s records checksum %.12s", version, pgstore.RoutinesVersion, routinesSumFile, sum)
}
