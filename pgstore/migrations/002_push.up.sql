-- The exact push: see docs/design.md, "The probe: before allocation,
-- under the lock". (These routines are superseded: pgstore/routines.)
--
-- p_verified is the caller's vouched watermark: none of its hashes occurs
-- at or below it. -1 (or NULL) means "cannot vouch" and probes the whole
-- window. The functions are exact on their own: a stale or absent
-- p_verified only costs a longer probe, and repeats within a frame are
-- resolved here as well (the first occurrence leads, later ones are
-- duplicates of its result).
--
-- Results per frame: base_offset (NULL when nothing was written), the
-- allocator after the push, whether the probe ran, and the duplicates as
-- parallel arrays: dup_idx (1-based input positions) and dup_off (the
-- original's offset). Positions not in dup_idx were written at base_offset,
-- base_offset+1, ... in input order.

-- log_probe finds which of p_hashes are stored in the partition's window
-- above p_from, with the offset of the first occurrence of each (MIN picks
-- the original when several stored rows match).
CREATE FUNCTION queen.log_probe(p_pid bigint, p_from bigint, p_now timestamptz, p_window integer,
    p_hashes uuid[], OUT dup_idx integer[], OUT dup_off bigint[])
LANGUAGE plpgsql STABLE AS $$
BEGIN
    -- plpgsql, not sql: PostgreSQL 15 plans a SQL function's body on every
    -- call, plpgsql keeps the plan.
    SELECT array_agg(d.idx ORDER BY d.idx), array_agg(d.off ORDER BY d.idx)
      INTO dup_idx, dup_off
      FROM (SELECT ih.idx, MIN(t.base_offset + th.idx - 1) AS off
              FROM queen.log_txns t
             CROSS JOIN LATERAL queen.log_unnest_hashes(t.hashes) th
              JOIN queen.log_unnest_hashes(p_hashes) ih ON ih.h = th.h
             WHERE t.partition_id = p_pid
               AND t.end_offset > p_from
               AND t.created_at >= p_now - make_interval(secs => p_window)
             GROUP BY ih.idx) d;
END
$$;

-- log_push_write finishes a frame whose stored duplicates are known
-- (p_dup_idx/p_dup_off from log_probe, NULL for none): it resolves repeats
-- within the frame when deduplication is on, then writes the new messages
-- at p_last + 1, .... The caller holds the partition's row lock and read
-- p_last under it.
CREATE FUNCTION queen.log_push_write(
    p_pid      bigint,
    p_last     bigint,
    p_now      timestamptz,
    p_dedup    boolean,
    p_txn_ids  text[],
    p_hashes   uuid[],
    p_data     json[],
    p_dup_idx  integer[],
    p_dup_off  bigint[],
    OUT base_offset bigint,
    OUT last_offset bigint,
    OUT dup_idx     integer[],
    OUT dup_off     bigint[])
LANGUAGE plpgsql AS $$
DECLARE
    v_n       integer := cardinality(p_hashes);
    v_unique  boolean := true;
    v_new_idx integer[];
    v_k       integer;
BEGIN
    IF p_dedup AND v_n > 1 THEN
        SELECT count(DISTINCT u.h) = v_n INTO v_unique FROM unnest(p_hashes) AS u(h);
    END IF;

    IF p_dup_idx IS NULL AND v_unique THEN
        -- Common case: everything is new and is written as sent.
        v_k := v_n;
    ELSE
        -- Classify each position: a stored duplicate keeps the stored offset;
        -- a repeat of an earlier position inherits that leader's result; the
        -- remaining leaders are new and take contiguous offsets in input order.
        WITH inc AS (
            SELECT u.idx::integer AS idx, u.h,
                   min(u.idx::integer) OVER (PARTITION BY u.h) AS leader
              FROM unnest(p_hashes) WITH ORDINALITY AS u(h, idx)
        ), cls AS (
            SELECT inc.idx, inc.leader, st.off AS stored
              FROM inc LEFT JOIN unnest(p_dup_idx, p_dup_off) AS st(idx, off) ON st.idx = inc.idx
        ), fresh AS (
            SELECT cls.idx, p_last + row_number() OVER (ORDER BY cls.idx) AS off
              FROM cls WHERE cls.stored IS NULL AND cls.leader = cls.idx
        ), res AS (
            SELECT cls.idx, fresh_self.idx IS NOT NULL AS is_new,
                   COALESCE(cls.stored, fresh_leader.off) AS off
              FROM cls
              LEFT JOIN fresh AS fresh_self ON fresh_self.idx = cls.idx
              LEFT JOIN fresh AS fresh_leader ON fresh_leader.idx = cls.leader
        )
        SELECT array_agg(res.idx ORDER BY res.idx) FILTER (WHERE NOT res.is_new),
               array_agg(res.off ORDER BY res.idx) FILTER (WHERE NOT res.is_new),
               array_agg(res.idx ORDER BY res.idx) FILTER (WHERE res.is_new)
          INTO dup_idx, dup_off, v_new_idx
          FROM res;

        v_k := coalesce(cardinality(v_new_idx), 0);
        IF v_k = 0 THEN
            -- A duplicate writes nothing: no allocator bump, no segment, no
            -- log_txns row. So it needs no rollback and no savepoint.
            last_offset := p_last;
            RETURN;
        END IF;
        SELECT array_agg(p_txn_ids[i] ORDER BY i), array_agg(p_hashes[i] ORDER BY i),
               array_agg(p_data[i] ORDER BY i)
          INTO p_txn_ids, p_hashes, p_data
          FROM unnest(v_new_idx) AS i;
    END IF;

    base_offset := p_last + 1;
    last_offset := p_last + v_k;
    UPDATE queen.log_partitions SET last_offset = log_push_write.last_offset WHERE id = p_pid;
    INSERT INTO queen.log_segments (partition_id, base_offset, end_offset, created_at, txn_ids, data)
        VALUES (p_pid, log_push_write.base_offset, log_push_write.last_offset, p_now, p_txn_ids, p_data);
    -- Written whatever the window: ack-by-transactionId resolves through it.
    INSERT INTO queen.log_txns (partition_id, base_offset, end_offset, created_at, hashes)
        VALUES (p_pid, log_push_write.base_offset, log_push_write.last_offset, p_now, p_hashes);
END
$$;

-- log_push writes one frame to one partition, exactly.
CREATE FUNCTION queen.log_push(
    p_pid      bigint,
    p_verified bigint,
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
        v_from := GREATEST(COALESCE(p_verified, -1), v_txns_start - 1);
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
          FROM queen.log_push(p_pids[1], p_verified[1], p_txn_ids, p_hashes, p_data) AS r;
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
              FROM queen.log_push(p_pids[s], p_verified[s], p_txn_ids[v_pos[s]:v_end],
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
               GREATEST(COALESCE(p_verified[fr.s], -1), p.txns_start - 1) AS v_from
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

-- log_hydrate is the cache's hydration read: the partition's allocator and
-- purge watermark, its window, and every log_txns row created within the
-- window plus 5 seconds of clock-skew slack (extra old rows only widen
-- coverage), all from one snapshot because it is one statement.
CREATE FUNCTION queen.log_hydrate(p_pid bigint)
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
       AND t.created_at >= now() - make_interval(secs => p.dedup_window_seconds + 5)
     ORDER BY t.end_offset
$$;
