package main

import (
	"strings"
	"testing"
)

// testPurgeAndDeleteQueue purges and then deletes a queue of its own:
// only once its name is typed back or with --yes, saying what was
// removed; afterwards the same transactionId is a duplicate (purge) and
// queued again (delete).
func testPurgeAndDeleteQueue(t *testing.T, tr transport) {
	ctl(t, "", flags(tr.push, "push", "scratch", "p1", `{"n":1}`, "--txn-id", "s-1")...).expect(t, exitOK, "queued")
	ctl(t, "", flags(tr.push, "push", "scratch", "p2", `{"n":2}`, "--txn-id", "s-2")...).expect(t, exitOK, "queued")
	ctl(t, "scratc\n", flags(tr.admin, "purge", "queue", "scratch")...).expect(t, exitUsage, "not confirmed", "nothing was purged")
	ctl(t, "", flags(tr.admin, "purge", "queue", "scratch", "--partition", "bad!", "--yes")...).expect(t, exitUsage, "bad partition name")
	ctl(t, "", flags(tr.admin, "purge", "queue", "scratch", "--partition", "nosuch", "--yes")...).expect(t, exitGateway, "gateway answered 404", "nosuch")
	ctl(t, "scratch\n", flags(tr.admin, "purge", "queue", "scratch", "--partition", "p1")...).expect(t, exitOK,
		"purged queue scratch (partition p1): 1 partitions, 1 messages")
	ctl(t, "", flags(tr.admin, "purge", "queue", "scratch", "--yes")...).expect(t, exitOK,
		"purged queue scratch (every partition): 2 partitions, 1 messages")
	ctl(t, "", flags(tr.push, "push", "scratch", "p1", `{"n":1}`, "--txn-id", "s-1")...).expect(t, exitOK, "duplicate")
	// The queue has no retention: what is gone was purged, and read says so.
	if r := ctl(t, "", flags(tr.admin, "read", "scratch", "p1")...); r.code != exitOK ||
		!strings.Contains(r.stderr, "offsets below 1 were purged (the queue has no retention); reading from 1") {
		t.Errorf("read after a purge: exit %d, stderr %q; want it to say the offsets were purged", r.code, r.stderr)
	}

	ctl(t, "no\n", flags(tr.admin, "delete", "queue", "scratch")...).expect(t, exitUsage, "not confirmed", "nothing was deleted")
	if r := ctl(t, "", flags(tr.admin, "get", "queues")...); !strings.Contains(r.stdout, "scratch") {
		t.Fatalf("an unconfirmed delete deleted the queue:\n%s", r.stdout)
	}
	ctl(t, "scratch\n", flags(tr.admin, "delete", "queue", "scratch")...).expect(t, exitOK,
		"deleted queue scratch: 2 partitions, 0 messages", "no dead-letter queue")
	ctl(t, "", flags(tr.admin, "delete", "queue", "scratch", "--yes")...).expect(t, exitGateway, "gateway answered 404", "scratch")
	ctl(t, "", flags(tr.admin, "delete", "queue", "bad!", "--yes")...).expect(t, exitUsage, "bad queue name")
	ctl(t, "", flags(tr.admin, "purge", "queue")...).expect(t, exitUsage, "purge queue QUEUE")
	ctl(t, "", flags(tr.push, "push", "scratch", "p1", `{"n":1}`, "--txn-id", "s-1")...).expect(t, exitOK, "queued")
}
