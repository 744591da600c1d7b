-- timer_fire fires up to p_limit due timers, and about p_max_bytes of
-- their data (at least one: 1000 timers of 1 MiB would otherwise make a
-- frame past PostgreSQL's 1 GB field limit and stall every fire behind
-- it), in the caller's transaction: it takes them with FOR UPDATE SKIP
-- LOCKED (several gateways never fire the same timer and never wait for
-- each other), deletes their rows, and pushes their messages through
-- queen.log_push_bundle, one frame per partition, with each partition's
-- own allocator as p_verified, so the probe does not run: the guarantee
-- is this one transaction, not the window. If it commits, the rows are gone and the messages are in the
-- log; if it rolls back, neither happened.
--
-- Pending transactionIds are unique per partition, so a frame never
-- repeats one. Lock order (LOCKS.md): timer rows (never waiting), then
-- partition rows in ascending id order.
CREATE OR REPLACE FUNCTION queen.timer_fire(p_limit integer, p_max_bytes bigint)
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
    v_meta  text[];   -- NULL when no timer fired has any
    v_fire  timestamptz[];
    v_sizes bigint[];
    v_fpids  bigint[]; -- the partitions fired into, ascending: one frame each
    v_lasts  bigint[];
    v_counts integer[];
    v_fbytes bigint[];
BEGIN
    -- Rows are locked as the loop fetches them; a few fetched past the
    -- byte budget stay locked (not deleted) until commit and fire next time.
    FOR d IN
        SELECT t.id, t.data_bytes AS sz FROM queen.timers t
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
        RETURNING t.id, t.partition_id, t.txn_id, t.hash, t.data, t.fire_at, t.data_bytes, t.meta
    )
    SELECT array_agg(r.id ORDER BY r.partition_id, r.fire_at, r.id),
           array_agg(r.partition_id ORDER BY r.partition_id, r.fire_at, r.id),
           array_agg(r.txn_id ORDER BY r.partition_id, r.fire_at, r.id),
           array_agg(r.hash ORDER BY r.partition_id, r.fire_at, r.id),
           array_agg(r.data ORDER BY r.partition_id, r.fire_at, r.id),
           array_agg(r.fire_at ORDER BY r.partition_id, r.fire_at, r.id),
           array_agg(r.data_bytes ORDER BY r.partition_id, r.fire_at, r.id),
           CASE WHEN bool_or(r.meta IS NOT NULL) THEN array_agg(r.meta ORDER BY r.partition_id, r.fire_at, r.id) END
      INTO v_ids, v_pids, v_txns, v_hash, v_data, v_fire, v_sizes, v_meta
      FROM del r;
    -- Partitions in ascending id order (LOCKS.md), then each partition's
    -- own allocator, read under its lock, as the vouched watermark.
    PERFORM 1 FROM queen.log_partitions p WHERE p.id = ANY (v_pids) ORDER BY p.id FOR UPDATE;
    SELECT array_agg(f.pid ORDER BY f.pid), array_agg(p.last_offset ORDER BY f.pid),
           array_agg(f.n ORDER BY f.pid), array_agg(f.bytes ORDER BY f.pid)
      INTO v_fpids, v_lasts, v_counts, v_fbytes
      FROM (SELECT x.pid, count(*)::integer AS n, sum(x.b)::bigint AS bytes
              FROM unnest(v_pids, v_sizes) AS x(pid, b) GROUP BY x.pid) AS f
      JOIN queen.log_partitions p ON p.id = f.pid;
    fired_at := clock_timestamp();
    RETURN QUERY
        SELECT v_ids[k], v_pids[k], r.base_offset + (k - fp.first), v_txns[k], v_fire[k], fired_at
          FROM queen.log_push_bundle(v_fpids, v_lasts, array_fill(2147483647, ARRAY[cardinality(v_fpids)]),
                   v_counts, v_txns, v_hash, v_data, v_fbytes, array_fill(0, ARRAY[cardinality(v_fpids)]),
                   '{}', '{}', array_fill(0, ARRAY[cardinality(v_fpids)]), '{}',
                   CASE WHEN v_meta IS NOT NULL THEN v_counts END, v_meta) AS r
          JOIN (SELECT f.s, min(k2) AS first FROM unnest(v_pids) WITH ORDINALITY AS u(pid, k2)
                  JOIN unnest(v_fpids) WITH ORDINALITY AS f(pid, s) ON f.pid = u.pid GROUP BY f.s) AS fp
            ON fp.s = r.frame
         CROSS JOIN LATERAL generate_series(fp.first, fp.first + v_counts[r.frame] - 1) AS k;
END
$$;
