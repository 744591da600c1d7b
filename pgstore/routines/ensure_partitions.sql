-- ensure_partitions is ensure_partition for many partitions in one round
-- trip: partition (p_queues[i], p_partitions[i]) comes back as row idx = i,
-- creating its queue (with the defaults) and itself when missing; created
-- says this very call inserted the partition (so it holds no message yet).
-- A name the schema refuses (see the CHECKs on queues.name and
-- log_partitions.name) is left out rather than failing the others: that
-- index has no row.
--
-- Each step is its own statement, so each sees what racing callers
-- committed before it (ON CONFLICT waits for a racing insert; a later
-- statement's snapshot then reads its row). Existing partitions are read
-- first and only the missing ones inserted: a conflicting insert still
-- burns an identity value. Inserts go in (name) and (queue_id, name)
-- order, so two calls creating overlapping sets wait for each other in
-- one order and never deadlock (LOCKS.md). Every lookup is a lateral
-- subquery kept apart (OFFSET 0): one index probe per name, whatever the
-- planner estimates of the arrays or the tables (a generic plan joined a
-- whole scan of log_partitions to 1,000 names: 0.5 s at 1,400 partitions).
--
-- A created partition gets a cursor for every group of its queue
-- (ensure_group makes them for partitions that exist before the group).
-- Lock order (LOCKS.md): the queue rows of the missing partitions FOR
-- KEY SHARE, in id order, before their partitions are inserted.
CREATE OR REPLACE FUNCTION queen.ensure_partitions(p_queues text[], p_partitions text[])
RETURNS TABLE (idx integer, partition_id bigint, queue_id bigint, dedup_window_seconds integer, last_offset bigint,
               on_conflict text, created boolean)
LANGUAGE plpgsql AS $$
DECLARE
    v_missing integer[];
    v_queues  text[];
    v_turn    integer;
    v_locked  bigint;
    v_created bigint[];
    v_created_q bigint[];
    f_idx     integer[];
    f_pid     bigint[];
    f_qid     bigint[];
    f_win     integer[];
    f_last    bigint[];
    f_mode    text[];
BEGIN
    -- The existing ones, and which are missing, in one snapshot: one
    -- index lookup each when all exist (a memo's refresh).
    SELECT array_agg(x.i::integer) FILTER (WHERE p.id IS NULL), array_agg(x.i::integer) FILTER (WHERE p.id IS NOT NULL),
           array_agg(p.id) FILTER (WHERE p.id IS NOT NULL), array_agg(q.id) FILTER (WHERE p.id IS NOT NULL),
           array_agg(q.dedup_window_seconds) FILTER (WHERE p.id IS NOT NULL),
           array_agg(p.last_offset) FILTER (WHERE p.id IS NOT NULL), array_agg(q.on_conflict) FILTER (WHERE p.id IS NOT NULL)
      INTO v_missing, f_idx, f_pid, f_qid, f_win, f_last, f_mode
      FROM unnest(p_queues, p_partitions) WITH ORDINALITY AS x(qn, pn, i)
      LEFT JOIN LATERAL (SELECT q.id, q.dedup_window_seconds, q.on_conflict FROM queen.queues q
                          WHERE q.name = x.qn OFFSET 0) AS q ON true
      LEFT JOIN LATERAL (SELECT p.id, p.last_offset FROM queen.log_partitions p
                          WHERE p.queue_id = q.id AND p.name = x.pn OFFSET 0) AS p ON true;
    RETURN QUERY SELECT f.*, false FROM unnest(f_idx, f_pid, f_qid, f_win, f_last, f_mode) AS f;
    IF v_missing IS NULL THEN
        RETURN;
    END IF;

    -- The missing partitions' queues, each once.
    SELECT array_agg(DISTINCT p_queues[i]) INTO v_queues FROM unnest(v_missing) AS i
     WHERE length(p_queues[i]) BETWEEN 1 AND 128 AND p_queues[i] !~ '[^A-Za-z0-9_-]';
    -- A queue deleted while this waited for its row (queue_delete holds
    -- it FOR UPDATE) is not locked: it is made afresh on a second turn, so
    -- the pushes resolving it land in the new queue. A row this
    -- transaction inserts is its own until it commits.
    FOR v_turn IN 1..2 LOOP
        INSERT INTO queen.queues (name)
        SELECT n FROM unnest(v_queues) AS n
         WHERE NOT EXISTS (SELECT 1 FROM queen.queues q WHERE q.name = n)
         ORDER BY 1
        ON CONFLICT (name) DO NOTHING;
        -- Held until commit: a group made meanwhile (ensure_group, which
        -- takes the row FOR UPDATE) waits for these partitions, or these
        -- wait for it and see it below.
        PERFORM 1 FROM queen.queues q
         WHERE q.name = ANY (v_queues)
         ORDER BY q.id
           FOR KEY SHARE;
        GET DIAGNOSTICS v_locked = ROW_COUNT;
        EXIT WHEN v_locked = coalesce(cardinality(v_queues), 0);
    END LOOP;
    WITH ins AS (
        INSERT INTO queen.log_partitions AS lp (queue_id, name)
        SELECT DISTINCT q.id, p_partitions[i]
          FROM unnest(v_missing) AS i
          JOIN LATERAL (SELECT q.id FROM queen.queues q WHERE q.name = p_queues[i] OFFSET 0) AS q ON true
         WHERE length(p_partitions[i]) BETWEEN 1 AND 128 AND p_partitions[i] !~ '[^A-Za-z0-9_-]'
         ORDER BY 1, 2
        ON CONFLICT ON CONSTRAINT log_partitions_queue_id_name_key DO NOTHING
        RETURNING lp.id, lp.queue_id AS qid
    )
    SELECT array_agg(ins.id), array_agg(ins.qid) INTO v_created, v_created_q FROM ins;
    -- Each group's cursor, parked: the partition has no message yet. By
    -- key, from what the insert returned: joining log_partitions here,
    -- the session's generic plan scanned the whole table on every call.
    INSERT INTO queen.consumer_cursors (group_id, partition_id, parked)
    SELECT g.id, c.pid, true
      FROM unnest(v_created, v_created_q) AS c(pid, qid)
      JOIN LATERAL (SELECT g.id FROM queen.consumer_groups g WHERE g.queue_id = c.qid OFFSET 0) AS g ON true
     ORDER BY 1, 2;
    RETURN QUERY
        SELECT i, p.id, q.id, q.dedup_window_seconds, p.last_offset, q.on_conflict, c.id IS NOT NULL
          FROM unnest(v_missing) AS i
          JOIN LATERAL (SELECT q.id, q.dedup_window_seconds, q.on_conflict FROM queen.queues q
                         WHERE q.name = p_queues[i] OFFSET 0) AS q ON true
          JOIN LATERAL (SELECT p.id, p.last_offset FROM queen.log_partitions p
                         WHERE p.queue_id = q.id AND p.name = p_partitions[i] OFFSET 0) AS p ON true
          LEFT JOIN unnest(v_created) AS c(id) ON c.id = p.id;
END
$$;
