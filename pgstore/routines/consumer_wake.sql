-- consumer_wake unparks group p_group_id's cursors whose partitions got
-- frames since the group last looked (woken_to) and have work for it,
-- then moves woken_to to the oldest transaction still running: every
-- frame written below it had committed (or never will), so this
-- statement saw it. It holds the group row until the caller commits:
-- cursors are parked only under that row (consumer_choose) or before
-- anyone can see them (ensure_group, ensure_partitions), so a parked
-- cursor whose partition gets a frame is woken by the first wake whose
-- snapshot sees the frame, and one that does not see it leaves woken_to
-- at or below the frame's transaction. With p_wait false it returns
-- false, doing nothing, when another pop holds the row; otherwise it
-- waits for it.
--
-- Its cost is the frames written since the group last looked (all
-- queues'), not the partitions: one index range, and one cursor probe
-- per partition written.
--
-- Lock order (LOCKS.md): the group row, then the parked cursor rows it
-- wakes (it may wait for a pop or an ack holding one of those).
CREATE OR REPLACE FUNCTION queen.consumer_wake(p_group_id bigint, p_wait boolean)
RETURNS boolean
LANGUAGE plpgsql
SET plan_cache_mode = force_generic_plan
SET enable_seqscan = off
SET enable_bitmapscan = off
SET enable_hashjoin = off
SET enable_mergejoin = off
AS $$
DECLARE
    v_from    xid8;
    v_written bigint[];
    v_horizon xid8;
BEGIN
    IF p_wait THEN
        SELECT g.woken_to INTO v_from FROM queen.consumer_groups g WHERE g.id = p_group_id FOR NO KEY UPDATE;
    ELSE
        SELECT g.woken_to INTO v_from FROM queen.consumer_groups g WHERE g.id = p_group_id FOR NO KEY UPDATE SKIP LOCKED;
    END IF;
    IF NOT FOUND THEN
        RETURN false;
    END IF;
    -- One snapshot for the frames read and the horizon recorded.
    SELECT array_agg(DISTINCT s.partition_id), pg_snapshot_xmin(pg_current_snapshot())
      INTO v_written, v_horizon
      FROM queen.log_segments s WHERE s.pushed_by >= v_from;
    IF v_written IS NOT NULL THEN -- one probe by key per partition written
        UPDATE queen.consumer_cursors cc SET parked = false
         WHERE cc.ctid = ANY (ARRAY(
                 SELECT x.ctid FROM unnest(v_written) AS w(partition_id)
                  CROSS JOIN LATERAL (
                        SELECT y.ctid FROM queen.consumer_cursors y
                         -- by key alone (parked is checked below): beside
                         -- the key it would let the plan walk the
                         -- partial index of the group's parked cursors
                         WHERE y.group_id = p_group_id AND y.partition_id = w.partition_id
                           AND y.next_offset <= (SELECT p.last_offset FROM queen.log_partitions p WHERE p.id = y.partition_id)
                         OFFSET 0) AS x))
           AND cc.parked;
    END IF;
    IF v_horizon > v_from THEN
        UPDATE queen.consumer_groups g SET woken_to = v_horizon WHERE g.id = p_group_id;
    END IF;
    RETURN true;
END
$$;
