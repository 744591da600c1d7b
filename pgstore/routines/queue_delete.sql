-- queue_delete deletes queue p_name and everything of it but its frames:
-- its pending timers, its consumer groups with their cursors and marks,
-- its partitions and its row (with its configuration). The partitions'
-- log_segments and log_txns rows are left to log_drop, in bounded steps:
-- their ids go to queen.dropped_partitions in the same transaction. It
-- answers what it removed; no row when the queue does not exist.
--
-- Lock order (LOCKS.md): the queue row FOR UPDATE (creating a group or a
-- partition of the queue waits, then finds no queue: a push's
-- ensure_partitions makes the queue afresh), then its group rows FOR
-- UPDATE in id order (each waits at most for the one pop waking or
-- parking the group's cursors), then its pending timers (a fire holding
-- one, SKIP LOCKED, finishes first; fires after this find none), then its
-- cursor rows FOR UPDATE in (group, partition) order (each waits for the
-- one pop or ack holding it), then its partition rows FOR UPDATE in id
-- order (each waits for the one push, fire or retention step holding
-- it). A push that commits first is deleted with the queue; one after
-- finds its partition gone (QG404) and ingest resolves the name again,
-- to the queue made afresh. Group rows before timer rows: a fire takes
-- no group row, and nothing holding a group row waits for a timer.
CREATE OR REPLACE FUNCTION queen.queue_delete(p_name text)
RETURNS TABLE (queue_id bigint, partition_ids bigint[], groups integer, leases_ended integer, timers bigint,
               stored_bytes bigint)
LANGUAGE plpgsql AS $$
#variable_conflict use_column
DECLARE
    v_qid    bigint;
    v_groups integer;
    v_timers bigint;
    v_leases integer;
    v_pids   bigint[];
    v_bytes  bigint;
BEGIN
    SELECT q.id INTO v_qid FROM queen.queues q WHERE q.name = p_name FOR UPDATE;
    IF NOT FOUND THEN
        RETURN;
    END IF;
    SELECT count(*) INTO v_groups
      FROM (SELECT g.id FROM queen.consumer_groups g WHERE g.queue_id = v_qid ORDER BY g.id FOR UPDATE) g;
    WITH gone AS (
        DELETE FROM queen.timers t
         WHERE t.partition_id IN (SELECT p.id FROM queen.log_partitions p WHERE p.queue_id = v_qid)
        RETURNING 1
    )
    SELECT count(*) INTO v_timers FROM gone;
    SELECT count(*) FILTER (WHERE c.lease_id IS NOT NULL AND c.lease_until > clock_timestamp()) INTO v_leases
      FROM (SELECT cc.lease_id, cc.lease_until FROM queen.consumer_cursors cc
             WHERE cc.group_id IN (SELECT g.id FROM queen.consumer_groups g WHERE g.queue_id = v_qid)
             ORDER BY cc.group_id, cc.partition_id
               FOR UPDATE) c;
    SELECT coalesce(array_agg(p.id ORDER BY p.id), '{}'), coalesce(sum(p.stored_bytes), 0) INTO v_pids, v_bytes
      FROM (SELECT p.id, p.stored_bytes FROM queen.log_partitions p WHERE p.queue_id = v_qid ORDER BY p.id FOR UPDATE) p;
    INSERT INTO queen.dropped_partitions (partition_id)
    SELECT unnest(v_pids);
    DELETE FROM queen.consumer_marks m
     WHERE m.group_id IN (SELECT g.id FROM queen.consumer_groups g WHERE g.queue_id = v_qid);
    DELETE FROM queen.consumer_cursors cc
     WHERE cc.group_id IN (SELECT g.id FROM queen.consumer_groups g WHERE g.queue_id = v_qid);
    DELETE FROM queen.consumer_groups g WHERE g.queue_id = v_qid;
    DELETE FROM queen.log_partitions p WHERE p.queue_id = v_qid;
    DELETE FROM queen.queues q WHERE q.id = v_qid;
    RETURN QUERY SELECT v_qid, v_pids, v_groups, v_leases, v_timers, v_bytes;
END
$$;
