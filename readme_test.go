package queengate_test

import (
	"os"
	"regexp"
	"testing"
	"time"
)

// TestREADMENamesFilesThatExist: every repository file the README names
// (testdata/…, docs/…) and every file its commands read (< file, -f
// file) is there, relative to the repository's root.
func TestREADMENamesFilesThatExist(t *testing.T) {
	t.Parallel()
	readme, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	paths := regexp.MustCompile(`(?:testdata|docs)/[A-Za-z0-9_./-]*[A-Za-z0-9_]`).FindAllString(string(readme), -1)
	for _, m := range regexp.MustCompile(`(?m)^[^|\n]*(?:< |-f )([A-Za-z0-9_./-]+)`).FindAllStringSubmatch(string(readme), -1) {
		paths = append(paths, m[1])
	}
	if len(paths) == 0 {
		t.Fatal("the README names no file under testdata/ or docs/")
	}
	for _, p := range paths {
		if _, err := os.Stat(p); err != nil {
			t.Errorf("the README names %s: %v", p, err)
		}
	}
}

// TestREADMETimerExampleIsAhead: a timer the README schedules at a
// written date must not be in the past when a reader tries it.
func TestREADMETimerExampleIsAhead(t *testing.T) {
	t.Parallel()
	readme, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range regexp.MustCompile(`--at\s+"?(\d{4}-\d\d-\d\dT[0-9:.]+(?:Z|[+-]\d\d:\d\d))`).FindAllStringSubmatch(string(readme), -1) {
		at, err := time.Parse(time.RFC3339Nano, m[1])
		if err != nil || !at.After(time.Now().AddDate(1, 0, 0)) {
			t.Errorf("the README schedules a timer --at %s: give a relative time (or a date a year ahead)", m[1])
		}
	}
}
