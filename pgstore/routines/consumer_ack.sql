-- consumer_ack settles a batch of group p_group_id's messages on
-- partition p_partition_id under lease p_lease_id. Item i names a message
-- by offset (p_offsets[i]) or by its transactionId's hash (p_hashes[i]),
-- resolved through the stored hashes as a push resolves it, among the offsets
-- delivered to the group from its cursor on; p_completed[i] is completed
-- or failed (with p_errors[i]; a failed one waits p_delays[i]
-- milliseconds before it is delivered again, or, NULL, the queue's
-- delay for its attempt: consumer_retry_delay).
--
-- One row, with arrays of one element per item (one row per item cost
-- more to return and to read than the ack): its offset (NULL when
-- unresolved) and result:
--   acked         completed or failed, as asked
--   alreadyAcked  completed before (a retried batch answers this)
--   unknownTransactionId / unknownOffset
--   leaseExpired  the lease named is the partition's, but ran out
--   leaseNotHeld  the lease named is not the partition's current one
--   notInLease    the lease holds, but this message was not delivered under it
-- Completed messages advance the cursor over the contiguous prefix; the
-- others are marked and kept until the prefix closes. A failed message
-- is redelivered by a later pop with its attempt count; one failed for
-- the maxAttempts-th time comes back with dead = true (and its
-- transactionId, data, created_at, attempts and error), to be moved to the dead-letter queue
-- by the caller (consumer_dead_letter_pending, then
-- consumer_dead_lettered, in one transaction). The
-- lease ends once every message delivered under it is settled. A
-- failed message's delay holds the group's cursor on the partition
-- (delayed_until, the latest of its failures' ends): no pop leases the
-- partition to the group before (consumer_free). Also in
-- the row: the cursor after the batch, and whether the lease ended.
-- An ack naming the cursor's lease, running or run out, is word from its
-- consumer: the lease is heard from (consumer_pop counts its attempts).
-- An ack completing its whole running lease in order, from the cursor,
-- takes a shortcut with the same answer (consumer_ack_is_whole_lease).
-- lease_counted: the lease held is counted by pops under a limit
-- (consumer_ack_pending), so what the ack settled may let one deliver.
--
-- Lock order (LOCKS.md): the cursor row only.
CREATE OR REPLACE FUNCTION queen.consumer_ack(p_group_id bigint, p_partition_id bigint, p_lease_id uuid,
    p_offsets bigint[], p_hashes uuid[], p_completed boolean[], p_errors text[], p_delays bigint[])
RETURNS TABLE (offs bigint[], results text[], dead boolean[], txn_ids text[], data json[], created_at timestamptz[],
               attempts integer[], last_errors text[], next_offset bigint, lease_ended boolean, lease_counted boolean,
               meta text[])
LANGUAGE plpgsql
-- Planned once per session: re-planning each statement on every call
-- (what the default chooses for them) cost more than running them.
SET plan_cache_mode = force_generic_plan
AS $$
#variable_conflict use_column
DECLARE
    c        queen.consumer_cursors%ROWTYPE;
    v_now    timestamptz := clock_timestamp();
    v_held   boolean;
    v_marks  boolean;    -- the group has marks on the partition (usually not)
    v_failed boolean;    -- some item failed a message
    v_max    integer;
    v_retry_ms bigint;   -- the queue's delay after a failure, and by attempt
    v_backoff  bigint[];
    v_delay  interval;   -- the longest delay a failure now asks for
    v_last   bigint;
    v_next   bigint;
    v_ended  boolean := false;
    a_off    bigint[];   -- per item: the offset it names, NULL if unknown
    a_res    text[];     -- per item: its result
    a_done   bigint[];   -- completed now
    v_top    bigint;     -- the highest of them
    v_unresolved bigint; -- transactionIds not found from the cursor on
    v_tstart bigint;     -- txns_start and txns_end (queen.log_hashes)
    v_tend   bigint;
BEGIN
    SELECT cc.* INTO c FROM queen.consumer_cursors cc
     WHERE cc.group_id = p_group_id AND cc.partition_id = p_partition_id
       FOR UPDATE;
    -- Held: the lease named is the partition's and runs (a NULL lease, or
    -- none running, is never held).
    v_held := coalesce(c.lease_id = p_lease_id AND c.lease_until > v_now, false);
    -- Few statements: each has a fixed cost that a batch of 100 notices.
    SELECT p.last_offset, p.txns_start, p.txns_end, q.max_attempts, q.retry_delay_ms, q.retry_backoff_ms,
           EXISTS (SELECT 1 FROM queen.consumer_marks m WHERE m.group_id = p_group_id AND m.partition_id = p_partition_id)
      INTO v_last, v_tstart, v_tend, v_max, v_retry_ms, v_backoff, v_marks
      FROM queen.log_partitions p JOIN queen.queues q ON q.id = p.queue_id WHERE p.id = p_partition_id;

    -- The usual ack completes its whole lease in order, the cursor at
    -- the lease's start and no marks: the cursor moves past the lease in
    -- one write, without resolving item by item what
    -- consumer_ack_is_whole_lease proves each resolves to.
    IF v_held AND NOT v_marks AND c.next_offset = c.lease_from
       AND queen.consumer_ack_is_whole_lease(p_partition_id, c.lease_from, c.lease_to, p_offsets, p_hashes, p_completed) THEN
        v_next := c.lease_to + 1;
        UPDATE queen.consumer_cursors cc
           SET next_offset = v_next, lease_heard = false, lease_id = NULL, lease_until = NULL, lease_from = NULL, lease_to = NULL,
               lease_counted = false
         WHERE cc.group_id = p_group_id AND cc.partition_id = p_partition_id;
        RETURN QUERY
            SELECT ARRAY(SELECT generate_series(c.lease_from, c.lease_to)), array_fill('acked'::text, ARRAY[cardinality(p_completed)]),
                   NULL::boolean[], NULL::text[], NULL::json[], NULL::timestamptz[], NULL::integer[], NULL::text[], v_next, true,
                   c.lease_counted, NULL::text[];
        RETURN;
    END IF;

    a_off := p_offsets;
    v_unresolved := 0;
    IF c.group_id IS NOT NULL AND cardinality(array_remove(p_hashes, NULL)) > 0 THEN
        -- Resolve transactionIds among the offsets delivered from the
        -- cursor on, unrolling only that slice of each frame's hashes.
        WITH want AS (
            SELECT DISTINCT h FROM unnest(p_hashes) AS h WHERE h IS NOT NULL
        ), near AS (
            SELECT th.h, min(greatest(t.base_offset, c.next_offset) + th.idx - 1) AS off
              FROM queen.log_hashes(p_partition_id, c.next_offset - 1, v_tstart, v_tend) AS t
             CROSS JOIN LATERAL queen.log_unnest_hashes(
                       t.hashes[greatest(c.next_offset - t.base_offset + 1, 1) : least(c.delivered_to, t.end_offset) - t.base_offset + 1]) AS th
              JOIN want ON want.h = th.h
             WHERE t.base_offset <= c.delivered_to
             GROUP BY th.h
        )
        SELECT array_agg(coalesce(x.off, near.off) ORDER BY x.i),
               count(*) FILTER (WHERE x.h IS NOT NULL AND coalesce(x.off, near.off) IS NULL)
          INTO a_off, v_unresolved
          FROM unnest(p_offsets, p_hashes) WITH ORDINALITY AS x(off, h, i) LEFT JOIN near ON near.h = x.h;
    ELSIF cardinality(array_remove(p_hashes, NULL)) > 0 THEN
        v_unresolved := 1; -- no cursor: only the window can tell
    END IF;
    IF v_unresolved > 0 THEN
        -- The rest (settled long ago, or never stored) through the
        -- window, as a push would find them.
        SELECT array_agg(coalesce(x.off, f.first_offset) ORDER BY x.i) INTO a_off
          FROM unnest(a_off, p_hashes) WITH ORDINALITY AS x(off, h, i)
          LEFT JOIN queen.log_find(p_partition_id,
                        ARRAY(SELECT y.h FROM unnest(a_off, p_hashes) AS y(off, h) WHERE y.off IS NULL AND y.h IS NOT NULL)) AS f
            ON x.off IS NULL AND f.h = x.h;
    END IF;

    -- Results, in item order (an offset named twice is settled once), and
    -- what they settle: the offsets completed now, whether any failed.
    SELECT array_agg(r.res ORDER BY r.i),
           coalesce(array_agg(r.off) FILTER (WHERE r.res = 'acked' AND p_completed[r.i]), '{}'),
           coalesce(bool_or(r.res = 'acked' AND NOT p_completed[r.i]), false),
           max(r.off) FILTER (WHERE r.res = 'acked' AND p_completed[r.i])
      INTO a_res, a_done, v_failed, v_top
      FROM (SELECT x.i, x.off,
                   CASE WHEN x.off IS NULL AND p_hashes[x.i] IS NOT NULL THEN 'unknownTransactionId'
                        WHEN x.off IS NULL OR x.off < 0 OR x.off > v_last THEN 'unknownOffset'
                        WHEN c.group_id IS NULL THEN 'leaseNotHeld'
                        WHEN x.off < c.next_offset OR m.done THEN 'alreadyAcked'
                        WHEN row_number() OVER (PARTITION BY x.off ORDER BY x.i) > 1 THEN 'alreadyAcked'
                        -- failed under this lease already: a retried batch
                        WHEN m.failed_in = p_lease_id THEN 'alreadyAcked'
                        WHEN NOT v_held AND c.lease_id = p_lease_id THEN 'leaseExpired'
                        WHEN NOT v_held THEN 'leaseNotHeld'
                        WHEN x.off NOT BETWEEN c.lease_from AND c.lease_to THEN 'notInLease'
                        ELSE 'acked' END AS res
              FROM unnest(a_off) WITH ORDINALITY AS x(off, i)
              LEFT JOIN queen.consumer_marks m
                ON v_marks AND m.group_id = p_group_id AND m.partition_id = p_partition_id AND m.off = x.off) AS r;

    IF NOT v_held THEN
        v_next := coalesce(c.next_offset, 0);
        IF c.lease_id = p_lease_id AND NOT c.lease_heard THEN
            UPDATE queen.consumer_cursors cc SET lease_heard = true
             WHERE cc.group_id = p_group_id AND cc.partition_id = p_partition_id;
        END IF;
    ELSE
        IF v_failed THEN
            -- Marked with the error and this lease; the attempts so far
            -- stay (a message without a mark was delivered once).
            INSERT INTO queen.consumer_marks AS m (group_id, partition_id, off, attempts, last_error, failed_in)
            SELECT p_group_id, p_partition_id, x.off, 1, x.err, p_lease_id
              FROM unnest(a_off, a_res, p_completed, p_errors) AS x(off, res, ok, err)
             WHERE x.res = 'acked' AND NOT x.ok
            ON CONFLICT (group_id, partition_id, off) DO UPDATE SET last_error = excluded.last_error, failed_in = p_lease_id;
            -- Each waits as asked, or as the queue says for its attempt;
            -- one out of attempts is dead-lettered instead. Nothing to
            -- ask when neither says to wait (the usual queue).
            IF p_delays IS NOT NULL OR v_retry_ms > 0 OR cardinality(v_backoff) > 0 THEN
                SELECT max(CASE WHEN p_delays[x.i] IS NOT NULL THEN make_interval(secs => p_delays[x.i] / 1000.0)
                                ELSE queen.consumer_retry_delay(v_retry_ms, v_backoff, m.attempts) END)
                  INTO v_delay
                  FROM unnest(a_off, a_res) WITH ORDINALITY AS x(off, res, i)
                  JOIN queen.consumer_marks m ON m.group_id = p_group_id AND m.partition_id = p_partition_id AND m.off = x.off
                 WHERE x.res = 'acked' AND NOT p_completed[x.i] AND NOT (v_max > 0 AND m.attempts >= v_max);
            END IF;
        END IF;
        IF v_marks OR v_failed THEN
            v_next := queen.consumer_advance(p_group_id, p_partition_id, a_done);
        ELSE
            -- No marks: the cursor moves over the run of completed offsets
            -- that starts at it.
            SELECT c.next_offset + count(*) INTO v_next
              FROM (SELECT d, row_number() OVER (ORDER BY d) AS rn
                      FROM (SELECT DISTINCT d FROM unnest(a_done) AS d WHERE d >= c.next_offset) AS u) AS r
             WHERE r.d = c.next_offset + r.rn - 1;
        END IF;
        -- Completed out of order: kept until the prefix closes.
        IF v_top >= v_next THEN
            INSERT INTO queen.consumer_marks AS m (group_id, partition_id, off, attempts, done)
            SELECT p_group_id, p_partition_id, d, 1, true FROM unnest(a_done) AS d WHERE d >= v_next
            ON CONFLICT (group_id, partition_id, off) DO UPDATE SET done = true;
        END IF;
        -- Past the lease: settled, without a call (the usual case).
        v_ended := v_next > c.lease_to
                   OR queen.consumer_lease_settled(p_group_id, p_partition_id, p_lease_id, v_next, c.lease_from, c.lease_to);
        -- One new version of the cursor row per ack.
        UPDATE queen.consumer_cursors cc
           SET next_offset = v_next, lease_heard = NOT v_ended,
               lease_id = CASE WHEN v_ended THEN NULL ELSE cc.lease_id END,
               lease_until = CASE WHEN v_ended THEN NULL ELSE cc.lease_until END,
               lease_from = CASE WHEN v_ended THEN NULL ELSE cc.lease_from END,
               lease_to = CASE WHEN v_ended THEN NULL ELSE cc.lease_to END,
               delayed_until = CASE WHEN v_delay > interval '0' THEN greatest(cc.delayed_until, v_now + v_delay)
                                    ELSE cc.delayed_until END,
               lease_counted = cc.lease_counted AND NOT v_ended
         WHERE cc.group_id = p_group_id AND cc.partition_id = p_partition_id
           AND (v_ended OR cc.next_offset <> v_next OR NOT cc.lease_heard OR v_delay > interval '0');
    END IF;

    IF NOT coalesce(v_failed, false) THEN
        RETURN QUERY
            SELECT a_off, a_res, NULL::boolean[], NULL::text[], NULL::json[], NULL::timestamptz[], NULL::integer[], NULL::text[],
                   v_next, v_ended, coalesce(v_held AND c.lease_counted, false), NULL::text[];
        RETURN;
    END IF;
    -- Failed ones out of attempts come back with what the dead letter needs.
    RETURN QUERY
        SELECT a_off, a_res, array_agg(coalesce(v_max > 0 AND m.attempts >= v_max, false) ORDER BY x.i),
               array_agg(s.txn_id ORDER BY x.i), array_agg(s.data ORDER BY x.i), array_agg(s.created_at ORDER BY x.i),
               array_agg(m.attempts ORDER BY x.i), array_agg(m.last_error ORDER BY x.i), v_next, v_ended,
               coalesce(v_held AND c.lease_counted, false), array_agg(s.meta ORDER BY x.i)
          FROM unnest(a_off, a_res) WITH ORDINALITY AS x(off, res, i)
          LEFT JOIN queen.consumer_marks m
            ON x.res = 'acked' AND NOT p_completed[x.i]
           AND m.group_id = p_group_id AND m.partition_id = p_partition_id AND m.off = x.off
          LEFT JOIN LATERAL (
                SELECT sg.txn_ids[x.off - sg.base_offset + 1] AS txn_id, sg.data[x.off - sg.base_offset + 1] AS data,
                       sg.meta[x.off - sg.base_offset + 1] AS meta, sg.created_at
                  FROM queen.log_segments sg
                 WHERE sg.partition_id = p_partition_id AND sg.base_offset <= x.off
                 ORDER BY sg.base_offset DESC LIMIT 1) AS s ON v_max > 0 AND m.attempts >= v_max;
END
$$;
