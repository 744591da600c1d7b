-- Fixes found in review.

-- Window arithmetic in integer overflowed for windows near the maximum
-- (2147483647 s): computed in double precision now.
CREATE OR REPLACE FUNCTION queen.log_hydrate(p_pid bigint)
RETURNS TABLE (last_offset bigint, txns_start bigint, dedup_window_seconds integer, db_now timestamptz,
               base_offset bigint, end_offset bigint, created_at timestamptz, hashes uuid[])
LANGUAGE sql STABLE AS $$
    WITH p AS (
        SELECT lp.last_offset, lp.txns_start, q.dedup_window_seconds
          FROM queen.log_partitions lp JOIN queen.queues q ON q.id = lp.queue_id
         WHERE lp.id = p_pid
    )
    SELECT p.last_offset, p.txns_start, p.dedup_window_seconds, now(),
           t.base_offset, t.end_offset, t.created_at, t.hashes
      FROM p
      LEFT JOIN queen.log_txns t
        ON t.partition_id = p_pid
       AND t.created_at >= now() - make_interval(secs => p.dedup_window_seconds::double precision + 5)
     ORDER BY t.end_offset
$$;

-- Retention becomes a procedure that commits after each partition it
-- locked, so no partition waits for another's deletes; the same overflow
-- fix; and a partition without segments no longer counts as having
-- segment work (a NULL comparison took it for work and locked it).
DROP FUNCTION queen.log_retain(bigint, integer, integer, integer);

CREATE PROCEDURE queen.log_retain(p_after bigint, p_limit integer, p_slack_seconds double precision,
    p_max_rows integer,
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
BEGIN
    visited := 0; locked := 0; skipped := 0; txns_deleted := 0; segments_deleted := 0; more := false;
    last_id := p_after;
    FOR r IN
        SELECT p.id, q.dedup_window_seconds AS win, q.retention_seconds AS ret
          FROM queen.log_partitions p JOIN queen.queues q ON q.id = p.queue_id
         WHERE p.id > p_after
         ORDER BY p.id
         LIMIT p_limit
    LOOP
        visited := visited + 1;
        last_id := r.id;
        v_cutoff := v_now - make_interval(secs => r.win::double precision + p_slack_seconds);
        -- Cheap checks without the lock: the oldest row of each kind
        -- (first in offset order, through the primary keys).
        IF NOT (EXISTS (SELECT 1 FROM queen.log_txns t
                         WHERE t.partition_id = r.id AND t.created_at < v_cutoff)
                OR (r.ret > 0 AND coalesce((SELECT s.created_at FROM queen.log_segments s
                                             WHERE s.partition_id = r.id ORDER BY s.base_offset LIMIT 1)
                                           < v_now - make_interval(secs => r.ret), false))) THEN
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
            DELETE FROM queen.log_segments s WHERE s.partition_id = r.id AND s.base_offset < v_start;
            GET DIAGNOSTICS v_n = ROW_COUNT;
            segments_deleted := segments_deleted + v_n;
        END IF;
        -- One partition's lock at a time: pushes, fires and schedules on
        -- it wait for this partition's deletes only.
        COMMIT;
    END LOOP;
END
$$;

-- timer_fire takes at most p_limit timers and about p_max_bytes of their
-- data (at least one timer): 1000 timers of 1 MiB each would otherwise make
-- a frame past PostgreSQL's 1 GB field limit and stall every fire behind it.
DROP FUNCTION queen.timer_fire(integer);
CREATE FUNCTION queen.timer_fire(p_limit integer, p_max_bytes bigint)
RETURNS TABLE (timer_id uuid, partition_id bigint, msg_offset bigint, txn_id text, fire_at timestamptz,
               fired_at timestamptz)
LANGUAGE plpgsql AS $$
DECLARE
    v_due   timestamptz := clock_timestamp();
    v_take  uuid[] := '{}';
    v_bytes bigint := 0;
    d       record;
    v_ids   uuid[];
    v_pids  bigint[];
    v_txns  text[];
    v_hash  uuid[];
    v_data  json[];
    v_fire  timestamptz[];
    v_n     integer;
    i       integer := 1;
    j       integer;
    v_last  bigint;
    v_base  bigint;
BEGIN
    -- Rows are locked as the loop fetches them; a few fetched past the
    -- byte budget stay locked (not deleted) until commit and fire next time.
    FOR d IN
        SELECT t.id, pg_column_size(t.data) AS sz FROM queen.timers t
         WHERE t.fire_at <= v_due
         ORDER BY t.fire_at, t.id
         LIMIT p_limit
           FOR UPDATE SKIP LOCKED
    LOOP
        EXIT WHEN cardinality(v_take) > 0 AND v_bytes + d.sz > p_max_bytes;
        v_take := v_take || d.id;
        v_bytes := v_bytes + d.sz;
    END LOOP;
    IF cardinality(v_take) = 0 THEN
        RETURN;
    END IF;
    WITH del AS (
        DELETE FROM queen.timers t WHERE t.id = ANY (v_take)
        RETURNING t.id, t.partition_id, t.txn_id, t.hash, t.data, t.fire_at
    )
    SELECT array_agg(r.id ORDER BY r.partition_id, r.fire_at, r.id),
           array_agg(r.partition_id ORDER BY r.partition_id, r.fire_at, r.id),
           array_agg(r.txn_id ORDER BY r.partition_id, r.fire_at, r.id),
           array_agg(r.hash ORDER BY r.partition_id, r.fire_at, r.id),
           array_agg(r.data ORDER BY r.partition_id, r.fire_at, r.id),
           array_agg(r.fire_at ORDER BY r.partition_id, r.fire_at, r.id)
      INTO v_ids, v_pids, v_txns, v_hash, v_data, v_fire
      FROM del r;
    v_n := cardinality(v_ids);
    PERFORM 1 FROM queen.log_partitions p WHERE p.id = ANY (v_pids) ORDER BY p.id FOR UPDATE;
    WHILE i <= v_n LOOP
        j := i;
        WHILE j < v_n AND v_pids[j + 1] = v_pids[i] LOOP
            j := j + 1;
        END LOOP;
        -- The partition's own allocator as p_verified (read under the lock
        -- taken above): the probe does not run for a fire.
        SELECT p.last_offset INTO v_last FROM queen.log_partitions p WHERE p.id = v_pids[i];
        SELECT r.base_offset INTO v_base
          FROM queen.log_push(v_pids[i], v_last, 2147483647, v_txns[i:j], v_hash[i:j], v_data[i:j]) AS r;
        fired_at := clock_timestamp();
        FOR k IN i .. j LOOP
            timer_id := v_ids[k];
            partition_id := v_pids[k];
            msg_offset := v_base + (k - i);
            txn_id := v_txns[k];
            fire_at := v_fire[k];
            RETURN NEXT;
        END LOOP;
        i := j + 1;
    END LOOP;
END
$$;
