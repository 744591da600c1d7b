package verify

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/queengate/queengate/internal/pgtest"
	"github.com/queengate/queengate/model"
	"github.com/queengate/queengate/pgstore"
)

func TestMain(m *testing.M) { pgtest.Run(m) }

// logFixture is a queue written through the real store: partition p
// holds a, b, c (one push) then d, e (another); every message was
// answered queued, and a was also answered duplicate by a retry.
type logFixture struct {
	url     string
	store   *pgstore.Store
	pid     int64
	sent    []Sent
	answers []Answer
}

const fixtureQueue = "chaos-verify"

func newLogFixture(t *testing.T) *logFixture {
	t.Helper()
	f := &logFixture{url: pgtest.NewDB(t)}
	f.store = pgtest.Store(t, f.url)
	p, err := f.store.EnsurePartition(context.Background(), fixtureQueue, "p")
	if err != nil {
		t.Fatal(err)
	}
	f.pid = p.ID
	for _, ids := range [][]string{{"a", "b", "c"}, {"d", "e"}} {
		res := f.push(t, ids...)
		for k, id := range ids {
			off := res.BaseOffset + int64(k)
			f.sent = append(f.sent, Sent{Partition: "p", ID: id, Data: dataOf(id)})
			f.answers = append(f.answers, Answer{Partition: "p", ID: id, Status: "queued", Offset: off, MessageID: model.MessageID(f.pid, off)})
		}
	}
	f.answers = append(f.answers, Answer{Partition: "p", ID: "a", Status: "duplicate", Offset: 0, MessageID: model.MessageID(f.pid, 0)})
	return f
}

func dataOf(id string) string { return fmt.Sprintf(`{"id": %q}`, id) }

func (f *logFixture) push(t *testing.T, ids ...string) model.FrameResult {
	t.Helper()
	fr := model.Frame{PartitionID: f.pid, Verified: -1}
	for _, id := range ids {
		fr.TxnIDs = append(fr.TxnIDs, id)
		fr.Hashes = append(fr.Hashes, model.HashTxnID(id))
		fr.Data = append(fr.Data, []byte(dataOf(id)))
	}
	res, err := f.store.Push(context.Background(), []model.Frame{fr})
	if err != nil {
		t.Fatal(err)
	}
	return res[0]
}

func (f *logFixture) exec(t *testing.T, sql string, args ...any) {
	t.Helper()
	if _, err := f.store.Pool().Exec(context.Background(), sql, args...); err != nil {
		t.Fatal(err)
	}
}

// TestVerifierCatchesEachPlantedFault plants each fault the verifier
// exists for, in the log or in the answers, and expects it found — and
// nothing else.
func TestVerifierCatchesEachPlantedFault(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name  string
		plant func(t *testing.T, f *logFixture)
		want  func(Findings) int64
		count int64
	}{
		{"nothing planted", func(*testing.T, *logFixture) {}, Findings.Violations, 0},
		{"lost", func(t *testing.T, f *logFixture) {
			f.exec(t, "DELETE FROM queen.log_segments WHERE partition_id = $1 AND base_offset = 3", f.pid)
		}, func(x Findings) int64 { return x.Lost }, 2},
		{"doubled", func(t *testing.T, f *logFixture) {
			f.exec(t, "UPDATE queen.queues SET dedup_window_seconds = 0 WHERE name = $1", fixtureQueue)
			f.push(t, "b")
		}, func(x Findings) int64 { return x.Doubled }, 1},
		{"wrong offset", func(_ *testing.T, f *logFixture) {
			f.answers[1].Offset = 2
			f.answers[1].MessageID = model.MessageID(f.pid, 2)
		}, func(x Findings) int64 { return x.WrongOffset }, 1},
		{"wrong message id", func(_ *testing.T, f *logFixture) {
			f.answers[2].MessageID = model.MessageID(f.pid+1, f.answers[2].Offset)
		}, func(x Findings) int64 { return x.WrongOffset }, 1},
		{"duplicate not naming the first", func(_ *testing.T, f *logFixture) {
			last := &f.answers[len(f.answers)-1]
			last.Offset, last.MessageID = 1, model.MessageID(f.pid, 1)
		}, func(x Findings) int64 { return x.DuplicateNotFirst }, 1},
		{"data mismatch", func(t *testing.T, f *logFixture) {
			f.exec(t, `UPDATE queen.log_segments SET data[2] = '{"id": "tampered"}' WHERE partition_id = $1 AND base_offset = 0`, f.pid)
		}, func(x Findings) int64 { return x.DataMismatch }, 1},
		{"headers changed", func(t *testing.T, f *logFixture) {
			f.exec(t, `UPDATE queen.log_segments SET meta = ARRAY[NULL, '{"headers":{"x":"tampered"}}']::json[] WHERE partition_id = $1 AND base_offset = 0`, f.pid)
		}, func(x Findings) int64 { return x.DataMismatch }, 1},
		{"phantom", func(t *testing.T, f *logFixture) {
			f.push(t, "never-sent")
		}, func(x Findings) int64 { return x.Phantom }, 1},
		{"phantom in a partition nobody sent to", func(t *testing.T, f *logFixture) {
			other, err := f.store.EnsurePartition(context.Background(), fixtureQueue, "other")
			if err != nil {
				t.Fatal(err)
			}
			f.pid = other.ID
			f.push(t, "a")
		}, func(x Findings) int64 { return x.Phantom }, 1},
		{"hole", func(t *testing.T, f *logFixture) {
			f.exec(t, "UPDATE queen.log_segments SET base_offset = base_offset + 1, end_offset = end_offset + 1 WHERE partition_id = $1 AND base_offset = 3", f.pid)
		}, func(x Findings) int64 { return x.Holes }, 1},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			f := newLogFixture(t)
			c.plant(t, f)
			got, err := Verify(context.Background(), f.url, fixtureQueue, Recorded{f.sent, f.answers}, nil)
			if err != nil {
				t.Fatal(err)
			}
			if n := c.want(got); n != c.count {
				t.Errorf("found %d, want %d: %+v", n, c.count, got)
			}
			// The hole also moves where d and e are: their answers no
			// longer name it. Every other plant is found alone.
			if c.name != "hole" && got.Violations() != c.count {
				t.Errorf("%d violations in all, want only the %d planted: %+v", got.Violations(), c.count, got)
			}
			if got.Sent != 5 || got.Answered != 5 {
				t.Errorf("sent %d, answered %d; want 5 and 5", got.Sent, got.Answered)
			}
		})
	}
}

// t0 is when the crafted consumer histories start.
var t0 = time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)

func at(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }

// cleanConsumed is a history of group g on the fixture's partition that
// breaks no rule: consumer c1's lease delivers a–e; its ack, carried by
// c2's next pop, completes a–d and fails e; that pop's lease delivers e
// again, and c2's next ack fails it again: out of attempts, it is
// dead-lettered (the answer says it moved one). setConsumed puts the matching cursor and dead letter in
// the database.
func cleanConsumed() *Consumed {
	c := &Consumed{Groups: []string{"g"}, Moved: map[string]int64{"g": 1}, Leases: []Lease{
		{Group: "g", Consumer: "c1", Partition: "p", ID: "lease-1", Request: 1, Asked: at(0), Granted: at(10), Until: at(2010), Settling: at(100)},
		{Group: "g", Consumer: "c2", Partition: "p", ID: "lease-2", Request: 2, Asked: at(100), Granted: at(110), Until: at(2110), Settling: at(200)},
	}}
	for off, id := range []string{"a", "b", "c", "d", "e"} {
		c.Deliveries = append(c.Deliveries, Delivery{Lease: 0, Offset: int64(off), ID: id})
		c.Acks = append(c.Acks, AckSent{Group: "g", Partition: "p", Offset: int64(off), Completed: id != "e", Result: "acked", Answered: at(110), Request: 2})
	}
	c.Deliveries = append(c.Deliveries, Delivery{Lease: 1, Offset: 4, ID: "e"})
	c.Acks = append(c.Acks, AckSent{Group: "g", Partition: "p", Offset: 4, Result: "deadLettered", Answered: at(210), Request: 3})
	return c
}

// deliverLater delivers the message at off again, under a third lease
// whose pop was sent once every ack of the clean history was answered.
func deliverLater(c *Consumed, off int64, id string) {
	c.Leases = append(c.Leases, Lease{Group: "g", Consumer: "c1", Partition: "p", ID: "lease-3", Request: 4,
		Asked: at(300), Granted: at(310), Until: at(2310), Settling: at(400)})
	c.Deliveries = append(c.Deliveries, Delivery{Lease: len(c.Leases) - 1, Offset: off, ID: id})
}

// setConsumed gives group g its cursor at next and dead-letters e.
func (f *logFixture) setConsumed(t *testing.T, next int64) {
	t.Helper()
	var gid int64
	if err := f.store.Pool().QueryRow(context.Background(), `INSERT INTO queen.consumer_groups (queue_id, name)
		SELECT id, 'g' FROM queen.queues WHERE name = $1 RETURNING id`, fixtureQueue).Scan(&gid); err != nil {
		t.Fatal(err)
	}
	// The group's insert made its cursors (at 0); this one is moved to next.
	f.exec(t, "UPDATE queen.consumer_cursors SET next_offset = $3, parked = false WHERE group_id = $1 AND partition_id = $2", gid, f.pid, next)
	f.deadLetter(t, 4, "e")
}

// deadLetter pushes group g's dead letter of the message at offset off,
// whose data names txnID, to partition p of the dead-letter queue; its
// error says leases ran out unheard, as for a poison message.
func (f *logFixture) deadLetter(t *testing.T, off int64, txnID string) {
	t.Helper()
	p, err := f.store.EnsurePartition(context.Background(), deadLetterQueue(fixtureQueue), "p")
	if err != nil {
		t.Fatal(err)
	}
	mid := model.MessageID(f.pid, off)
	id := "g:" + mid
	data := fmt.Sprintf(`{"group": "g", "messageId": %q, "offset": %d, "transactionId": %q, "error": %q}`, mid, off, txnID,
		"lease ran out unheard 3 times (consumer 'c1', attempt 1)")
	fr := model.Frame{PartitionID: p.ID, Verified: -1, TxnIDs: []string{id}, Hashes: []model.Hash{model.HashTxnID(id)}, Data: [][]byte{[]byte(data)}}
	if _, err := f.store.Push(context.Background(), []model.Frame{fr}); err != nil {
		t.Fatal(err)
	}
}

// TestVerifierCatchesEachConsumerViolation plants each consumer
// violation the verifier exists for in a clean history, and expects it
// found — and nothing else; and lets through the histories that look
// alike but break no rule.
func TestVerifierCatchesEachConsumerViolation(t *testing.T) {
	t.Parallel()
	violations := ConsumeFindings.Violations
	cases := []struct {
		name  string
		plant func(t *testing.T, f *logFixture, c *Consumed)
		want  func(ConsumeFindings) int64
		count int64
	}{
		{"nothing planted", func(*testing.T, *logFixture, *Consumed) {}, violations, 0},
		{"a lease taken over once it ran out", func(_ *testing.T, _ *logFixture, c *Consumed) {
			// c1 never acks; c2's pop takes the partition a microsecond
			// after c1's lease ended and delivers everything again.
			c.Leases[0].Settling = time.Time{}
			c.Leases[1].Asked, c.Leases[1].Granted, c.Leases[1].Until, c.Leases[1].Settling = at(1900), c.Leases[0].Until.Add(time.Microsecond), at(4011), at(2100)
			c.Acks = nil
			for off, id := range []string{"a", "b", "c", "d", "e"} {
				c.Deliveries = append(c.Deliveries, Delivery{Lease: 1, Offset: int64(off), ID: id})
				c.Acks = append(c.Acks, AckSent{Group: "g", Partition: "p", Offset: int64(off), Completed: id != "e", Result: "acked", Answered: at(2110), Request: 3})
			}
			c.Acks[4].Result = "deadLettered"
		}, violations, 0},
		{"a failed item's retry answered alreadyAcked, then delivered again", func(_ *testing.T, _ *logFixture, c *Consumed) {
			// The ack failing e is sent again under the same lease and
			// answered before c2's pop is sent: e is settled as failed,
			// not completed.
			c.Acks = append(c.Acks, AckSent{Group: "g", Partition: "p", Offset: 4, Result: "alreadyAcked", Answered: at(50), Request: 7})
		}, violations, 0},
		{"a poison message dead-lettered for leases run out unheard", func(_ *testing.T, _ *logFixture, c *Consumed) {
			c.Crashes = append(c.Crashes, Crash{Group: "g", Partition: "p", Offset: 4, ID: "e"}, Crash{Group: "g", Partition: "p", Offset: 4, ID: "e"})
		}, violations, 0},
		{"poison kept: a message its consumers died on, completed", func(_ *testing.T, _ *logFixture, c *Consumed) {
			c.Crashes = append(c.Crashes, Crash{Group: "g", Partition: "p", Offset: 0, ID: "a"})
		}, func(x ConsumeFindings) int64 { return x.PoisonKept }, 1},
		{"unconsumed", func(_ *testing.T, _ *logFixture, c *Consumed) {
			c.Deliveries = slices.Delete(c.Deliveries, 1, 2) // b
		}, func(x ConsumeFindings) int64 { return x.Unconsumed }, 1},
		{"undone: delivered after the ack completing it was answered", func(_ *testing.T, _ *logFixture, c *Consumed) {
			deliverLater(c, 0, "a")
		}, func(x ConsumeFindings) int64 { return x.Undone }, 1},
		{"undone: delivered by the pop that carried the ack completing it", func(_ *testing.T, _ *logFixture, c *Consumed) {
			c.Deliveries = append(c.Deliveries, Delivery{Lease: 1, Offset: 1, ID: "b"})
		}, func(x ConsumeFindings) int64 { return x.Undone }, 1},
		{"undone: delivered after it was dead-lettered", func(_ *testing.T, _ *logFixture, c *Consumed) {
			deliverLater(c, 4, "e")
		}, func(x ConsumeFindings) int64 { return x.Undone }, 1},
		{"double leased: granted before the other's ack was sent", func(_ *testing.T, _ *logFixture, c *Consumed) {
			c.Leases[1].Asked, c.Leases[1].Granted = at(40), at(50)
		}, func(x ConsumeFindings) int64 { return x.DoubleLeased }, 1},
		{"double leased: within the end a renewal reported", func(_ *testing.T, _ *logFixture, c *Consumed) {
			// c1's lease, renewed to 4 s, is not acked before 3.5 s; c2's
			// pop at 3 s takes the partition.
			c.Leases[0].Settling, c.Leases[0].Until = at(3500), at(4000)
			c.Leases[1].Asked, c.Leases[1].Granted, c.Leases[1].Until, c.Leases[1].Settling = at(3000), at(3010), at(5010), at(3600)
			for i := range c.Acks[:5] {
				c.Acks[i].Answered, c.Acks[i].Request = at(3510), 9
			}
			c.Acks[5].Answered = at(3610)
		}, func(x ConsumeFindings) int64 { return x.DoubleLeased }, 1},
		{"dead-lettered twice", func(t *testing.T, f *logFixture, _ *Consumed) {
			f.exec(t, "UPDATE queen.queues SET dedup_window_seconds = 0 WHERE name = $1", deadLetterQueue(fixtureQueue))
			f.deadLetter(t, 4, "e")
		}, func(x ConsumeFindings) int64 { return x.DeadLetteredTwice }, 1},
		{"dead-lettered once completed", func(t *testing.T, f *logFixture, _ *Consumed) {
			f.deadLetter(t, 0, "a")
		}, func(x ConsumeFindings) int64 { return x.DeadLetteredTwice }, 1},
		{"dead-lettered twice, the second copy deduplicated", func(_ *testing.T, _ *logFixture, c *Consumed) {
			c.Moved["g"]++
		}, func(x ConsumeFindings) int64 { return x.DeadLetteredTwice }, 1},
		{"skipped: behind the cursor, never completed nor dead-lettered", func(t *testing.T, f *logFixture, c *Consumed) {
			c.Moved = nil
			c.Acks[5].Result = "acked"
			f.exec(t, "DELETE FROM queen.log_segments WHERE partition_id = (SELECT p.id FROM queen.log_partitions p JOIN queen.queues q ON q.id = p.queue_id WHERE q.name = $1)",
				deadLetterQueue(fixtureQueue))
		}, func(x ConsumeFindings) int64 { return x.Skipped }, 1},
		{"misdelivered: a delivery unlike the log", func(_ *testing.T, _ *logFixture, c *Consumed) {
			c.Deliveries = append(c.Deliveries, Delivery{Lease: 0, Offset: 1, ID: "c"})
		}, func(x ConsumeFindings) int64 { return x.Misdelivered }, 1},
		{"misdelivered: a dead letter of no message", func(t *testing.T, f *logFixture, _ *Consumed) {
			f.deadLetter(t, 9, "e")
		}, func(x ConsumeFindings) int64 { return x.Misdelivered }, 1},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			f := newLogFixture(t)
			f.setConsumed(t, 5)
			con := cleanConsumed()
			c.plant(t, f, con)
			got, err := Verify(context.Background(), f.url, fixtureQueue, Recorded{f.sent, f.answers}, con)
			if err != nil {
				t.Fatal(err)
			}
			if got.Consume == nil {
				t.Fatal("no consumer findings")
			}
			if n := c.want(*got.Consume); n != c.count {
				t.Errorf("found %d, want %d: %+v %q", n, c.count, *got.Consume, got.Examples)
			}
			if got.Violations() != c.count {
				t.Errorf("%d violations in all, want only the %d planted: %+v %q", got.Violations(), c.count, *got.Consume, got.Examples)
			}
		})
	}
}

// TestConsumerFigures: the clean history's figures, and a cursor short
// of the end counted as unsettled (not a violation: the run may have
// ended first).
func TestConsumerFigures(t *testing.T) {
	t.Parallel()
	f := newLogFixture(t)
	f.setConsumed(t, 3)
	got, err := Verify(context.Background(), f.url, fixtureQueue, Recorded{f.sent, f.answers}, cleanConsumed())
	if err != nil {
		t.Fatal(err)
	}
	want := GroupFigures{Group: "g", Leases: 2, Deliveries: 6, Messages: 5, Redeliveries: 1, DeadLetters: 1, Unsettled: 2}
	if got.Consume == nil || len(got.Consume.Groups) != 1 || got.Consume.Groups[0] != want || got.Violations() != 0 {
		t.Errorf("findings %+v, want %+v and no violation", got.Consume, want)
	}
}
