package pgstore_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/queengate/queengate/internal/pgtest"
	"github.com/queengate/queengate/model"
)

// declineFastPaths replaces the routines that let consumer_pop and
// consumer_ack take their shortcuts by ones that always decline: the
// database then answers everything by the full paths.
func declineFastPaths(t *testing.T, b *consumerBundle) {
	t.Helper()
	if _, err := b.store.Pool().Exec(context.Background(), `
		CREATE OR REPLACE FUNCTION queen.consumer_ack_is_whole_lease(p_partition_id bigint, p_from bigint, p_to bigint,
			p_offsets bigint[], p_hashes uuid[], p_completed boolean[])
		RETURNS boolean LANGUAGE plpgsql AS 'BEGIN RETURN false; END';
		CREATE OR REPLACE FUNCTION queen.consumer_pop_slice(p_partition_id bigint, p_lo bigint, p_hi bigint, p_envelope integer,
			p_budget bigint)
		RETURNS TABLE (offs bigint[], txn_ids text[], data json[], created_at timestamptz[], meta text[])
		LANGUAGE sql AS 'SELECT NULL::bigint[], NULL::text[], NULL::json[], NULL::timestamptz[], NULL::text[] WHERE false'`); err != nil {
		t.Fatal(err)
	}
}

// popSliceTaken says whether a pop of up to k by the test's consumer
// would now deliver frames' slices (consumer_pop's shortcut), leases
// and retention aside.
func popSliceTaken(t *testing.T, b *consumerBundle, k int) bool {
	t.Helper()
	var taken bool
	if err := b.store.Pool().QueryRow(context.Background(), `
		SELECT EXISTS (SELECT 1 FROM queen.consumer_cursors c JOIN queen.log_partitions p ON p.id = c.partition_id
		 CROSS JOIN LATERAL queen.consumer_pop_slice(c.partition_id, c.next_offset, least(p.last_offset, c.next_offset + $3 - 1),
		                                             $4, 1 << 20) AS x
		 WHERE c.group_id = $1 AND c.partition_id = $2 AND (c.lease_id IS NULL OR c.lease_until <= clock_timestamp())
		   AND c.delivered_to < c.next_offset AND c.next_offset <= p.last_offset
		   AND NOT EXISTS (SELECT 1 FROM queen.consumer_marks m WHERE m.group_id = $1 AND m.partition_id = $2))`,
		b.group.ID, b.part.ID, k, model.DeliveryEnvelope).Scan(&taken); err != nil {
		t.Fatal(err)
	}
	return taken
}

// fastPathTaken says whether consumer_ack takes its shortcut for items
// under lease now (the same conditions, read before the ack).
func fastPathTaken(t *testing.T, b *consumerBundle, lease string, items []model.Settlement) bool {
	t.Helper()
	var offsets []*int64
	var hashes []*model.Hash
	var completed []bool
	for _, it := range items {
		if it.Offset >= 0 {
			offsets, hashes = append(offsets, &it.Offset), append(hashes, nil)
		} else {
			h := model.HashTxnID(it.TxnID)
			offsets, hashes = append(offsets, nil), append(hashes, &h)
		}
		completed = append(completed, it.Completed)
	}
	var taken bool
	if err := b.store.Pool().QueryRow(context.Background(), `
		SELECT coalesce(c.lease_id::text = $3 AND c.lease_until > clock_timestamp() AND c.next_offset = c.lease_from
		       AND NOT EXISTS (SELECT 1 FROM queen.consumer_marks m WHERE m.group_id = $1 AND m.partition_id = $2)
		       AND queen.consumer_ack_is_whole_lease($2, c.lease_from, c.lease_to, $4, $5, $6), false)
		  FROM queen.consumer_cursors c WHERE c.group_id = $1 AND c.partition_id = $2`,
		b.group.ID, b.part.ID, lease, offsets, hashes, completed).Scan(&taken); err != nil {
		t.Fatal(err)
	}
	return taken
}

// TestAckFastPathAgreesWithTheFullPath drives two databases through the
// same random history, one with consumer_ack's whole-lease shortcut and
// consumer_pop's frame slices and one without, and requires the same
// answer to every pop and ack, and the same cursor after each. The partition holds transactionIds stored
// twice (deduplication off) in frames of several sizes, so leases span
// frames and an ack by transactionId may name a message stored twice;
// acks are mostly whole leases in order (by transactionId or by offset),
// else one of the near misses the shortcut must leave to the full path.
func TestAckFastPathAgreesWithTheFullPath(t *testing.T) {
	t.Parallel()
	for seed := range uint64(3) {
		t.Run(fmt.Sprint("seed", seed), func(t *testing.T) {
			t.Parallel()
			runFastPathDifferential(t, seed, 300)
		})
	}
}

func runFastPathDifferential(t *testing.T, seed uint64, steps int) {
	rng := rand.New(rand.NewPCG(seed, 7))
	var frames [][]string
	for n := 0; n < 2000; {
		var ids []string
		for range 1 + rng.IntN(60) {
			ids = append(ids, fmt.Sprintf("t%d", rng.IntN(1800))) // some stored twice
		}
		frames, n = append(frames, ids), n+len(ids)
	}
	fast, full := differentialBundle(t, frames), differentialBundle(t, frames)
	declineFastPaths(t, full)
	seen := map[string]int{}
	var delivered []model.LeasedMessage // the current lease's
	var lease [2]string
	for step := range steps {
		where := fmt.Sprintf("step %d", step)
		switch r := rng.IntN(10); {
		case r < 3 || delivered == nil:
			k := 1 + rng.IntN(30)
			if popSliceTaken(t, fast, k) {
				seen["fast pop"]++
			}
			a, b := fast.pop(t, fast.group, k), full.pop(t, full.group, k)
			if !reflect.DeepEqual(popView(a), popView(b)) {
				t.Fatalf("%s: pop %d: %+v, the full path %+v", where, k, popView(a), popView(b))
			}
			if len(a.Messages) > 0 {
				delivered, lease = a.Messages, [2]string{a.LeaseID, b.LeaseID}
			} else { // a lease left unsettled holds the partition: let it run out
				fast.backdateLease(t)
				full.backdateLease(t)
			}
		case r == 3:
			fast.backdateLease(t)
			full.backdateLease(t)
		default:
			kind, items := randomLeaseAck(rng, delivered)
			if fastPathTaken(t, fast, lease[0], items) {
				seen["fast "+kind]++
			}
			seen[kind]++
			a, b := fast.ack(t, lease[0], items...), full.ack(t, lease[1], items...)
			if !reflect.DeepEqual(ackView(a), ackView(b)) {
				t.Fatalf("%s: ack %s %+v: %+v, the full path %+v", where, kind, items, a, b)
			}
			if rng.IntN(3) > 0 {
				delivered = nil // the next step pops; else the ack may come again
			}
		}
		if c, d := cursorOf(t, fast), cursorOf(t, full); c != d {
			t.Fatalf("%s: cursor %d, the full path's %d", where, c, d)
		}
	}
	t.Logf("seed %d: %v", seed, seen)
	if seen["fast whole by transactionId"] == 0 || seen["fast whole by offset"] == 0 || seen["fast pop"] == 0 {
		t.Errorf("a shortcut never ran (pops, whole-lease acks of both kinds): %v", seen)
	}
}

// differentialBundle is a consumer group over its own database whose
// partition holds frames, pushed with deduplication off, and a
// maxAttempts of 2 (so that failures dead-letter, and leave marks).
func differentialBundle(t *testing.T, frames [][]string) *consumerBundle {
	t.Helper()
	b := setupIn(t, pgtest.NewDB(t))
	b.setWindow(t, 0)
	b.setMaxAttempts(t, 2)
	for _, ids := range frames {
		b.push(t, -1, ids...)
	}
	return &consumerBundle{testBundle: b, group: b.group(t, "g")}
}

// popView is what two databases' pops must agree on: not lease ids, nor
// the times the messages were stored.
func popView(r model.PopResult) any {
	type message struct {
		Offset, Attempts     int
		TxnID, Data, LastErr string
	}
	var ms []message
	for _, m := range r.Messages {
		ms = append(ms, message{int(m.Offset), m.Attempts, m.TxnID, string(m.Data), m.LastError})
	}
	return fmt.Sprint(r.Partition, ms, r.DeadLettered, r.TooLarge, r.LeaseID != "")
}

// ackView is what two databases' acks must agree on: all but the queue
// names and the times the dead letters' messages were stored.
func ackView(r model.SettledBatch) model.SettledBatch {
	r.DeadLetters = slices.Clone(r.DeadLetters)
	for i := range r.DeadLetters {
		r.DeadLetters[i].Queue, r.DeadLetters[i].CreatedAt = "", time.Time{}
	}
	return r
}

// randomLeaseAck is an ack of a lease's delivered messages: mostly all of
// them in order, by transactionId or by offset; else a near miss.
func randomLeaseAck(rng *rand.Rand, delivered []model.LeasedMessage) (string, []model.Settlement) {
	byTxn := make([]model.Settlement, len(delivered))
	byOffset := make([]model.Settlement, len(delivered))
	for i, d := range delivered {
		byTxn[i], byOffset[i] = done(d.TxnID), doneAt(d.Offset)
	}
	switch rng.IntN(9) {
	case 0, 1, 2:
		return "whole by transactionId", byTxn
	case 3, 4:
		return "whole by offset", byOffset
	case 5:
		i := rng.IntN(len(byTxn))
		byTxn[i] = failed(delivered[i].TxnID, "e")
		return "one failed", byTxn
	case 6:
		if len(byTxn) == 1 {
			return "one twice", append(byTxn, byTxn[0])
		}
		i := rng.IntN(len(byTxn))
		return "one missing", slices.Delete(byTxn, i, i+1)
	case 7:
		slices.Reverse(byOffset)
		return "reversed", append(byOffset, byTxn[:1]...)
	default:
		i := rng.IntN(len(byTxn))
		byTxn[i] = byOffset[i]
		return "mixed", byTxn
	}
}

func cursorOf(t *testing.T, b *consumerBundle) int64 {
	t.Helper()
	var next int64
	if err := b.store.Pool().QueryRow(context.Background(),
		"SELECT coalesce(max(next_offset), -1) FROM queen.consumer_cursors WHERE group_id = $1", b.group.ID).Scan(&next); err != nil {
		t.Fatal(err)
	}
	return next
}
