-- consumer_group_seek moves group p_group_id's cursor on partition
-- p_partition_id (on every partition of the group when NULL) to a new
-- next offset: p_offset; or, with p_time, the first message stored at or
-- after p_time (the end when none is); or, both NULL, the end ("latest":
-- only messages pushed later are delivered). The offset is clamped to
-- what is stored: not below the first stored message (retention deleted
-- those before it), not past the last message plus one; clamped says so
-- (for a time: it falls before the first stored message and earlier ones
-- were deleted).
--
-- Every offset below the new position is consumed for the group and
-- every one from it on is new to it: the lease running there ends (its
-- acks then settle nothing: an offset below the position answers
-- alreadyAcked, one at or above it leaseNotHeld, and the cursor stays
-- where the seek put it), the marks go (attempts, errors, what was done
-- out of order) with the count of leases run out unheard, and the first
-- pop delivers from the position at attempt 1. A cursor with work
-- afterwards is unparked, so that pops of any partition find it; one
-- without is parked, as a new group's cursor on an empty partition is.
-- One row per cursor: the partition, the old and the new next offset,
-- whether it was clamped, whether a lease ended.
--
-- Lock order (LOCKS.md): the group row FOR UPDATE (waiting at most for
-- the one pop waking or parking its cursors, or for a group delete, after
-- which no row is found), then the cursor rows FOR UPDATE in partition id
-- order (each waits at most for the one pop or ack holding it, which
-- takes nothing after it). Partition rows and segments are read, never
-- locked: a push racing the seek is delivered or not by the offset it
-- got, and a frame a parked cursor does not see is woken by the next pop
-- (woken_to is not moved).
CREATE OR REPLACE FUNCTION queen.consumer_group_seek(p_group_id bigint, p_partition_id bigint, p_offset bigint,
    p_time timestamptz)
RETURNS TABLE (partition_id bigint, partition text, old_offset bigint, new_offset bigint, clamped boolean,
               lease_ended boolean)
LANGUAGE plpgsql AS $$
#variable_conflict use_column
DECLARE
    v_now timestamptz := clock_timestamp();
BEGIN
    PERFORM 1 FROM queen.consumer_groups g WHERE g.id = p_group_id FOR UPDATE;
    IF NOT FOUND THEN
        RETURN;
    END IF;
    UPDATE queen.consumer_groups g SET positioned_at = v_now WHERE g.id = p_group_id;
    -- One statement: the moves are computed once, from the locked
    -- cursors, and both writes (marks, cursors) use them.
    RETURN QUERY
    WITH held AS (
        SELECT cc.partition_id, cc.next_offset, cc.lease_id IS NOT NULL AND cc.lease_until > v_now AS leased
          FROM queen.consumer_cursors cc
         WHERE cc.group_id = p_group_id AND (p_partition_id IS NULL OR cc.partition_id = p_partition_id)
         ORDER BY cc.partition_id
           FOR UPDATE
    ), bounds AS (
        SELECT h.*, p.name, p.last_offset,
               coalesce(f.base_offset, p.last_offset + 1) AS first_stored, f.created_at AS first_at,
               CASE WHEN p_time IS NOT NULL
                    THEN coalesce((SELECT s.base_offset FROM queen.log_segments s
                                    WHERE s.partition_id = h.partition_id AND s.created_at >= p_time
                                    ORDER BY s.base_offset LIMIT 1), p.last_offset + 1)
                    ELSE coalesce(p_offset, p.last_offset + 1) END AS wanted
          FROM held h JOIN queen.log_partitions p ON p.id = h.partition_id
          LEFT JOIN LATERAL (SELECT s.base_offset, s.created_at FROM queen.log_segments s
                              WHERE s.partition_id = h.partition_id ORDER BY s.base_offset LIMIT 1) f ON true
    ), moves AS (
        SELECT b.*, least(greatest(b.wanted, b.first_stored), b.last_offset + 1) AS moved_to FROM bounds b
    ), unmarked AS (
        DELETE FROM queen.consumer_marks m USING moves v
         WHERE m.group_id = p_group_id AND m.partition_id = v.partition_id
    ), moved AS (
        UPDATE queen.consumer_cursors cc
           SET next_offset = v.moved_to, delivered_to = v.moved_to - 1,
               lease_id = NULL, lease_until = NULL, lease_from = NULL, lease_to = NULL,
               lease_heard = false, lease_delivered_before = NULL, lease_counted = false,
               -- Delivered again from attempt 1: no failure's delay holds it.
               lease_delay = NULL, delayed_until = NULL,
               -- Nor do the leases that ran out unheard before count.
               unheard_from = NULL, unheard = 0,
               parked = v.moved_to > v.last_offset
          FROM moves v
         WHERE cc.group_id = p_group_id AND cc.partition_id = v.partition_id
    )
    SELECT v.partition_id, v.name, v.next_offset, v.moved_to,
           CASE WHEN p_time IS NOT NULL THEN v.first_stored > 0 AND v.first_at > p_time
                ELSE p_offset IS NOT NULL AND v.wanted <> v.moved_to END,
           v.leased
      FROM moves v ORDER BY v.name;
END
$$;
