-- log_push_bundle pushes many frames in one transaction and one statement.
-- Frames are flattened: frame s has p_counts[s] messages, stored one after
-- another in p_txn_ids, p_hashes and p_data. It first locks every named
-- partition row in ascending id order, the one global lock order (LOCKS.md),
-- then pushes. A duplicate in one frame writes nothing for that message and
-- leaves the other frames untouched.
--
-- Wide bundles (many partitions, few messages each) are the common shape
-- under fan-in, and one log_push per frame costs a handful of statements per
-- frame. So each frame that needs it is probed with one statement, frames
-- with a duplicate are finished one by one, and all the others (the common
-- case) are written together, a few statements for the whole bundle. A
-- partition named twice sends the whole bundle through log_push, in order.
CREATE OR REPLACE FUNCTION queen.log_push_bundle(
    p_pids     bigint[],
    p_verified bigint[],
    p_verified_windows integer[],
    p_counts   integer[],
    p_txn_ids  text[],
    p_hashes   uuid[],
    p_data     json[],
    p_bytes    bigint[])
RETURNS TABLE (seg integer, base_offset bigint, last_offset bigint, probe_ran boolean,
               dup_idx integer[], dup_off bigint[])
LANGUAGE plpgsql AS $$
DECLARE
    v_segs    integer := coalesce(cardinality(p_pids), 0);
    v_pos     integer[];
    v_total   bigint;
    v_now     timestamptz;
    v_repeats integer[]; -- frames repeating a hash within themselves
    v_dirty   integer[] := '{}'; -- frames finished one by one
    v_probed  integer[] := '{}'; -- frames whose probe ran
    v_end     integer;
    f         record;
    v_di      integer[];
    v_do      bigint[];
BEGIN
    SELECT sum(c) INTO v_total FROM unnest(p_counts) AS c;
    IF cardinality(p_verified) IS DISTINCT FROM v_segs OR cardinality(p_counts) IS DISTINCT FROM v_segs
       OR cardinality(p_bytes) IS DISTINCT FROM v_segs
       OR cardinality(p_verified_windows) IS DISTINCT FROM v_segs
       OR v_total IS DISTINCT FROM cardinality(p_hashes)::bigint
       OR v_total IS DISTINCT FROM cardinality(p_txn_ids)::bigint
       OR v_total IS DISTINCT FROM cardinality(p_data)::bigint
       OR EXISTS (SELECT 1 FROM unnest(p_counts) AS c WHERE c IS NULL OR c < 1) THEN
        RAISE EXCEPTION 'queen.log_push_bundle: % frames with % verified marks, % counts summing to % for % hashes',
            v_segs, cardinality(p_verified), cardinality(p_counts), v_total, cardinality(p_hashes)
            USING ERRCODE = '22023';
    END IF;

    IF v_segs = 1 THEN
        -- One frame: log_push takes its one lock; pass the arrays on
        -- without slicing copies.
        seg := 1;
        SELECT r.base_offset, r.last_offset, r.probe_ran, r.dup_idx, r.dup_off
          INTO base_offset, last_offset, probe_ran, dup_idx, dup_off
          FROM queen.log_push(p_pids[1], p_verified[1], p_verified_windows[1], p_txn_ids, p_hashes, p_data,
                              p_bytes[1]) AS r;
        RETURN NEXT;
        RETURN;
    END IF;

    PERFORM 1 FROM queen.log_partitions WHERE id = ANY (p_pids) ORDER BY id FOR UPDATE;
    IF (SELECT count(*) FROM queen.log_partitions WHERE id = ANY (p_pids))
       <> cardinality(ARRAY(SELECT DISTINCT unnest(p_pids))) THEN
        RAISE EXCEPTION 'queen.log_push_bundle: a partition of % does not exist', p_pids USING ERRCODE = 'QG404';
    END IF;
    -- Start position of each frame in the flattened arrays.
    SELECT array_agg(x.pos ORDER BY x.s) INTO v_pos
      FROM (SELECT c.s, (sum(c.n) OVER (ORDER BY c.s) - c.n + 1)::integer AS pos
              FROM unnest(p_counts) WITH ORDINALITY AS c(n, s)) AS x;

    IF cardinality(ARRAY(SELECT DISTINCT unnest(p_pids))) <> v_segs THEN
        -- A partition named twice: frames in input order, each exactly.
        FOR s IN 1 .. v_segs LOOP
            v_end := v_pos[s] + p_counts[s] - 1;
            seg := s;
            SELECT r.base_offset, r.last_offset, r.probe_ran, r.dup_idx, r.dup_off
              INTO base_offset, last_offset, probe_ran, dup_idx, dup_off
              FROM queen.log_push(p_pids[s], p_verified[s], p_verified_windows[s], p_txn_ids[v_pos[s]:v_end],
                                  p_hashes[v_pos[s]:v_end], p_data[v_pos[s]:v_end], p_bytes[s]) AS r;
            RETURN NEXT;
        END LOOP;
        RETURN;
    END IF;

    -- Taken after the locks: the probes and the writes see every commit
    -- that preceded them.
    v_now := clock_timestamp();

    -- Frames repeating a hash within themselves, found for all frames at
    -- once by grouping. Whether that matters (deduplication on) is decided
    -- in the loop below, from the same read of the window as the probe.
    SELECT ARRAY(
        SELECT DISTINCT r.s
          FROM (SELECT fr.s::integer AS s, p_hashes[i] AS h
                  FROM unnest(p_counts) WITH ORDINALITY AS fr(n, s),
                       generate_series(v_pos[fr.s], v_pos[fr.s] + fr.n - 1) AS i
                 WHERE fr.n > 1) AS r
         GROUP BY r.s, r.h HAVING count(*) > 1)
      INTO v_repeats;

    -- Probe each frame that needs it (window on, allocator above what the
    -- caller vouches for) with one statement planned for its partition; a
    -- frame with a stored or in-frame duplicate is finished right away.
    FOR f IN
        SELECT fr.s::integer AS s, fr.pid, p.last_offset AS last, q.dedup_window_seconds AS win,
               GREATEST(CASE WHEN q.dedup_window_seconds <= p_verified_windows[fr.s]
                             THEN COALESCE(p_verified[fr.s], -1) ELSE -1 END,
                        p.txns_start - 1) AS v_from
          FROM unnest(p_pids) WITH ORDINALITY AS fr(pid, s)
          JOIN queen.log_partitions p ON p.id = fr.pid
          JOIN queen.queues q ON q.id = p.queue_id
         ORDER BY fr.s
    LOOP
        v_di := NULL;
        v_do := NULL;
        v_end := v_pos[f.s] + p_counts[f.s] - 1;
        probe_ran := f.win > 0 AND f.last > f.v_from;
        IF probe_ran THEN
            v_probed := v_probed || f.s;
            SELECT pr.dup_idx, pr.dup_off INTO v_di, v_do
              FROM queen.log_probe(f.pid, f.v_from, v_now, f.win, p_hashes[v_pos[f.s]:v_end]) AS pr;
        END IF;
        IF v_di IS NOT NULL OR (f.win > 0 AND f.s = ANY (v_repeats)) THEN
            v_dirty := v_dirty || f.s;
            seg := f.s;
            SELECT w.base_offset, w.last_offset, w.dup_idx, w.dup_off
              INTO base_offset, last_offset, dup_idx, dup_off
              FROM queen.log_push_write(f.pid, f.last, v_now, f.win > 0, p_txn_ids[v_pos[f.s]:v_end],
                                        p_hashes[v_pos[f.s]:v_end], p_data[v_pos[f.s]:v_end], v_di, v_do,
                                        p_bytes[f.s]) AS w;
            RETURN NEXT;
        END IF;
    END LOOP;

    -- Every other frame is all new: written for all of them at once.
    WITH fr AS (
        SELECT fr.s::integer AS s, fr.pid, p.last_offset + 1 AS base, p_counts[fr.s] AS n, v_pos[fr.s] AS pos
          FROM unnest(p_pids) WITH ORDINALITY AS fr(pid, s)
          JOIN queen.log_partitions p ON p.id = fr.pid
         WHERE fr.s <> ALL (v_dirty)
    ), alloc AS (
        UPDATE queen.log_partitions p SET last_offset = fr.base + fr.n - 1, stored_bytes = p.stored_bytes + p_bytes[fr.s]
          FROM fr WHERE p.id = fr.pid
    ), seg_rows AS (
        INSERT INTO queen.log_segments (partition_id, base_offset, end_offset, created_at, txn_ids, data, data_bytes)
        SELECT fr.pid, fr.base, fr.base + fr.n - 1, v_now, p_txn_ids[fr.pos : fr.pos + fr.n - 1],
               p_data[fr.pos : fr.pos + fr.n - 1], p_bytes[fr.s]
          FROM fr
    )
    INSERT INTO queen.log_txns (partition_id, base_offset, end_offset, created_at, hashes)
    SELECT fr.pid, fr.base, fr.base + fr.n - 1, v_now, p_hashes[fr.pos : fr.pos + fr.n - 1]
      FROM fr;

    RETURN QUERY
        SELECT fr.s::integer, p.last_offset - p_counts[fr.s] + 1, p.last_offset, fr.s = ANY (v_probed),
               NULL::integer[], NULL::bigint[]
          FROM unnest(p_pids) WITH ORDINALITY AS fr(pid, s)
          JOIN queen.log_partitions p ON p.id = fr.pid
         WHERE fr.s <> ALL (v_dirty);
END
$$;
