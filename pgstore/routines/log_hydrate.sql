-- log_hydrate reads what a gateway's dedup cache is built from, for each
-- partition of p_pids, all in one snapshot: the allocator, txns_start, the
-- window, PostgreSQL's clock, and the stored frames' hashes a cache entry needs
-- (one result row each, in offset order; one row with NULL base_offset for
-- a partition with none). With p_above NULL those are every row created
-- within the window plus p_slack_seconds (a full hydration: the caller's
-- clock-skew slack); otherwise every row stored above offset p_above,
-- whatever its age (a fill: what an entry missed since it last knew
-- everything). A partition that does not exist has no row. The window
-- arithmetic is in double precision: in integer, windows near the maximum
-- overflowed. The rows are read partition by partition through the
-- (partition_id, …) indexes, in a lateral subquery kept apart (OFFSET 0),
-- whatever the planner estimates of the array.
CREATE OR REPLACE FUNCTION queen.log_hydrate(p_pids bigint[], p_above bigint, p_slack_seconds double precision)
RETURNS TABLE (partition_id bigint, last_offset bigint, txns_start bigint, dedup_window_seconds integer,
               db_now timestamptz, base_offset bigint, end_offset bigint, created_at timestamptz, hashes uuid[])
LANGUAGE sql STABLE AS $$
    SELECT lp.id, lp.last_offset, lp.txns_start, q.dedup_window_seconds, now(),
           t.base_offset, t.end_offset, t.created_at, t.hashes
      FROM queen.log_partitions lp
      JOIN queen.queues q ON q.id = lp.queue_id
      LEFT JOIN LATERAL (
          SELECT t.base_offset, t.end_offset, t.created_at, t.hashes
            FROM queen.log_hashes(lp.id, p_above, lp.txns_start, lp.txns_end) AS t
           WHERE CASE WHEN p_above IS NULL
                      THEN t.created_at >= now() - make_interval(secs => q.dedup_window_seconds::double precision + p_slack_seconds)
                      ELSE t.end_offset > p_above END
          OFFSET 0) AS t ON true
     WHERE lp.id = ANY (p_pids)
     ORDER BY lp.id, t.end_offset
$$;
