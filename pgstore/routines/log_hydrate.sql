-- log_hydrate reads what a gateway's dedup cache is built from, in one
-- snapshot: the allocator, txns_start, the window, PostgreSQL's clock, and
-- the log_txns rows a cache entry needs. With p_above NULL those are every
-- row created within the window plus p_slack_seconds (a full hydration:
-- the caller's clock-skew slack); otherwise
-- every row stored above offset p_above, whatever its age (a fill: what an
-- entry missed since it last knew everything). The window arithmetic is in
-- double precision: in integer, windows near the maximum overflowed.
CREATE OR REPLACE FUNCTION queen.log_hydrate(p_pid bigint, p_above bigint, p_slack_seconds double precision)
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
       AND CASE WHEN p_above IS NULL
                THEN t.created_at >= now() - make_interval(secs => p.dedup_window_seconds::double precision + p_slack_seconds)
                ELSE t.end_offset > p_above END
     ORDER BY t.end_offset
$$;
