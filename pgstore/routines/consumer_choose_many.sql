-- consumer_choose_many chooses up to p_n partitions of queue p_queue_id
-- for group p_group_id to pop by name (consumer_pop_many): the cursors
-- free (consumer_free) and with work, in consumer_choose's order (least
-- recently leased first), each locked as found, one another pop or ack
-- holds passed over (SKIP LOCKED). The rows stay locked until the
-- caller's commit. Drained cursors are walked past, not parked: the
-- first partition's pop (consumer_choose) parks them.
--
-- Lock order (LOCKS.md): cursor rows only, SKIP LOCKED.
CREATE OR REPLACE FUNCTION queen.consumer_choose_many(p_group_id bigint, p_queue_id bigint, p_n integer)
RETURNS SETOF bigint
LANGUAGE sql
-- Planned once per session, following the index of ready cursors in its
-- order whatever the statistics were then, as consumer_choose's walk.
SET plan_cache_mode = force_generic_plan
SET enable_seqscan = off
SET enable_sort = off
SET enable_bitmapscan = off
SET enable_hashjoin = off
SET enable_mergejoin = off
AS $$
    SELECT cc.partition_id FROM queen.consumer_cursors cc JOIN queen.log_partitions p ON p.id = cc.partition_id
     WHERE cc.group_id = p_group_id AND NOT cc.parked AND p.queue_id = p_queue_id
       AND queen.consumer_free(cc.lease_id, cc.lease_until, cc.lease_heard, cc.lease_delay, cc.delayed_until, clock_timestamp())
       AND cc.next_offset <= p.last_offset
     ORDER BY cc.leased_at NULLS FIRST, cc.partition_id
     LIMIT p_n
       FOR UPDATE OF cc SKIP LOCKED
$$;
