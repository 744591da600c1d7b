-- log_retain is one step of retention: it visits up to p_limit partitions
-- with id above p_after, in ascending id order, and for each that has work
-- it takes the partition's row lock with SKIP LOCKED (the lock order of
-- LOCKS.md; never waiting, so never part of a deadlock, and never stalling
-- behind a push: a partition another transaction holds is skipped and
-- visited again next pass). It is a procedure and commits after each
-- partition it locked, so pushes, fires and schedules on a partition wait
-- for that partition's deletes only. Under the lock it
--   - deletes the log_txns rows wholly older than the window plus
--     p_slack_seconds, as a prefix in offset order, and raises txns_start
--     to the first offset still covered, so a probe never looks below it;
--   - with retention_seconds > 0, deletes the segments older than that,
--     again as a prefix, and raises segments_start past them. Segments
--     only: log_txns is the window's.
-- Consumer groups hold both back: log_txns rows from the lowest cursor of
-- the queue's groups on the partition up (acknowledgements resolve
-- transactionIds through them; a group that has not read the partition
-- yet starts at its first stored message, so counts as a cursor there),
-- and, with retain_until 'consumed', the segments too. The groups in
-- p_idle_groups hold nothing: idle for longer than their queue's
-- group_idle_seconds (the caller finds them, consumer_group_active_at).
-- At most p_max_rows rows of each kind per partition per call; "more" says
-- a partition was left with work, so the caller calls again.
CREATE OR REPLACE PROCEDURE queen.log_retain(p_after bigint, p_limit integer, p_slack_seconds double precision,
    p_max_rows integer, p_idle_groups bigint[],
    INOUT last_id bigint DEFAULT NULL, INOUT visited integer DEFAULT NULL, INOUT locked integer DEFAULT NULL,
    INOUT skipped integer DEFAULT NULL, INOUT txns_deleted bigint DEFAULT NULL,
    INOUT segments_deleted bigint DEFAULT NULL, INOUT more boolean DEFAULT NULL)
LANGUAGE plpgsql AS $$
DECLARE
    r          record;
    v_now      timestamptz := now();
    v_cutoff   timestamptz;
    v_start    bigint;
    v_cap      bigint;
    v_n        bigint;
    v_bytes    bigint;
    v_hold     bigint;  -- the lowest cursor of the queue's groups; NULL: no group
BEGIN
    visited := 0; locked := 0; skipped := 0; txns_deleted := 0; segments_deleted := 0; more := false;
    last_id := p_after;
    FOR r IN
        SELECT p.id, q.id AS queue_id, q.dedup_window_seconds AS win, q.retention_seconds AS ret,
               q.retain_until = 'consumed' AS until_consumed
          FROM queen.log_partitions p JOIN queen.queues q ON q.id = p.queue_id
         WHERE p.id > p_after
         ORDER BY p.id
         LIMIT p_limit
    LOOP
        visited := visited + 1;
        last_id := r.id;
        v_cutoff := v_now - make_interval(secs => r.win::double precision + p_slack_seconds);
        SELECT min(coalesce(c.next_offset,
                            (SELECT s.base_offset FROM queen.log_segments s WHERE s.partition_id = r.id
                              ORDER BY s.base_offset LIMIT 1),
                            (SELECT p.last_offset + 1 FROM queen.log_partitions p WHERE p.id = r.id)))
          INTO v_hold
          FROM queen.consumer_groups g
          LEFT JOIN queen.consumer_cursors c ON c.group_id = g.id AND c.partition_id = r.id
         WHERE g.queue_id = r.queue_id AND g.id <> ALL (coalesce(p_idle_groups, '{}'));
        -- Cheap checks without the lock: the oldest row of each kind
        -- (first in offset order, through the primary keys), below what
        -- consumers hold.
        IF NOT (EXISTS (SELECT 1 FROM queen.log_txns t
                         WHERE t.partition_id = r.id AND t.created_at < v_cutoff
                           AND (v_hold IS NULL OR t.end_offset < v_hold))
                OR (r.ret > 0 AND coalesce((SELECT s.created_at < v_now - make_interval(secs => r.ret)
                                                   AND (NOT r.until_consumed OR v_hold IS NULL OR s.end_offset < v_hold)
                                              FROM queen.log_segments s
                                             WHERE s.partition_id = r.id ORDER BY s.base_offset LIMIT 1), false))) THEN
            CONTINUE;
        END IF;
        PERFORM 1 FROM queen.log_partitions WHERE id = r.id FOR UPDATE SKIP LOCKED;
        IF NOT FOUND THEN
            skipped := skipped + 1;
            CONTINUE;
        END IF;
        locked := locked + 1;

        -- log_txns: everything below the first row still in the window (or
        -- below the allocator's next offset if none is) is wholly older.
        -- created_at is the push's clock, nearly but not strictly monotone
        -- in offset order, hence the first-in-window row bounds the prefix.
        SELECT t.base_offset INTO v_start
          FROM queen.log_txns t
         WHERE t.partition_id = r.id AND t.created_at >= v_cutoff
         ORDER BY t.end_offset LIMIT 1;
        IF v_start IS NULL THEN
            SELECT p.last_offset + 1 INTO v_start FROM queen.log_partitions p WHERE p.id = r.id;
        END IF;
        v_cap := NULL;
        SELECT t.end_offset + 1 INTO v_cap
          FROM queen.log_txns t
         WHERE t.partition_id = r.id
         ORDER BY t.end_offset OFFSET p_max_rows - 1 LIMIT 1;
        IF v_cap IS NOT NULL AND v_cap < v_start THEN
            v_start := v_cap;
            more := true;
        END IF;
        IF v_hold IS NOT NULL AND v_hold < v_start THEN
            -- Only whole rows below the cursor: the one holding it stays.
            SELECT coalesce(min(t.base_offset), v_hold) INTO v_start
              FROM queen.log_txns t WHERE t.partition_id = r.id AND t.end_offset >= v_hold;
            v_start := least(v_start, v_hold);
        END IF;
        DELETE FROM queen.log_txns t WHERE t.partition_id = r.id AND t.end_offset < v_start;
        GET DIAGNOSTICS v_n = ROW_COUNT;
        txns_deleted := txns_deleted + v_n;
        UPDATE queen.log_partitions p SET txns_start = v_start WHERE p.id = r.id AND p.txns_start < v_start;

        IF r.ret > 0 THEN
            SELECT s.base_offset INTO v_start
              FROM queen.log_segments s
             WHERE s.partition_id = r.id AND s.created_at >= v_now - make_interval(secs => r.ret)
             ORDER BY s.base_offset LIMIT 1;
            IF v_start IS NULL THEN
                v_start := 9223372036854775807; -- every segment is older
            END IF;
            v_cap := NULL;
            SELECT s.base_offset INTO v_cap
              FROM queen.log_segments s
             WHERE s.partition_id = r.id
             ORDER BY s.base_offset OFFSET p_max_rows LIMIT 1;
            IF v_cap IS NOT NULL AND v_cap < v_start THEN
                v_start := v_cap;
                more := true;
            END IF;
            IF r.until_consumed AND v_hold IS NOT NULL AND v_hold < v_start THEN
                -- Segments wholly below every group's cursor only.
                SELECT coalesce(min(s.base_offset), v_hold) INTO v_start
                  FROM queen.log_segments s WHERE s.partition_id = r.id AND s.end_offset >= v_hold;
                v_start := least(v_start, v_hold);
            END IF;
            WITH gone AS (
                DELETE FROM queen.log_segments s WHERE s.partition_id = r.id AND s.base_offset < v_start
                RETURNING s.data_bytes
            )
            SELECT count(*), coalesce(sum(gone.data_bytes), 0) INTO v_n, v_bytes FROM gone;
            -- Nothing below v_start is left (no frame straddles it), and
            -- nothing above the allocator exists.
            UPDATE queen.log_partitions p
               SET stored_bytes = p.stored_bytes - v_bytes,
                   segments_start = greatest(p.segments_start, least(v_start, p.last_offset + 1))
             WHERE p.id = r.id;
            segments_deleted := segments_deleted + v_n;
        END IF;
        -- One partition's lock at a time: pushes, fires and schedules on
        -- it wait for this partition's deletes only.
        COMMIT;
    END LOOP;
END
$$;
