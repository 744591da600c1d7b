package dedup

import "testing"

// Forgetting the entries of deleted partitions frees what they held in
// the budget and leaves the others as they were; forgetting one that has
// no entry does nothing.
func TestForgetDropsOnlyTheNamedEntries(t *testing.T) {
	t.Parallel()
	c, clock, _ := newTestCache(0)
	c.Install(1, hydration(clock, 1, 10))
	c.Install(2, hydration(clock, 2, 20))
	before := c.Stats()
	c.Forget([]int64{1, 3})
	st := c.Stats()
	if st.Entries != 1 || st.ResidentHashes != 20 || st.ResidentBytes >= before.ResidentBytes || st.ResidentBytes <= 0 {
		t.Fatalf("stats after forgetting 1: %+v (before %+v); want partition 2's alone", st, before)
	}
	if ps := c.Partition(1); ps.State != "absent" {
		t.Errorf("the forgotten partition: %+v; want absent", ps)
	}
	if d := c.Decide(2, minute, hashes(1<<40, 1)); d.Verified != 19 {
		t.Errorf("the partition kept: %+v; want it to vouch for 19", d)
	}
	if d := c.Decide(1, minute, hashes(1<<40, 1)); !d.Hydrate || d.Verified != -1 {
		t.Errorf("the forgotten partition decided %+v; want a hydration, -1", d)
	}
	c.Forget([]int64{2})
	if st := c.Stats(); st.Entries != 0 || st.ResidentBytes != 0 || st.ResidentHashes != 0 {
		t.Errorf("stats with nothing left: %+v", st)
	}
}

// Clearing drops every entry and its bytes: each partition then asks for
// a hydration and vouches for nothing until it has one.
func TestClearDropsEveryEntry(t *testing.T) {
	t.Parallel()
	c, clock, _ := newTestCache(0)
	c.Install(1, hydration(clock, 1, 10))
	c.Install(2, hydration(clock, 2, 20))
	if n := c.Clear(); n != 2 {
		t.Errorf("Clear dropped %d entries, want 2", n)
	}
	if st := c.Stats(); st.Entries != 0 || st.ResidentBytes != 0 || st.ResidentHashes != 0 {
		t.Errorf("stats after Clear: %+v; want nothing resident", st)
	}
	for _, pid := range []int64{1, 2} {
		if d := c.Decide(pid, minute, hashes(1<<40, 1)); !d.Hydrate || d.Verified != -1 {
			t.Errorf("partition %d after Clear decided %+v; want a hydration, -1", pid, d)
		}
	}
}
