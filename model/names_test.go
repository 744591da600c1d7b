package model

import (
	"regexp"
	"strings"
	"testing"
)

// TestParseMessageIDRefusesHalvesBeyondInt64: an id whose partition or
// offset half is 2^63 or more is an error, never a negative number.
func TestParseMessageIDRefusesHalvesBeyondInt64(t *testing.T) {
	for _, id := range []string{
		"00000000-0000-0001-8000-000000000000",
		"00000000-0000-0001-ffff-ffffffffffff",
		"80000000-0000-0001-0000-000000000000",
		"ffffffff-ffff-ffff-0000-000000000001",
	} {
		if p, o, err := ParseMessageID(id); err == nil {
			t.Errorf("ParseMessageID(%q) = %d, %d; want an error", id, p, o)
		}
	}
	if p, o, err := ParseMessageID("7fffffff-ffff-ffff-7fff-ffffffffffff"); err != nil || p != 1<<63-1 || o != 1<<63-1 {
		t.Errorf("the largest id: %d, %d, %v", p, o, err)
	}
}

// TestDeadLetterQueueNamesNeverCollide: every dead-letter queue name is a
// valid name, distinct queues get distinct ones — long names sharing
// their first 124 bytes included — and the long form never equals a
// short one.
func TestDeadLetterQueueNamesNeverCollide(t *testing.T) {
	valid := regexp.MustCompile(`^[A-Za-z0-9_-]{1,128}$`)
	prefix124 := strings.Repeat("q", 124)
	names := []string{"orders", "orders-dlq", strings.Repeat("a", 124),
		prefix124, prefix124 + "a", prefix124 + "b", prefix124 + "ab", prefix124 + "abcd", prefix124[:123] + "-abcd"}
	// The short form of a 124-byte name shaped like a long form's start.
	long := DeadLetterQueue(prefix124 + "x")
	names = append(names, strings.TrimSuffix(long, "-dlq"), long[:124])
	seen := map[string]string{}
	for _, q := range names {
		dlq := DeadLetterQueue(q)
		if !valid.MatchString(dlq) {
			t.Errorf("DeadLetterQueue(%.20s… %d bytes) = %q: not a valid name", q, len(q), dlq)
		}
		if len(q) <= 124 && dlq != q+"-dlq" {
			t.Errorf("DeadLetterQueue(%q) = %q, want %q", q, dlq, q+"-dlq")
		}
		if other, ok := seen[dlq]; ok && other != q {
			t.Errorf("%q and %q share the dead-letter queue %q", other, q, dlq)
		}
		seen[dlq] = q
	}
	if strings.HasSuffix(long, "-dlq") {
		t.Errorf("the long form %q ends like a short one", long)
	}
}
