package pgstore_test

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/queengate/queengate/model"
)

// pushEach pushes one frame per transactionId, so that each message has
// a segment (and a created_at) of its own.
func (b *testBundle) pushEach(t *testing.T, ids ...string) {
	t.Helper()
	for _, id := range ids {
		b.push(t, -1, id)
	}
}

func (b *testBundle) create(t *testing.T, name string, start model.GroupStart) model.GroupCreated {
	t.Helper()
	c, err := b.store.CreateGroup(context.Background(), b.queue, name, start)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func (b *testBundle) seek(t *testing.T, name string, seek model.Seek) []model.GroupMove {
	t.Helper()
	_, moves, err := b.store.SeekGroup(context.Background(), b.queue, name, seek)
	if err != nil {
		t.Fatal(err)
	}
	return moves
}

// Each start position: earliest delivers every stored message, latest
// only those pushed after the create (also on a partition made later,
// from its offset 0), offsets from the offset named (the others from
// their earliest), a time from the first message stored at or after it.
func TestAGroupStartsWhereItsCreateSays(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setupConsumer(t, 0)
	b.pushEach(t, "t0", "t1", "t2", "t3")
	b.age(t, 0, time.Hour)
	b.age(t, 2, -time.Hour+time.Second) // 2 and 3: a second ago
	other, err := b.store.EnsurePartition(ctx, b.queue, "other")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.store.Push(ctx, []model.Frame{newFrame(other.ID, -1, "o0", "o1")}); err != nil {
		t.Fatal(err)
	}

	pops := func(g model.Group, partitionID int64) []int64 {
		t.Helper()
		r, err := b.store.Pop(ctx, model.PopQuery{Group: g, PartitionID: partitionID, Max: 10, Lease: time.Minute,
			Consumer: "c", MaxBytes: 1 << 20, Room: 1 << 20})
		if err != nil {
			t.Fatal(err)
		}
		return offsetsOf(r)
	}
	for _, tc := range []struct {
		name             string
		start            model.GroupStart
		onDefault, other []int64
	}{
		{"e", model.GroupStart{From: model.StartEarliest}, []int64{0, 1, 2, 3}, []int64{0, 1}},
		{"l", model.GroupStart{From: model.StartLatest}, nil, nil},
		{"o", model.GroupStart{From: model.StartOffsets, Offsets: map[string]int64{"Default": 3}}, []int64{3}, []int64{0, 1}},
		{"t", model.GroupStart{From: model.StartTime, Time: time.Now().Add(-time.Minute)}, []int64{2, 3}, []int64{0, 1}},
	} {
		c := b.create(t, tc.name, tc.start)
		if !c.Created || len(c.Moves) != 2 {
			t.Fatalf("%s: created %v on %d partitions; want created on 2", tc.name, c.Created, len(c.Moves))
		}
		if got := pops(c.Group, b.part.ID); !slices.Equal(got, tc.onDefault) {
			t.Errorf("%s: pops %v on Default; want %v", tc.name, got, tc.onDefault)
		}
		if got := pops(c.Group, other.ID); !slices.Equal(got, tc.other) {
			t.Errorf("%s: pops %v on other; want %v", tc.name, got, tc.other)
		}
	}
	// latest: what is pushed after, on an old partition and on a new one,
	// found by pops of any partition (the create parked the cursors it
	// moved to the end: a push wakes them).
	l, err := b.store.FindGroup(ctx, b.queue, "l")
	if err != nil {
		t.Fatal(err)
	}
	b.pushEach(t, "t4")
	if got := pops(l, 0); !slices.Equal(got, []int64{4}) {
		t.Errorf("latest pops %v of any partition after a push; want [4]", got)
	}
	later, err := b.store.EnsurePartition(ctx, b.queue, "later")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.store.Push(ctx, []model.Frame{newFrame(later.ID, -1, "n0")}); err != nil {
		t.Fatal(err)
	}
	if got := pops(l, 0); !slices.Equal(got, []int64{0}) {
		t.Errorf("latest pops %v of any partition after a push to a partition made after it; want [0]", got)
	}
}

// A create of a group that exists: the same start changes nothing and
// answers created false; another start is ErrGroupExists (a group a pop
// made started at the earliest). A partition that does not exist in
// "offsets" creates nothing.
func TestCreatingAGroupThatExists(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setupConsumer(t, 3)
	at := time.Date(2026, 12, 1, 9, 0, 0, 0, time.FixedZone("x", 3600))
	b.create(t, "t", model.GroupStart{From: model.StartTime, Time: at})
	if c := b.create(t, "t", model.GroupStart{From: model.StartTime, Time: at.UTC()}); c.Created || len(c.Moves) != 0 {
		t.Fatalf("the same create again: %+v; want created false, nothing moved", c)
	}
	for name, start := range map[string]model.GroupStart{
		"t": {From: model.StartTime, Time: at.Add(time.Second)},
		"g": {From: model.StartLatest}, // made by setupConsumer's EnsureGroup
	} {
		_, err := b.store.CreateGroup(ctx, b.queue, name, start)
		if !errors.Is(err, model.ErrGroupExists) {
			t.Fatalf("create of %s with another start: %v; want ErrGroupExists", name, err)
		}
	}
	if c := b.create(t, "g", model.GroupStart{From: model.StartEarliest}); c.Created {
		t.Fatal("create earliest of a group a pop made: created again")
	}
	_, err := b.store.CreateGroup(ctx, b.queue, "o", model.GroupStart{From: model.StartOffsets, Offsets: map[string]int64{"Default": 1, "nope": 0}})
	if !errors.Is(err, model.ErrNotFound) {
		t.Fatalf("offsets naming a partition that does not exist: %v; want ErrNotFound", err)
	}
	if _, err := b.store.FindGroup(ctx, b.queue, "o"); !errors.Is(err, model.ErrGroupNotFound) {
		t.Fatalf("after the refused create the group exists: %v", err)
	}
}

// A seek back replays from the offset at attempt 1; a seek forward skips.
// The lease running ends: its acks answer leaseNotHeld (at or above the
// new position) or alreadyAcked (below) and never move the cursor.
func TestSeekingAGroupEndsItsLeaseAndItsAcksMoveNothing(t *testing.T) {
	t.Parallel()
	b := setupConsumer(t, 10)
	r := b.pop(t, b.group, 5)
	b.ack(t, r.LeaseID, doneAt(0), doneAt(1), model.Settlement{Offset: 2, Error: "e"})
	moves := b.seek(t, "g", model.Seek{Offset: 0})
	if want := []model.GroupMove{{Partition: "Default", From: 2, To: 0, LeaseEnded: true}}; !slices.Equal(moves, want) {
		t.Fatalf("seek to 0: %+v; want %+v", moves, want)
	}
	a := b.ack(t, r.LeaseID, doneAt(3), doneAt(4))
	if !slices.Equal(results(a), []string{model.AckLeaseNotHeld, model.AckLeaseNotHeld}) || a.NextOffset != 0 {
		t.Fatalf("an ack under the lease the seek ended: %v, cursor %d; want leaseNotHeld and the cursor at 0", results(a), a.NextOffset)
	}
	r = b.pop(t, b.group, 4)
	if got := offsetsOf(r); !slices.Equal(got, []int64{0, 1, 2, 3}) || !slices.Equal(attemptsOf(r), []int{1, 1, 1, 1}) || r.Messages[2].LastError != "" {
		t.Fatalf("after the seek back: %v attempts %v; want 0..3 afresh at attempt 1", got, attemptsOf(r))
	}

	moves = b.seek(t, "g", model.Seek{Offset: 8})
	if want := []model.GroupMove{{Partition: "Default", From: 0, To: 8, LeaseEnded: true}}; !slices.Equal(moves, want) {
		t.Fatalf("seek to 8: %+v; want %+v", moves, want)
	}
	a = b.ack(t, r.LeaseID, doneAt(0), doneAt(1), doneAt(2), doneAt(3))
	if !slices.Equal(results(a), []string{model.AckAlready, model.AckAlready, model.AckAlready, model.AckAlready}) || a.NextOffset != 8 {
		t.Fatalf("an ack under the lease the seek ended: %v, cursor %d; want alreadyAcked and the cursor at 8", results(a), a.NextOffset)
	}
	if got := offsetsOf(b.pop(t, b.group, 10)); !slices.Equal(got, []int64{8, 9}) {
		t.Fatalf("after the seek forward: %v; want 8, 9", got)
	}
}

// A seek by time, of the group or of one partition: only the partition
// named moves; one to a time after every message goes to the end.
func TestSeekingByTimeOneOrEveryPartition(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setupConsumer(t, 0)
	b.pushEach(t, "t0", "t1", "t2")
	b.age(t, 0, 2*time.Hour)
	b.age(t, 1, -time.Hour) // 1 and 2 an hour ago
	other, err := b.store.EnsurePartition(ctx, b.queue, "other")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.store.Push(ctx, []model.Frame{newFrame(other.ID, -1, "o0")}); err != nil {
		t.Fatal(err)
	}
	moves := b.seek(t, "g", model.Seek{Partition: "Default", Time: time.Now().Add(-90 * time.Minute)})
	if want := []model.GroupMove{{Partition: "Default", From: 0, To: 1}}; !slices.Equal(moves, want) {
		t.Fatalf("seek of Default to 90 minutes ago: %+v; want %+v", moves, want)
	}
	moves = b.seek(t, "g", model.Seek{Time: time.Now().Add(time.Minute)})
	want := []model.GroupMove{{Partition: "Default", From: 1, To: 3}, {Partition: "other", From: 0, To: 1}}
	if !slices.Equal(moves, want) {
		t.Fatalf("seek of the group past every message: %+v; want %+v", moves, want)
	}
	if r := b.pop(t, b.group, 10); len(r.Messages) != 0 {
		t.Fatalf("after a seek to the end a pop delivers %v", offsetsOf(r))
	}
	if _, _, err := b.store.SeekGroup(ctx, b.queue, "g", model.Seek{Partition: "nope"}); !errors.Is(err, model.ErrNotFound) {
		t.Fatalf("seek of a partition that does not exist: %v; want ErrNotFound", err)
	}
	if _, _, err := b.store.SeekGroup(ctx, b.queue, "none", model.Seek{}); !errors.Is(err, model.ErrGroupNotFound) {
		t.Fatalf("seek of a group that does not exist: %v; want ErrGroupNotFound", err)
	}
}

// A seek below what retention deleted lands on the first stored message,
// past the last on the end; both say clamped.
func TestSeekingBeyondWhatIsStoredIsClamped(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setupConsumer(t, 0)
	b.pushEach(t, "t0", "t1", "t2", "t3")
	if _, err := b.store.Pool().Exec(ctx, "DELETE FROM queen.log_segments WHERE partition_id = $1 AND base_offset < 2", b.part.ID); err != nil {
		t.Fatal(err) // as retention deletes a prefix
	}
	for _, tc := range []struct {
		seek model.Seek
		want model.GroupMove
	}{
		{model.Seek{Offset: 0}, model.GroupMove{Partition: "Default", From: 0, To: 2, Clamped: true}},
		{model.Seek{Offset: 3}, model.GroupMove{Partition: "Default", From: 2, To: 3}},
		{model.Seek{Offset: 99}, model.GroupMove{Partition: "Default", From: 3, To: 4, Clamped: true}},
		{model.Seek{Time: time.Now().Add(-time.Hour)}, model.GroupMove{Partition: "Default", From: 4, To: 2, Clamped: true}},
	} {
		if moves := b.seek(t, "g", tc.seek); !slices.Equal(moves, []model.GroupMove{tc.want}) {
			t.Errorf("seek %+v: %+v; want %+v", tc.seek, moves, tc.want)
		}
	}
}

// A group idle past its queue's groupIdleSeconds stops holding
// retention: the pass deletes what only it held, lists it, and its
// activity says so; popping again, it holds again.
func TestAnIdleGroupStopsHoldingRetention(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setupRetainUntilConsumed(t)
	if _, _, err := b.store.Configure(ctx, b.queue, model.OptionsPatch{GroupIdleSeconds: ptr(600)}, false); err != nil {
		t.Fatal(err)
	}
	b.pushEach(t, "t0", "t1", "t2")
	idle := &consumerBundle{testBundle: b, group: b.group(t, "idle")}
	r := idle.pop(t, idle.group, 1)
	idle.ack(t, r.LeaseID, doneAt(0))
	b.age(t, 0, time.Hour)
	st, err := b.store.Retain(ctx, retainOpts(0))
	if err != nil {
		t.Fatal(err)
	}
	if s := b.count(t, "log_segments"); s != 2 || len(st.IdleGroups) != 0 {
		t.Fatalf("while the group is active: %d segments, idle %v; want 2 (held from its cursor at 1), none idle", s, st.IdleGroups)
	}
	if _, err := b.store.Pool().Exec(ctx, `UPDATE queen.consumer_groups SET created_at = created_at - interval '20 minutes' WHERE id = $1;
		`, idle.group.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := b.store.Pool().Exec(ctx, `UPDATE queen.consumer_cursors SET leased_at = leased_at - interval '20 minutes' WHERE group_id = $1`, idle.group.ID); err != nil {
		t.Fatal(err)
	}
	st, err = b.store.Retain(ctx, retainOpts(0))
	if err != nil {
		t.Fatal(err)
	}
	if s := b.count(t, "log_segments"); s != 0 || len(st.IdleGroups) != 1 || st.IdleGroups[0].Group != "idle" {
		t.Fatalf("idle 20 minutes of 10 allowed: %d segments, idle %+v; want none left, the group listed", s, st.IdleGroups)
	}
	act, err := b.store.GroupActivity(ctx, idle.group.QueueID)
	if err != nil {
		t.Fatal(err)
	}
	if len(act) != 1 || !act[0].NotHolds || act[0].IdleFor < 20*time.Minute {
		t.Fatalf("activity %+v; want idle 20 minutes at least, not holding", act)
	}
	if r := idle.pop(t, idle.group, 5); len(r.Messages) != 0 {
		t.Fatalf("the idle group pops %v of what retention deleted", offsetsOf(r))
	}
	if gp := idle.groupPartition(t); gp.DeletedUnconsumed != 2 {
		t.Fatalf("deletedUnconsumed %d; want 2 (offsets 1 and 2)", gp.DeletedUnconsumed)
	}
	if act, err = b.store.GroupActivity(ctx, idle.group.QueueID); err != nil || act[0].NotHolds {
		t.Fatalf("after its pop the group does not hold: %+v %v", act, err)
	}
}

// idleFor is how long group has been idle, by its queue's activity.
func (b *testBundle) idleFor(t *testing.T, g model.Group) time.Duration {
	t.Helper()
	act, err := b.store.GroupActivity(context.Background(), g.QueueID)
	if err != nil {
		t.Fatal(err)
	}
	i := slices.IndexFunc(act, func(a model.GroupActivity) bool { return a.Group == g.Name })
	if i < 0 {
		t.Fatalf("no activity of %s: %+v", g.Name, act)
	}
	return act[i].IdleFor
}

// The activity a gateway notes counts for its groups: a group idle an
// hour is active once noted; a later note of an older time never moves
// it back (several gateways write the same groups); a group that no
// longer exists is left out; a group row another transaction holds is
// skipped, not waited for, and said so, and written by the next note.
func TestNotedActivityCountsAndNeverMovesBack(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setup(t)
	g, h := b.group(t, "g"), b.group(t, "h")
	if _, err := b.store.Pool().Exec(ctx, `UPDATE queen.consumer_groups SET created_at = now() - interval '1 hour' WHERE id IN ($1, $2)`,
		g.ID, h.ID); err != nil {
		t.Fatal(err)
	}
	note := func(noted ...model.GroupNoted) []int64 {
		t.Helper()
		ctx, cancel := context.WithTimeout(ctx, time.Minute)
		defer cancel()
		skipped, err := b.store.NoteActive(ctx, noted)
		if err != nil {
			t.Fatal(err)
		}
		return skipped
	}
	if d := b.idleFor(t, g); d < time.Hour {
		t.Fatalf("before any note g is idle %s; want an hour", d)
	}
	if skipped := note(model.GroupNoted{GroupID: g.ID, Ago: 2 * time.Second}, model.GroupNoted{GroupID: h.ID + 1_000_000}); len(skipped) != 0 {
		t.Fatalf("skipped %v; want none (a group that does not exist is left out)", skipped)
	}
	if d := b.idleFor(t, g); d < 2*time.Second || d > time.Minute {
		t.Fatalf("noted active 2 s ago, g is idle %s", d)
	}
	note(model.GroupNoted{GroupID: g.ID, Ago: 30 * time.Minute})
	if d := b.idleFor(t, g); d > time.Minute {
		t.Fatalf("after a note of 30 minutes ago g is idle %s; want what the later note said", d)
	}
	tx, err := b.store.Pool().Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback(ctx) }()
	if _, err := tx.Exec(ctx, "SELECT 1 FROM queen.consumer_groups WHERE id = $1 FOR UPDATE", h.ID); err != nil {
		t.Fatal(err)
	}
	if skipped := note(model.GroupNoted{GroupID: g.ID}, model.GroupNoted{GroupID: h.ID}); !slices.Equal(skipped, []int64{h.ID}) {
		t.Fatalf("skipped %v while h's row was held; want h (%d)", skipped, h.ID)
	}
	if d := b.idleFor(t, h); d < time.Hour {
		t.Fatalf("noted while its row was held, h is idle %s; want its hour still (skipped)", d)
	}
	if err := tx.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	note(model.GroupNoted{GroupID: h.ID})
	if d := b.idleFor(t, h); d > time.Minute {
		t.Fatalf("noted once its row was free, h is idle %s", d)
	}
}
