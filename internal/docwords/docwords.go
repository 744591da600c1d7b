// Package docwords reads docs/design.md's Words table for the tests that
// keep names to it: the words its last column says are not used (in
// package names, metric names and metric help), and where a text uses
// one.
package docwords

import (
	"fmt"
	"regexp"
	"strings"
)

// header opens the Words table.
const header = "| word | what it is | not |"

var backquoted = regexp.MustCompile("`([^`]+)`")

// Retired reads the words not used from the Words table of doc (the text
// of docs/design.md): each backquoted word of a row's last cell.
func Retired(doc string) ([]string, error) {
	_, after, ok := strings.Cut(doc, header+"\n")
	if !ok {
		return nil, fmt.Errorf("no Words table (a table headed %q)", header)
	}
	var retired []string
	for i, line := range strings.Split(after, "\n") {
		if !strings.HasPrefix(line, "|") {
			break
		}
		cells := strings.Split(strings.Trim(line, "| "), " | ")
		if i == 0 || len(cells) < 3 {
			continue // the header's rule; a row with an empty last cell
		}
		// A word, then what it may still name: only the word is retired.
		if m := backquoted.FindStringSubmatch(cells[len(cells)-1]); m != nil {
			retired = append(retired, strings.ToLower(m[1]))
		}
	}
	if len(retired) == 0 {
		return nil, fmt.Errorf("the Words table retires no word")
	}
	return retired, nil
}

// Used says which retired words text uses, as whole words in any case
// (with a plural s): a word inside an identifier joined by underscores,
// as `log_segments`, is not a use, but a metric name is split at its
// underscores by the caller.
func Used(text string, retired []string) []string {
	var used []string
	for _, w := range retired {
		re := regexp.MustCompile(`(?i)(^|[^a-z0-9_])` + regexp.QuoteMeta(w) + `s?([^a-z0-9_]|$)`)
		if re.MatchString(text) {
			used = append(used, w)
		}
	}
	return used
}
