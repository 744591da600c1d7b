package main

import (
	"strings"
	"testing"
)

// testDeleteGroup deletes a consumer group of "jobs" (pushed by
// testConsume): only once its name is typed back or with --yes, and says
// what the delete released.
func testDeleteGroup(t *testing.T, tr transport) {
	ctl(t, "", flags(tr.push, "consume", "jobs", "--group", "gone", "--count", "1", "--max", "1")...).expect(t, exitOK, `"job":1`)
	ctl(t, "no\n", flags(tr.admin, "delete", "group", "jobs", "gone")...).expect(t, exitUsage, "not confirmed", "nothing was deleted")
	ctl(t, "", flags(tr.admin, "delete", "group", "jobs", "gone")...).expect(t, exitUsage, "not confirmed")
	if r := ctl(t, "", flags(tr.admin, "get", "groups", "jobs")...); !strings.Contains(r.stdout, "gone") {
		t.Fatalf("an unconfirmed delete deleted the group:\n%s", r.stdout)
	}
	ctl(t, "gone\n", flags(tr.admin, "delete", "group", "jobs", "gone")...).expect(t, exitOK,
		"deleted consumer group gone of queue jobs", "1 partitions", "2 messages not consumed", "0 leases")
	if r := ctl(t, "", flags(tr.admin, "get", "groups", "jobs")...); strings.Contains(r.stdout, "gone") || !strings.Contains(r.stdout, "workers") {
		t.Fatalf("after deleting gone, the groups of jobs:\n%s", r.stdout)
	}
	ctl(t, "", flags(tr.admin, "delete", "group", "jobs", "gone", "--yes")...).expect(t, exitGateway, "gateway answered 404", `"gone"`)
	ctl(t, "", flags(tr.admin, "delete", "group", "jobs", "bad!", "--yes")...).expect(t, exitUsage, "bad group name")
	ctl(t, "", flags(tr.admin, "delete", "group", "jobs")...).expect(t, exitUsage, "delete group QUEUE GROUP")
}
