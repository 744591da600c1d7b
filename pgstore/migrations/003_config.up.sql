-- Queue configuration and retention; the push honours a vouched watermark
-- only under the window it was vouched for.

-- Segment retention per queue: 0 keeps messages forever. It never touches
-- log_txns, which only the window governs.
ALTER TABLE queen.queues
    ADD COLUMN retention_seconds integer NOT NULL DEFAULT 0 CHECK (retention_seconds >= 0);

-- A broker's cache vouches for "none of these hashes is stored above its
-- hydration start" under the window it hydrated with. After the window grows
-- that says nothing about the part of the new window below, and the broker
-- learns of the change only when its memo expires (30 s). So the push takes
-- the window each watermark was vouched under (p_verified_window[s]) and
-- honours the watermark only if the queue's window, read under the lock, is
-- no larger: SQL uses a new window at once, whatever the caches believe.
-- A shrunk window keeps old watermarks valid (they cover more than needed).
DROP FUNCTION queen.log_push_bundle(bigint[], bigint[], integer[], text[], uuid[], json[]);
DROP FUNCTION queen.log_push(bigint, bigint, text[], uuid[], json[]);

-- log_push writes one frame to one partition, exactly.
CREATE FUNCTION queen.log_push(
    p_pid      bigint,
    p_verified bigint,
    p_verified_window integer,
    p_txn_ids  text[],
    p_hashes   uuid[],
    p_data     json[],
    OUT base_offset bigint,
    OUT last_offset bigint,
    OUT probe_ran   boolean,
    OUT dup_idx     integer[],
    OUT dup_off     bigint[])
LANGUAGE plpgsql AS $$
DECLARE
    v_n           integer := cardinality(p_hashes);
    v_last        bigint;
    v_txns_start  bigint;
    v_window      integer;
    v_now         timestamptz;
    v_from        bigint;
BEGIN
    IF v_n IS NULL OR v_n = 0 OR cardinality(p_txn_ids) IS DISTINCT FROM v_n
       OR cardinality(p_data) IS DISTINCT FROM v_n THEN
        RAISE EXCEPTION 'queen.log_push: txn_ids, hashes and data must be non-empty and of equal length'
            USING ERRCODE = '22023';
    END IF;

    -- The row lock is the per-partition write serializer. It is taken
    -- explicitly, before the probe, so that probe-then-allocate is race-free.
    SELECT p.last_offset, p.txns_start, q.dedup_window_seconds
      INTO v_last, v_txns_start, v_window
      FROM queen.log_partitions p JOIN queen.queues q ON q.id = p.queue_id
     WHERE p.id = p_pid
       FOR UPDATE OF p;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'queen.log_push: partition % does not exist', p_pid USING ERRCODE = 'QG404';
    END IF;

    v_now := clock_timestamp();
    probe_ran := false;
    IF v_window > 0 THEN
        -- A watermark vouched under a smaller window says nothing about
        -- the rest of this one.
        v_from := GREATEST(CASE WHEN v_window <= p_verified_window THEN COALESCE(p_verified, -1) ELSE -1 END,
                           v_txns_start - 1);
        IF v_last > v_from THEN
            probe_ran := true;
            SELECT pr.dup_idx, pr.dup_off INTO dup_idx, dup_off
              FROM queen.log_probe(p_pid, v_from, v_now, v_window, p_hashes) AS pr;
        END IF;
    END IF;

    SELECT w.base_offset, w.last_offset, w.dup_idx, w.dup_off
      INTO base_offset, last_offset, dup_idx, dup_off
      FROM queen.log_push_write(p_pid, v_last, v_now, v_window > 0, p_txn_ids, p_hashes, p_data,
                                dup_idx, dup_off) AS w;
END
$$;

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
CREATE FUNCTION queen.log_push_bundle(
    p_pids     bigint[],
    p_verified bigint[],
    p_verified_windows integer[],
    p_counts   integer[],
    p_txn_ids  text[],
    p_hashes   uuid[],
    p_data     json[])
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
          FROM queen.log_push(p_pids[1], p_verified[1], p_verified_windows[1], p_txn_ids, p_hashes, p_data) AS r;
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
                                  p_hashes[v_pos[s]:v_end], p_data[v_pos[s]:v_end]) AS r;
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
                                        p_hashes[v_pos[f.s]:v_end], p_data[v_pos[f.s]:v_end], v_di, v_do) AS w;
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
        UPDATE queen.log_partitions p SET last_offset = fr.base + fr.n - 1
          FROM fr WHERE p.id = fr.pid
    ), seg_rows AS (
        INSERT INTO queen.log_segments (partition_id, base_offset, end_offset, created_at, txn_ids, data)
        SELECT fr.pid, fr.base, fr.base + fr.n - 1, v_now, p_txn_ids[fr.pos : fr.pos + fr.n - 1],
               p_data[fr.pos : fr.pos + fr.n - 1]
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
--     again as a prefix. Segments only: log_txns is the window's.
-- At most p_max_rows rows of each kind per partition per call; "more" says
-- a partition was left with work, so the caller calls again.
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

-- log_hydrate (002) computed window + 5 s in integer, which overflows for
-- windows near the maximum (2147483647 s): in double precision here.
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
