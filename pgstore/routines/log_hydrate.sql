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
