-- consumer_group_delete deletes queue p_queue_id's consumer group p_name:
-- its marks, its cursors and its row, and with them every retention hold
-- the group had (log_retain holds the stored hashes, and with retain_until
-- 'consumed' the segments, from the lowest cursor of the queue's groups
-- up: a deleted group has none). It answers what it released: the id the
-- group had, the partitions it had cursors on, the messages it had not
-- consumed (its lag, as the groups list counts it, less what it completed
-- out of order) and the leases that were running; no row when the group
-- does not exist.
--
-- Lock order (LOCKS.md): the queue row FOR UPDATE, as ensure_group
-- takes it: creating a partition (FOR KEY SHARE on it) either commits
-- first, and its cursor for the group is seen and deleted here, or waits
-- and then sees no group to give a cursor to. Then the group row (FOR
-- UPDATE: it waits for the one pop waking or parking the group's
-- cursors), then the group's cursor rows FOR UPDATE in partition id
-- order: each waits for the one pop or ack holding it, which finishes
-- first; a pop or ack after this commits finds no cursor (the caller
-- answers "group not found"). Partition rows are read, never locked.
CREATE OR REPLACE FUNCTION queen.consumer_group_delete(p_queue_id bigint, p_name text)
RETURNS TABLE (group_id bigint, partitions integer, unconsumed bigint, leases_ended integer)
LANGUAGE plpgsql AS $$
#variable_conflict use_column
DECLARE
    v_id     bigint;
    v_parts  integer;
    v_unc    bigint;
    v_leases integer;
    v_done   bigint;
BEGIN
    PERFORM 1 FROM queen.queues q WHERE q.id = p_queue_id FOR UPDATE;
    SELECT g.id INTO v_id FROM queen.consumer_groups g
     WHERE g.queue_id = p_queue_id AND g.name = p_name
       FOR UPDATE;
    IF NOT FOUND THEN
        RETURN;
    END IF;
    WITH held AS (
        SELECT cc.partition_id, cc.next_offset,
               cc.lease_id IS NOT NULL AND cc.lease_until > clock_timestamp() AS leased
          FROM queen.consumer_cursors cc
         WHERE cc.group_id = v_id
         ORDER BY cc.partition_id
           FOR UPDATE
    )
    SELECT count(*), coalesce(sum(greatest(p.last_offset - h.next_offset + 1, 0)), 0), count(*) FILTER (WHERE h.leased)
      INTO v_parts, v_unc, v_leases
      FROM held h JOIN queen.log_partitions p ON p.id = h.partition_id;
    -- Marks are at or above their cursor: those done were counted above.
    WITH gone AS (
        DELETE FROM queen.consumer_marks m WHERE m.group_id = v_id RETURNING m.done
    )
    SELECT count(*) FILTER (WHERE gone.done) INTO v_done FROM gone;
    DELETE FROM queen.consumer_cursors cc WHERE cc.group_id = v_id;
    DELETE FROM queen.consumer_groups g WHERE g.id = v_id;
    RETURN QUERY SELECT v_id, v_parts, greatest(v_unc - v_done, 0), v_leases;
END
$$;
