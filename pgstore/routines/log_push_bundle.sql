-- log_push_bundle pushes frames to partitions in one transaction and one
-- statement, exactly (docs/design.md, "The probe: before allocation, under
-- the lock"). Frame s is p_counts[s] messages for partition p_pids[s],
-- stored one after another in p_txn_ids, p_hashes and p_data;
-- p_bytes[s] is its data size as sent. It is the one write path: pushes,
-- and timer fires, go through it.
--
-- The caller may vouch for a frame (p_verified[s] >= 0, under the window
-- p_verified_windows[s]): "none of its hashes is stored in the window at
-- or below p_verified[s], except at the candidates I name". Candidates are
-- flattened like the messages: frame s has p_cand_counts[s] of them, each
-- a message (p_cand_idx, 1-based in its frame) and an offset where the
-- caller's cache holds a hash equal to that message's. SQL then checks
-- exactly those stored slots, and probes everything above the watermark;
-- the earliest in-window match is the original, as a full probe would
-- find it, because every in-window occurrence at or below the watermark
-- is among the candidates. Without a vouch (-1), or when the queue's
-- window has grown past the one vouched under, the whole window is probed
-- and the candidates are not used. SQL is exact on its own: repeats
-- within a frame are resolved here too (the first occurrence leads).
--
-- Frame s may carry data hashes (p_dh_counts[s] = p_counts[s], flattened
-- in p_data_hashes like the messages, or 0): the xxh3_128 of each
-- message's data, stored beside its transactionId's hash when the queue
-- compares payloads (on_conflict is not 'ignore'), read under the lock.
--
-- Frame s may carry its messages' meta the same way (p_meta_counts[s] =
-- p_counts[s], in p_meta, or 0; both arrays may be left out): their
-- headers and data encoding, stored in the frame's meta column, which
-- stays NULL for a frame without any. p_meta_counts[s] = -1 sends one
-- meta, every message's: a producer's messages usually share theirs,
-- and it crosses the wire once.
--
-- Results, one row per frame: base_offset (NULL when nothing was written),
-- the allocator after the push, the probe made ('off': window 0;
-- 'skipped': nothing to probe; 'narrowed'; 'full'), how many stored hashes
-- it compared (unrolled), and the duplicates as parallel arrays: dup_idx
-- (1-based positions) and dup_off (the original's offset). Positions not
-- in dup_idx were written at base_offset, base_offset+1, ... in order.
-- on_conflict is the queue's mode, read under the lock; created_at the
-- time stored with every frame (what a gateway's tail keeps beside the
-- messages, docs/design.md, "The tail").
--
-- Lock order (LOCKS.md): every named partition row, in ascending id order,
-- before anything is probed or written. A duplicate writes nothing and
-- needs no savepoint; the other frames are untouched.
CREATE OR REPLACE FUNCTION queen.log_push_bundle(
    p_pids             bigint[],
    p_verified         bigint[],
    p_verified_windows integer[],
    p_counts           integer[],
    p_txn_ids          text[],
    p_hashes           uuid[],
    p_data             json[],
    p_bytes            bigint[],
    p_cand_counts      integer[],
    p_cand_idx         integer[],
    p_cand_off         bigint[],
    p_dh_counts        integer[],
    p_data_hashes      uuid[],
    p_meta_counts      integer[] DEFAULT NULL,
    p_meta             text[] DEFAULT NULL)
RETURNS TABLE (frame integer, base_offset bigint, last_offset bigint, probe text, unrolled bigint,
               dup_idx integer[], dup_off bigint[], on_conflict text, created_at timestamptz)
LANGUAGE plpgsql
-- Each statement is planned once per session, for any arrays: left to
-- choose, PostgreSQL kept planning custom plans on every call, which cost
-- more than executing them. The plans are made for the default row
-- estimates of set-returning calls (10 to 1000 each), so grouping is by
-- sorting: hash tables sized for those estimates cost more to allocate
-- and scan than the groups do.
--
-- Every table is read by key: partition rows by id, stored hashes by
-- partition (a LATERAL ... OFFSET 0 per frame, so that the join cannot
-- become a scan of the table). A plan made once must stay right while
-- the tables grow and bloat under it, and a scan of log_partitions costs
-- about as much to the planner as a hundred index probes at 10k
-- partitions: it chose the scan (6 ms a push at 10k partitions, 18 ms at
-- 100k). With sequential scans off, every read of a table takes the index
-- its key names, whatever the statistics say.
SET plan_cache_mode = force_generic_plan
SET enable_hashagg = off
SET enable_seqscan = off
AS $$
DECLARE
    v_frames   integer := coalesce(cardinality(p_pids), 0);
    v_pos      integer[]; -- frame s starts at p_*[v_pos[s]]
    v_cpos     integer[]; -- its candidates start at p_cand_*[v_cpos[s]]
    v_dpos     integer[]; -- its data hashes start at p_data_hashes[v_dpos[s]]
    v_mcounts  integer[] := coalesce(p_meta_counts, array_fill(0, ARRAY[v_frames]));
    v_mlens    integer[]; -- how many of p_meta frame s has: 1 for a shared meta (-1)
    v_mpos     integer[]; -- its meta starts at p_meta[v_mpos[s]]
    v_shape_ok boolean;   -- the arrays agree with the counts
    v_distinct boolean;   -- no partition is named twice
    v_unique   boolean;   -- no hash occurs twice in the whole bundle
    v_last     bigint[];  -- allocator, read under the lock
    v_tstart   bigint[];  -- txns_start: no hash below it is read
    v_tend     bigint[];  -- txns_end: hashes up to it are in log_txns (queen.log_hashes)
    v_win      integer[]; -- window in seconds, 0: deduplication off
    v_mode     text[];    -- the queue's on_conflict
    v_keepdh   boolean[]; -- the frame's data hashes are stored
    v_from     bigint[];  -- probe stored rows above this offset
    v_narrow   boolean[]; -- vouched: candidates and the range above v_from suffice
    v_probe    text[];    -- the probe each frame gets
    v_scan     boolean;   -- some frame has stored rows above v_from to probe
    v_unrolled bigint[];  -- stored hashes it compared
    v_now      timestamptz;
    d_s        integer[]; -- duplicates found: frame, position, offset
    d_idx      integer[];
    d_off      bigint[];
    v_dirty    integer[]; -- frames with a duplicate or a repeat: classified
BEGIN
    -- What the arrays say, checked and read in one statement: where each
    -- frame starts, whether a partition is named twice, whether a hash
    -- occurs twice (one distinct count over the bundle usually says no:
    -- ingest sends a partition's first occurrences only).
    SELECT coalesce(sum(c.n), 0) = coalesce(cardinality(p_hashes), 0)
               AND coalesce(cardinality(p_txn_ids), 0) = coalesce(cardinality(p_hashes), 0)
               AND coalesce(cardinality(p_data), 0) = coalesce(cardinality(p_hashes), 0)
               AND coalesce(sum(c.k), 0) = coalesce(cardinality(p_cand_idx), 0)
               AND coalesce(cardinality(p_cand_idx), 0) = coalesce(cardinality(p_cand_off), 0)
               AND bool_and(c.n >= 1) AND count(c.n) = v_frames AND count(c.k) = v_frames
               AND cardinality(p_verified) = v_frames AND cardinality(p_verified_windows) = v_frames
               AND cardinality(p_bytes) = v_frames
               AND coalesce(sum(c.d), 0) = coalesce(cardinality(p_data_hashes), 0)
               AND count(c.d) = v_frames AND bool_and(c.d = 0 OR c.d = c.n)
               AND coalesce(sum(c.ml), 0) = coalesce(cardinality(p_meta), 0)
               AND count(c.m) = v_frames AND bool_and(c.m = 0 OR c.m = c.n OR c.m = -1),
           array_agg(c.pos ORDER BY c.s), array_agg(c.cpos ORDER BY c.s), array_agg(c.dpos ORDER BY c.s),
           array_agg(c.mpos ORDER BY c.s), array_agg(c.ml ORDER BY c.s),
           (SELECT count(DISTINCT pid) FROM unnest(p_pids) AS pid) = v_frames,
           (SELECT count(DISTINCT h) FROM unnest(p_hashes) AS h) = coalesce(cardinality(p_hashes), 0)
      INTO v_shape_ok, v_pos, v_cpos, v_dpos, v_mpos, v_mlens, v_distinct, v_unique
      FROM (SELECT x.n, x.k, x.d, x.m, x.ml, x.s, (sum(x.n) OVER w - x.n + 1)::integer AS pos,
                   (sum(x.k) OVER w - x.k + 1)::integer AS cpos, (sum(x.d) OVER w - x.d + 1)::integer AS dpos,
                   (sum(x.ml) OVER w - x.ml + 1)::integer AS mpos
              FROM (SELECT u.*, abs(u.m) AS ml
                      FROM unnest(p_counts, p_cand_counts, p_dh_counts, v_mcounts) WITH ORDINALITY AS u(n, k, d, m, s)) AS x
            WINDOW w AS (ORDER BY x.s)) AS c;
    IF v_frames = 0 OR NOT coalesce(v_shape_ok, false) THEN
        RAISE EXCEPTION 'queen.log_push_bundle: % frames with % verified marks, % counts summing to % for % hashes, % candidates',
            v_frames, cardinality(p_verified), cardinality(p_counts), (SELECT sum(c) FROM unnest(p_counts) AS c),
            cardinality(p_hashes), cardinality(p_cand_idx)
            USING ERRCODE = '22023';
    END IF;

    IF NOT v_distinct THEN
        -- A partition named twice: its frames in input order, each pushed
        -- alone, so the later sees the earlier's writes.
        FOR s IN 1 .. v_frames LOOP
            RETURN QUERY
                SELECT s, r.base_offset, r.last_offset, r.probe, r.unrolled, r.dup_idx, r.dup_off, r.on_conflict, r.created_at
                  FROM queen.log_push_bundle(ARRAY[p_pids[s]], ARRAY[p_verified[s]], ARRAY[p_verified_windows[s]],
                           ARRAY[p_counts[s]], p_txn_ids[v_pos[s] : v_pos[s] + p_counts[s] - 1],
                           p_hashes[v_pos[s] : v_pos[s] + p_counts[s] - 1], p_data[v_pos[s] : v_pos[s] + p_counts[s] - 1],
                           ARRAY[p_bytes[s]], ARRAY[p_cand_counts[s]],
                           coalesce(p_cand_idx[v_cpos[s] : v_cpos[s] + p_cand_counts[s] - 1], '{}'),
                           coalesce(p_cand_off[v_cpos[s] : v_cpos[s] + p_cand_counts[s] - 1], '{}'),
                           ARRAY[p_dh_counts[s]],
                           coalesce(p_data_hashes[v_dpos[s] : v_dpos[s] + p_dh_counts[s] - 1], '{}'),
                           ARRAY[v_mcounts[s]],
                           coalesce(p_meta[v_mpos[s] : v_mpos[s] + v_mlens[s] - 1], '{}')) AS r;
        END LOOP;
        RETURN;
    END IF;

    -- The row locks are the per-partition write serializer, taken in
    -- ascending id order before the probe, so that probe-then-allocate is
    -- race-free; the allocator and the window are read under them.
    --
    -- Where each frame's probe starts is computed here and only here. A
    -- watermark the caller vouches for (>= 0) is honoured only under the
    -- window it was vouched for: after the window grew it says nothing of
    -- the part of the new window below it, so the whole window is probed
    -- (a shrunk window keeps old vouches valid: they cover more than
    -- needed). A watermark above the allocator speaks of a longer log than
    -- this one (a failed-over or restored server: docs/design.md,
    -- "Failover and restores"): not honoured either. The largest bigint is
    -- the vouch of a writer that does not probe (a timer's fire, a
    -- redrive), above any allocator by design. The purge watermark
    -- txns_start - 1 is always a lower bound:
    -- rows below it are gone. v_narrow says the watermark, and the
    -- candidates sent with it, are honoured. The probe each frame gets
    -- follows from these.
    SELECT array_agg(lk.last_offset ORDER BY fr.s), array_agg(lk.txns_start ORDER BY fr.s), array_agg(lk.txns_end ORDER BY fr.s),
           array_agg(lk.win ORDER BY fr.s),
           array_agg(b.from_off ORDER BY fr.s),
           array_agg(b.ok ORDER BY fr.s), array_agg(lk.mode ORDER BY fr.s),
           array_agg(lk.mode <> 'ignore' AND p_dh_counts[fr.s] > 0 ORDER BY fr.s),
           array_agg(CASE WHEN lk.win = 0 THEN 'off'
                          WHEN b.ok AND (lk.last_offset > b.from_off OR p_cand_counts[fr.s] > 0) THEN 'narrowed'
                          WHEN NOT b.ok AND lk.last_offset > b.from_off THEN 'full'
                          ELSE 'skipped' END ORDER BY fr.s),
           bool_or(lk.win > 0 AND lk.last_offset > b.from_off)
      INTO v_last, v_tstart, v_tend, v_win, v_from, v_narrow, v_mode, v_keepdh, v_probe, v_scan
      FROM unnest(p_pids) WITH ORDINALITY AS fr(pid, s)
      JOIN (SELECT p.id, p.last_offset, p.txns_start, p.txns_end, q.dedup_window_seconds AS win, q.on_conflict AS mode
              FROM queen.log_partitions p JOIN queen.queues q ON q.id = p.queue_id
             WHERE p.id = ANY (p_pids)
             ORDER BY p.id
               FOR UPDATE OF p) AS lk ON lk.id = fr.pid
     CROSS JOIN LATERAL (SELECT p_verified[fr.s] >= 0 AND lk.win <= p_verified_windows[fr.s]
                                AND (p_verified[fr.s] <= lk.last_offset OR p_verified[fr.s] = 9223372036854775807) AS ok) AS vouch
     CROSS JOIN LATERAL (SELECT vouch.ok, CASE WHEN vouch.ok THEN GREATEST(p_verified[fr.s], lk.txns_start - 1)
                                               ELSE lk.txns_start - 1 END AS from_off) AS b;
    IF coalesce(cardinality(v_last), 0) <> v_frames THEN
        RAISE EXCEPTION 'queen.log_push_bundle: a partition of % does not exist', p_pids USING ERRCODE = 'QG404';
    END IF;
    -- Taken after the locks: the probes and the writes see every commit
    -- that preceded them.
    v_now := clock_timestamp();
    v_unrolled := array_fill(0::bigint, ARRAY[v_frames]);

    -- The range probe: every stored hash above v_from in the window, for
    -- the frames that have such rows (all of them for a full probe, the
    -- part above the watermark for a narrowed one). The stored hashes
    -- meet the frame's own by a hash join on (frame, hash): each stored
    -- hash costs O(1) whatever the number of incoming ones, in a plan
    -- made once. (Compared by "= ANY" over a cached plan's parameter, 100
    -- incoming hashes over 100,000 stored ones took 1.3 s; planned on
    -- every call, comparing a few dozen cost 0.46 ms of planning.)
    IF v_scan THEN
        WITH fr AS (
            SELECT s FROM generate_subscripts(p_pids, 1) AS s WHERE v_win[s] > 0 AND v_last[s] > v_from[s]
        ), scanned AS MATERIALIZED (
            SELECT fr.s, t.base_offset, t.end_offset, t.hashes
              FROM fr CROSS JOIN LATERAL (
                       SELECT t.base_offset, t.end_offset, t.hashes
                         FROM queen.log_hashes(p_pids[fr.s], v_from[fr.s], v_tstart[fr.s], v_tend[fr.s]) AS t
                        WHERE t.created_at >= v_now - make_interval(secs => v_win[fr.s])
                       OFFSET 0) AS t
        ), incoming AS (
            SELECT fr.s, m.idx::integer AS idx, m.h
              FROM fr CROSS JOIN LATERAL unnest(p_hashes[v_pos[fr.s] : v_pos[fr.s] + p_counts[fr.s] - 1])
                       WITH ORDINALITY AS m(h, idx)
        ), found AS (
            SELECT inc.s, inc.idx, min(sc.base_offset + th.idx - 1) AS off
              FROM scanned AS sc CROSS JOIN LATERAL queen.log_unnest_hashes(sc.hashes) AS th
              JOIN incoming AS inc ON inc.s = sc.s AND inc.h = th.h
             GROUP BY inc.s, inc.idx
        )
        SELECT (SELECT array_agg(f.s ORDER BY f.s, f.idx) FROM found AS f),
               (SELECT array_agg(f.idx ORDER BY f.s, f.idx) FROM found AS f),
               (SELECT array_agg(f.off ORDER BY f.s, f.idx) FROM found AS f),
               (SELECT array_agg(coalesce(n.c, 0) ORDER BY g.s)
                  FROM generate_subscripts(p_pids, 1) AS g(s)
                  LEFT JOIN (SELECT sc.s, sum(sc.end_offset - sc.base_offset + 1) AS c
                               FROM scanned AS sc GROUP BY sc.s) AS n ON n.s = g.s)
          INTO d_s, d_idx, d_off, v_unrolled;
    END IF;

    -- The candidates of vouched frames: each stored slot the cache named,
    -- checked in the frame that holds it (one index probe each).
    IF coalesce(cardinality(p_cand_idx), 0) > 0 THEN
        WITH c AS (
            SELECT cs.s, p_cand_idx[k] AS idx, p_cand_off[k] AS off
              FROM generate_subscripts(p_pids, 1) AS cs(s)
             CROSS JOIN LATERAL generate_series(v_cpos[cs.s], v_cpos[cs.s] + p_cand_counts[cs.s] - 1) AS k
             WHERE v_narrow[cs.s] AND v_win[cs.s] > 0
        ), found AS (
            SELECT c.s, c.idx, min(c.off) AS off
              FROM c CROSS JOIN LATERAL queen.log_hash_frame(p_pids[c.s], c.off, v_tstart[c.s], v_tend[c.s]) AS t
             WHERE t.created_at >= v_now - make_interval(secs => v_win[c.s])
               AND t.hashes[c.off - t.base_offset + 1] = p_hashes[v_pos[c.s] + c.idx - 1]
             GROUP BY c.s, c.idx
        ), merged AS (
            SELECT m.s, m.idx, min(m.off) AS off
              FROM (SELECT found.s, found.idx, found.off FROM found
                    UNION ALL
                    SELECT * FROM unnest(d_s, d_idx, d_off)) AS m(s, idx, off)
             GROUP BY m.s, m.idx
        )
        SELECT (SELECT array_agg(m.s ORDER BY m.s, m.idx) FROM merged AS m),
               (SELECT array_agg(m.idx ORDER BY m.s, m.idx) FROM merged AS m),
               (SELECT array_agg(m.off ORDER BY m.s, m.idx) FROM merged AS m),
               (SELECT array_agg(v_unrolled[g.s] + coalesce(k.n, 0) ORDER BY g.s)
                  FROM generate_subscripts(p_pids, 1) AS g(s)
                  LEFT JOIN (SELECT c.s, count(*) AS n FROM c GROUP BY c.s) AS k ON k.s = g.s)
          INTO d_s, d_idx, d_off, v_unrolled;
    END IF;

    -- Some hash is repeated: frames with a stored duplicate or a repeat
    -- within themselves (window on) are classified message by message. A
    -- stored duplicate keeps its original's offset, a repeat follows the
    -- first occurrence of its hash, and the new leaders take contiguous
    -- offsets in frame order: the duplicates found become every message
    -- that is not a new leader, with the offset it answers, and the frames
    -- are then written as in a bundle without repeats.
    IF NOT v_unique THEN
        SELECT ARRAY(SELECT DISTINCT d.s FROM unnest(d_s) AS d(s)) INTO v_dirty;
        SELECT v_dirty || ARRAY(
            SELECT fs.s FROM generate_subscripts(p_pids, 1) AS fs(s)
             WHERE v_win[fs.s] > 0 AND p_counts[fs.s] > 1 AND NOT fs.s = ANY (v_dirty)
               AND (SELECT count(DISTINCT h) FROM unnest(p_hashes[v_pos[fs.s] : v_pos[fs.s] + p_counts[fs.s] - 1]) AS h)
                   < p_counts[fs.s])
          INTO v_dirty;
        WITH fr AS (
            SELECT s, v_last[s] AS last, v_pos[s] AS pos, p_counts[s] AS n
              FROM unnest(v_dirty) AS s
        ), msg AS ( -- the messages of dirty frames, with their stored original if any
            SELECT fr.s, (i - fr.pos + 1)::integer AS idx, p_hashes[i] AS h, fr.last, d.off AS stored
              FROM fr CROSS JOIN LATERAL generate_series(fr.pos, fr.pos + fr.n - 1) AS i
              LEFT JOIN unnest(d_s, d_idx, d_off) AS d(s, idx, off) ON d.s = fr.s AND d.idx = i - fr.pos + 1
        ), cls AS ( -- a repeat follows the first occurrence of its hash in the frame
            SELECT msg.*, min(msg.idx) OVER (PARTITION BY msg.s, msg.h) AS leader FROM msg
        ), fresh AS ( -- new leaders take the next offsets, in frame order
            SELECT cls.s, cls.idx, cls.last + row_number() OVER (PARTITION BY cls.s ORDER BY cls.idx) AS off
              FROM cls WHERE cls.stored IS NULL AND cls.leader = cls.idx
        ), dups AS ( -- everything else answers with its original's offset
            SELECT cls.s, cls.idx, coalesce(cls.stored, fl.off) AS off
              FROM cls
              LEFT JOIN fresh AS fs ON fs.s = cls.s AND fs.idx = cls.idx
              LEFT JOIN fresh AS fl ON fl.s = cls.s AND fl.idx = cls.leader
             WHERE fs.idx IS NULL
        )
        SELECT array_agg(dups.s ORDER BY dups.s, dups.idx), array_agg(dups.idx ORDER BY dups.s, dups.idx),
               array_agg(dups.off ORDER BY dups.s, dups.idx)
          INTO d_s, d_idx, d_off
          FROM dups;
    END IF;

    -- Every frame is written by this one statement: a frame without
    -- duplicates as sent, one with duplicates its other messages, at
    -- contiguous offsets in frame order.
    RETURN QUERY
    WITH dd AS ( -- each frame's duplicates
        SELECT d.s, array_agg(d.idx ORDER BY d.idx) AS idx, array_agg(d.off ORDER BY d.idx) AS off
          FROM unnest(d_s, d_idx, d_off) AS d(s, idx, off) GROUP BY d.s
    ), fr AS (
        SELECT g.s, p_pids[g.s] AS pid, v_last[g.s] AS last, v_pos[g.s] AS pos, p_counts[g.s] AS n,
               v_dpos[g.s] AS dpos, v_keepdh[g.s] AS keepdh, v_mpos[g.s] AS mpos, v_mcounts[g.s] <> 0 AS hasmeta,
               v_mcounts[g.s] = -1 AS onemeta,
               dd.idx AS dup_idx, dd.off AS dup_off
          FROM generate_subscripts(p_pids, 1) AS g(s) LEFT JOIN dd ON dd.s = g.s
    ), dirty AS MATERIALIZED ( -- frames with a duplicate: their new messages, gathered once
        SELECT fr.s, fr.pid, fr.last + 1 AS base, x.k, x.txn_ids, x.hashes, x.data, x.bytes, x.data_hashes, x.meta
          FROM fr CROSS JOIN LATERAL (
                   SELECT count(*) AS k, array_agg(p_txn_ids[i]) AS txn_ids, array_agg(p_hashes[i]) AS hashes,
                          array_agg(p_data[i]) AS data, sum(octet_length(p_data[i]::text))::bigint AS bytes,
                          CASE WHEN fr.keepdh THEN array_agg(p_data_hashes[fr.dpos + i - fr.pos]) END AS data_hashes,
                          -- (one aggregate over i: one of the outer frame's
                          -- columns alone would make it the outer query's)
                          CASE WHEN fr.hasmeta
                               THEN array_agg(p_meta[CASE WHEN fr.onemeta THEN fr.mpos ELSE fr.mpos + i - fr.pos END]) END AS meta
                     FROM generate_series(fr.pos, fr.pos + fr.n - 1) AS i
                    WHERE i - fr.pos + 1 <> ALL (fr.dup_idx)) AS x
         WHERE fr.dup_idx IS NOT NULL AND x.k > 0
    ), kept AS ( -- what each frame writes; a clean frame's slices are taken
                 -- where they are used, not copied into a CTE first
        SELECT fr.s, fr.pid, fr.last + 1 AS base, fr.n::bigint AS k, p_txn_ids[fr.pos : fr.pos + fr.n - 1] AS txn_ids,
               p_hashes[fr.pos : fr.pos + fr.n - 1] AS hashes, p_data[fr.pos : fr.pos + fr.n - 1] AS data,
               p_bytes[fr.s] AS bytes,
               CASE WHEN fr.keepdh THEN p_data_hashes[fr.dpos : fr.dpos + fr.n - 1] END AS data_hashes,
               CASE WHEN fr.onemeta THEN array_fill(p_meta[fr.mpos], ARRAY[fr.n])
                    WHEN fr.hasmeta THEN p_meta[fr.mpos : fr.mpos + fr.n - 1] END AS meta
          FROM fr WHERE fr.dup_idx IS NULL
        UNION ALL
        SELECT dirty.s, dirty.pid, dirty.base, dirty.k, dirty.txn_ids, dirty.hashes, dirty.data, dirty.bytes,
               dirty.data_hashes, dirty.meta FROM dirty
    ), alloc AS (
        UPDATE queen.log_partitions p
           SET last_offset = kept.base + kept.k - 1, stored_bytes = p.stored_bytes + kept.bytes
          FROM kept WHERE p.id = kept.pid AND p.id = ANY (p_pids)
    ), frames AS (
        -- One row per frame, its hashes beside its data; written whatever
        -- the window: ack-by-transactionId resolves through them.
        INSERT INTO queen.log_segments (partition_id, base_offset, end_offset, created_at, txn_ids, data, data_bytes,
                                        hashes, data_hashes, meta)
        SELECT kept.pid, kept.base, kept.base + kept.k - 1, v_now, kept.txn_ids, kept.data, kept.bytes,
               kept.hashes, kept.data_hashes, kept.meta FROM kept
    )
    SELECT fr.s::integer, kept.base, coalesce(kept.base + kept.k - 1, fr.last), v_probe[fr.s], v_unrolled[fr.s],
           fr.dup_idx, fr.dup_off, v_mode[fr.s], v_now
      FROM fr LEFT JOIN kept ON kept.s = fr.s;
END
$$;
