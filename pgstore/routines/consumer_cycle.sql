-- consumer_cycle serves the usual pop carrying an ack in one statement
-- and one commit: the ack (consumer_ack's arguments, its lease
-- p_lease_id on partition p_partition_id of group p_group_id) completes
-- its whole running lease in order from the cursor, with no marks on the
-- partition, nothing delivered past the lease, no delay holding the
-- cursor and the lease not counted under a limit (consumer_ack's fast
-- path, on the same proof: consumer_ack_is_whole_lease). Anything else
-- answers no row and changes nothing: the caller acks and pops by the
-- general routines.
--
-- The ack settled, the cursor row also takes the pop's next lease (pop
-- arguments as consumer_pop's; p_named, the partition the pop names, or
-- NULL for any) when consumer_pop would take this partition and deliver
-- frames' slices at first attempt: the pop names it, or no other cursor
-- of the group precedes it in consumer_choose's order (least recently
-- leased first) free with work, and no wake is due (consumer_wake_due);
-- the queue of p_queue_id and no limit of its (maxAckPending: the
-- caller passes no pop under a consumer's limit); and the next messages
-- fit as consumer_pop_slice says. A cursor another pop or ack holds is
-- counted as free with work here: the general pop, which would pass it
-- over, decides then. Otherwise only the ack is settled (popped false)
-- and the caller pops by consumer_pop.
--
-- The row: the ack's lease's first offset and the cursor after it, then the pop's
-- partition name, lease and messages (NULL unless popped), as
-- consumer_pop's slice path answers them (attempts 1, none dead).
--
-- Lock order (LOCKS.md): the cursor row only, as an ack; the others are
-- read without a lock.
CREATE OR REPLACE FUNCTION queen.consumer_cycle(p_group_id bigint, p_partition_id bigint, p_lease_id uuid,
    p_offsets bigint[], p_hashes uuid[], p_completed boolean[],
    p_queue_id bigint, p_named bigint, p_max integer, p_lease_seconds double precision, p_consumer text,
    p_max_bytes bigint, p_room bigint, p_envelope integer, p_max_delivery bigint)
RETURNS TABLE (acked_from bigint, next_offset bigint, popped boolean, partition text, lease_id uuid,
               lease_until timestamptz, offs bigint[], txn_ids text[], data json[], created_at timestamptz[], meta text[])
LANGUAGE plpgsql
-- Planned once per session, every statement following an index by key
-- whatever the statistics were then, as consumer_choose's.
SET plan_cache_mode = force_generic_plan
SET enable_seqscan = off
SET enable_bitmapscan = off
AS $$
#variable_conflict use_column
DECLARE
    c          record;
    v_now      timestamptz := clock_timestamp();
    v_next     bigint;
    v_hi       bigint;
    v_lease    uuid;
    v_until    timestamptz;
    v_delay    interval;
    a_off      bigint[];
    a_txn      text[];
    a_data     json[];
    a_meta     text[];
    a_created  timestamptz[];
BEGIN
    -- One statement for the cursor, locked as an ack locks it, and what
    -- the ack and the pop read about its partition.
    SELECT cc.next_offset, cc.lease_id, cc.lease_until, cc.lease_from, cc.lease_to, cc.delivered_to, cc.leased_at,
           cc.delayed_until, cc.lease_counted, cc.parked, p.last_offset, p.name, p.queue_id,
           q.retry_delay_ms, q.retry_backoff_ms, coalesce(q.max_ack_pending, 0) AS group_limit,
           EXISTS (SELECT 1 FROM queen.consumer_marks m WHERE m.group_id = p_group_id AND m.partition_id = p_partition_id) AS marks
      INTO c
      FROM queen.consumer_cursors cc JOIN queen.log_partitions p ON p.id = cc.partition_id
      JOIN queen.queues q ON q.id = p.queue_id
     WHERE cc.group_id = p_group_id AND cc.partition_id = p_partition_id
       FOR UPDATE OF cc;
    IF NOT FOUND THEN
        RETURN;
    END IF;
    IF NOT coalesce(c.lease_id = p_lease_id AND c.lease_until > v_now AND NOT c.marks AND c.next_offset = c.lease_from
                    AND c.delivered_to = c.lease_to AND NOT c.lease_counted
                    AND (c.delayed_until IS NULL OR c.delayed_until <= v_now)
                    AND queen.consumer_ack_is_whole_lease(p_partition_id, c.lease_from, c.lease_to, p_offsets, p_hashes, p_completed),
                    false) THEN
        RETURN;
    END IF;
    v_next := c.lease_to + 1;
    v_hi := least(c.last_offset, c.lease_to + p_max);

    IF v_next <= v_hi AND c.queue_id = p_queue_id AND c.group_limit <= 0 AND NOT c.parked AND c.leased_at IS NOT NULL
       AND coalesce(p_named = p_partition_id,
                    NOT queen.consumer_wake_due(p_group_id)
                    -- those before it: never leased, or leased before it
                    -- (a bound of the index's walk, not a filter over it)
                    AND NOT EXISTS (
                        SELECT 1 FROM queen.consumer_cursors o JOIN queen.log_partitions op ON op.id = o.partition_id
                         WHERE o.group_id = p_group_id AND NOT o.parked AND o.leased_at IS NULL
                           AND queen.consumer_free(o.lease_id, o.lease_until, o.lease_heard, o.lease_delay, o.delayed_until, v_now)
                           AND o.next_offset <= op.last_offset)
                    AND NOT EXISTS (
                        SELECT 1 FROM queen.consumer_cursors o JOIN queen.log_partitions op ON op.id = o.partition_id
                         WHERE o.group_id = p_group_id AND NOT o.parked AND (o.leased_at, o.partition_id) < (c.leased_at, p_partition_id)
                           AND queen.consumer_free(o.lease_id, o.lease_until, o.lease_heard, o.lease_delay, o.delayed_until, v_now)
                           AND o.next_offset <= op.last_offset)) THEN
        SELECT x.offs, x.txn_ids, x.data, x.created_at, x.meta INTO a_off, a_txn, a_data, a_created, a_meta
          FROM queen.consumer_pop_slice(p_partition_id, v_next, v_hi, p_envelope,
                   least(coalesce(p_room, 0), coalesce(p_max_bytes, 0),
                         CASE WHEN p_max_delivery > 0 THEN p_max_delivery ELSE p_room END)) AS x;
    END IF;

    IF a_off IS NULL THEN -- the ack alone, as consumer_ack's fast path
        UPDATE queen.consumer_cursors cc
           SET next_offset = v_next, lease_heard = false, lease_id = NULL, lease_until = NULL, lease_from = NULL, lease_to = NULL,
               lease_counted = false
         WHERE cc.group_id = p_group_id AND cc.partition_id = p_partition_id;
        RETURN QUERY SELECT c.lease_from, v_next, false, NULL::text, NULL::uuid, NULL::timestamptz,
                            NULL::bigint[], NULL::text[], NULL::json[], NULL::timestamptz[], NULL::text[];
        RETURN;
    END IF;

    -- The next lease, as consumer_pop's slice path takes it.
    v_lease := gen_random_uuid();
    v_until := v_now + make_interval(secs => p_lease_seconds);
    IF c.retry_delay_ms > 0 OR cardinality(c.retry_backoff_ms) > 0 THEN
        v_delay := queen.consumer_retry_delay(c.retry_delay_ms, c.retry_backoff_ms, 1);
    END IF;
    UPDATE queen.consumer_cursors cc
       SET next_offset = v_next, lease_id = v_lease, lease_consumer = p_consumer,
           lease_from = v_next, lease_to = v_hi, lease_until = v_until, delivered_to = v_hi, leased_at = v_now,
           lease_heard = false, lease_delivered_before = c.delivered_to, lease_delay = v_delay, delayed_until = NULL,
           lease_counted = false
     WHERE cc.group_id = p_group_id AND cc.partition_id = p_partition_id;
    RETURN QUERY SELECT c.lease_from, v_next, true, c.name, v_lease, v_until, a_off, a_txn, a_data, a_created, a_meta;
END
$$;
