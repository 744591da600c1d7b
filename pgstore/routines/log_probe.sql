-- log_probe finds which of p_hashes are stored in the partition's window
-- above p_from, with the offset of the first occurrence of each (MIN picks
-- the original when several stored rows match).
CREATE OR REPLACE FUNCTION queen.log_probe(p_pid bigint, p_from bigint, p_now timestamptz, p_window integer,
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
