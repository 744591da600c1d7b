package main

import (
	"strings"
	"testing"
)

// testCreateAndSeekGroup creates groups of "jobs" (pushed by testConsume,
// its three messages consumed by group workers) at a start position, and
// seeks workers back (only once its name is typed back or with --yes) so
// that it consumes again.
func testCreateAndSeekGroup(t *testing.T, tr transport) {
	ctl(t, "", flags(tr.admin, "create", "group", "jobs", "late", "--start", "latest")...).expect(t, exitOK,
		"created consumer group late of queue jobs on 1 partitions", "PARTITION  FROM  TO  NOTE", "p          0     3   -")
	ctl(t, "", flags(tr.admin, "create", "group", "jobs", "late", "--start", "latest")...).expect(t, exitOK, "exists with the same start: nothing changed")
	ctl(t, "", flags(tr.admin, "create", "group", "jobs", "late")...).expect(t, exitGateway, "gateway answered 409", `start "latest", not "earliest"`)
	ctl(t, "", flags(tr.admin, "create", "group", "jobs", "at1", "--offset", "p=1")...).expect(t, exitOK, "p          0     1   -")
	ctl(t, "", flags(tr.admin, "create", "group", "jobs", "x", "--offset", "nope=1")...).expect(t, exitGateway, "gateway answered 404", `partition "nope"`)
	ctl(t, "", flags(tr.admin, "create", "group", "jobs", "x", "--start", "latest", "--at", "2026-12-01T09:00:00Z")...).expect(t, exitUsage, "give one of")
	ctl(t, "", flags(tr.admin, "create", "group", "jobs", "x", "--offset", "p")...).expect(t, exitUsage, "PARTITION=OFFSET")

	ctl(t, "no\n", flags(tr.admin, "seek", "group", "jobs", "workers", "--offset", "1")...).expect(t, exitUsage, "not confirmed", "nothing was moved")
	ctl(t, "", flags(tr.admin, "seek", "group", "jobs", "workers")...).expect(t, exitUsage, "give --offset N or --at TIME")
	ctl(t, "workers\n", flags(tr.admin, "seek", "group", "jobs", "workers", "--offset", "1")...).expect(t, exitOK,
		"moved consumer group workers of queue jobs on 1 of 1 partitions (0 clamped, 0 leases ended)", "p          3     1   -")
	r := ctl(t, "", flags(tr.push, "consume", "jobs", "--group", "workers", "--count", "2")...)
	r.expect(t, exitOK, `"job":2`, `"job":3`)
	if strings.Contains(r.stdout, `"job":1`) {
		t.Fatalf("after a seek to offset 1 the group consumed offset 0 again:\n%s", r.stdout)
	}
	ctl(t, "", flags(tr.admin, "seek", "group", "jobs", "workers", "--offset", "99", "--partition", "p", "--yes")...).expect(t, exitOK,
		"(1 clamped", "clamped to what is stored")
	ctl(t, "", flags(tr.admin, "seek", "group", "jobs", "nosuch", "--offset", "0", "--yes")...).expect(t, exitGateway, "gateway answered 404", `"nosuch"`)
	ctl(t, "", flags(tr.admin, "get", "groups", "jobs")...).expect(t, exitOK, "GROUP    IDLE", "HOLDS RETENTION", "yes")
}

// testGroupsShowDelays: a message failed on a queue whose retryDelayMs
// is an hour holds its partition for the group; get groups says until
// when, and how many partitions of the group are held.
func testGroupsShowDelays(t *testing.T, tr transport) {
	ctl(t, "", flags(tr.admin, "configure", "later", "--retry-delay", "1h")...).expect(t, exitOK, "retryDelayMs:")
	ctl(t, "", flags(tr.push, "push", "later", "p", `{"later":1}`)...).expect(t, exitOK, "1 queued")
	ctl(t, "", flags(tr.push, "consume", "later", "--group", "g", "--count", "1", "--fail", "not yet")...).expect(t, exitOK, `"later":1`)
	r := ctl(t, "", flags(tr.admin, "get", "groups", "later")...)
	r.expect(t, exitOK, "DELAYED UNTIL", "DELAYED PARTITIONS")
	var delayed, held bool
	for _, line := range strings.Split(r.stdout, "\n") {
		f := strings.Fields(line)
		delayed = delayed || len(f) == 8 && f[0] == "g" && f[1] == "p" && f[7] != "-"
		held = held || len(f) >= 3 && f[0] == "g" && f[2] == "1"
	}
	if !delayed || !held {
		t.Errorf("get groups of a group held by a delay: no delayed-until time or no held partition counted:\n%s", r.stdout)
	}
	ctl(t, "", flags(tr.admin, "get", "groups", "later", "-o", "json")...).expect(t, exitOK, `"delayedUntil": "`, `"delayedPartitions": 1`)
}
