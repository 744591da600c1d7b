-- timer_fire fires up to p_limit due timers, and about p_max_bytes of
-- their data (at least one: 1000 timers of 1 MiB would otherwise make a
-- frame past PostgreSQL's 1 GB field limit and stall every fire behind
-- it), in the caller's transaction: it takes them with FOR UPDATE SKIP
-- LOCKED (several gateways never fire the same timer and never wait for
-- each other), deletes their rows, and pushes their messages through
-- queen.log_push with the partition's own allocator as p_verified, so the
-- probe does not run: the guarantee is this one transaction, not the
-- window. If it commits, the rows are gone and the messages are in the
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
    v_fire  timestamptz[];
    v_sizes bigint[];
    v_n     integer;
    i       integer := 1;
    j       integer;
    v_last  bigint;
    v_base  bigint;
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
        RETURNING t.id, t.partition_id, t.txn_id, t.hash, t.data, t.fire_at, t.data_bytes
    )
    SELECT array_agg(r.id ORDER BY r.partition_id, r.fire_at, r.id),
           array_agg(r.partition_id ORDER BY r.partition_id, r.fire_at, r.id),
           array_agg(r.txn_id ORDER BY r.partition_id, r.fire_at, r.id),
           array_agg(r.hash ORDER BY r.partition_id, r.fire_at, r.id),
           array_agg(r.data ORDER BY r.partition_id, r.fire_at, r.id),
           array_agg(r.fire_at ORDER BY r.partition_id, r.fire_at, r.id),
           array_agg(r.data_bytes ORDER BY r.partition_id, r.fire_at, r.id)
      INTO v_ids, v_pids, v_txns, v_hash, v_data, v_fire, v_sizes
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
          FROM queen.log_push(v_pids[i], v_last, 2147483647, v_txns[i:j], v_hash[i:j], v_data[i:j],
                              (SELECT sum(b)::bigint FROM unnest(v_sizes[i:j]) AS b)) AS r;
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
