package queengate

import (
	"fmt"
	"strings"
)

// The name rule: queue, partition and group names, and each token of a
// subject prefix, are one NATS subject token of NameRule. Everything that
// checks a name, here and in the gateway, says so with NameRule.

// ValidName reports whether s is a valid queue or partition name: 1 to
// 128 bytes of [A-Za-z0-9_-], one NATS subject token.
func ValidName(s string) bool {
	if len(s) == 0 || len(s) > MaxNameBytes {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-') {
			return false
		}
	}
	return true
}

// NameRule says what ValidName requires, for error messages.
const NameRule = "1-128 bytes of [A-Za-z0-9_-]"

// ValidPrefix checks a subject prefix: one or more dot-separated tokens,
// each a valid name.
func ValidPrefix(p string) error {
	for _, tok := range strings.Split(p, ".") {
		if !ValidName(tok) {
			return fmt.Errorf("subject prefix %q: each dot-separated token must be %s", p, NameRule)
		}
	}
	return nil
}

// CheckName refuses an invalid name of what ("queue", "partition"),
// before a request carries it.
func CheckName(what, name string) error {
	if !ValidName(name) {
		return fmt.Errorf("queengate: bad %s name %q: %s", what, name, NameRule)
	}
	return nil
}

// checkPlace refuses names a subject cannot carry: a dot would name
// another queue or partition.
func checkPlace(queue, partition string) error {
	if !ValidName(queue) || !ValidName(partition) {
		return fmt.Errorf("queengate: bad queue or partition name %q/%q: %s", queue, partition, NameRule)
	}
	return nil
}
