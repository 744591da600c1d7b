-- consumer_purge ends the purge of partition p_partition_id up to offset
-- p_upto (log_purge deleted its frames in steps): it cancels the
-- partition's pending timers, deletes what frames at or below p_upto are
-- left, and moves every group's cursor past p_upto, ending the running
-- leases (as a release does: what they held above p_upto is delivered
-- again) and deleting the marks at or below it. What the groups had not
-- consumed of the purged messages is counted in their
-- deleted_unconsumed, as retention counts what it deletes unconsumed.
-- The transactionIds stay: log_purge moves their hashes to log_txns, so a retry within the
-- window still answers duplicate (docs/protocol.md, "Purging a queue").
-- It answers the timers cancelled, the messages and bytes deleted here,
-- the groups with a cursor on the partition, the leases ended and the
-- messages the groups had not consumed.
--
-- Lock order (LOCKS.md): the partition's timer rows (deleted; a fire
-- holding one, SKIP LOCKED, finishes first), then its cursor rows FOR
-- UPDATE in group id order (each waits for the one pop or ack holding
-- it), then the partition row FOR UPDATE (waits for the one push, fire
-- or retention step holding it): timer rows < cursor rows < partition
-- rows, the global order.
CREATE OR REPLACE FUNCTION queen.consumer_purge(p_partition_id bigint, p_upto bigint)
RETURNS TABLE (timers bigint, messages bigint, bytes bigint, groups integer, leases_ended integer, unconsumed bigint)
LANGUAGE plpgsql AS $$
#variable_conflict use_column
DECLARE
    v_timers bigint;
    v_groups integer;
    v_leases integer;
    v_unc    bigint;
    v_msgs   bigint;
    v_bytes  bigint;
    v_gids   bigint[];
BEGIN
    -- The queue's groups: cursors are found by their primary key.
    SELECT coalesce(array_agg(g.id), '{}') INTO v_gids
      FROM queen.log_partitions p JOIN queen.consumer_groups g ON g.queue_id = p.queue_id
     WHERE p.id = p_partition_id;
    WITH gone AS (
        DELETE FROM queen.timers t WHERE t.partition_id = p_partition_id RETURNING 1
    )
    SELECT count(*) INTO v_timers FROM gone;
    SELECT count(*), count(*) FILTER (WHERE h.leased) INTO v_groups, v_leases
      FROM (SELECT cc.lease_id IS NOT NULL AND cc.lease_until > clock_timestamp() AS leased
              FROM queen.consumer_cursors cc
             WHERE cc.group_id = ANY (v_gids) AND cc.partition_id = p_partition_id
             ORDER BY cc.group_id
               FOR UPDATE) h;
    PERFORM 1 FROM queen.log_partitions p WHERE p.id = p_partition_id FOR UPDATE;
    SELECT l.messages, l.bytes INTO v_msgs, v_bytes FROM queen.log_purge(p_partition_id, p_upto, 2147483647) l;
    -- The cursors are held: what they count is what they move past.
    WITH moved AS (
        UPDATE queen.consumer_cursors cc
           SET next_offset = greatest(cc.next_offset, p_upto + 1),
               delivered_to = greatest(cc.delivered_to, p_upto),
               deleted_unconsumed = cc.deleted_unconsumed + u.unc,
               lease_id = NULL, lease_consumer = NULL, lease_from = NULL, lease_to = NULL, lease_until = NULL,
               lease_heard = false, lease_delivered_before = NULL, lease_counted = false,
               -- The failures that delays wait for are purged.
               lease_delay = NULL, delayed_until = NULL
          FROM (SELECT c.group_id,
                       greatest(p_upto - c.next_offset + 1, 0)
                       - (SELECT count(*) FROM queen.consumer_marks m
                           WHERE m.group_id = c.group_id AND m.partition_id = p_partition_id
                             AND m.off <= p_upto AND m.done) AS unc
                  FROM queen.consumer_cursors c WHERE c.group_id = ANY (v_gids) AND c.partition_id = p_partition_id) u
         WHERE cc.group_id = u.group_id AND cc.partition_id = p_partition_id
        RETURNING u.unc
    )
    SELECT coalesce(sum(moved.unc), 0) INTO v_unc FROM moved;
    DELETE FROM queen.consumer_marks m
     WHERE m.group_id = ANY (v_gids) AND m.partition_id = p_partition_id AND m.off <= p_upto;
    RETURN QUERY SELECT v_timers, v_msgs, v_bytes, v_groups, v_leases, v_unc;
END
$$;
