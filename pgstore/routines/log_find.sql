-- log_find is the verification read of a push whose outcome is unknown
-- (the connection broke after the statement was sent; pgstore/outcome.go):
-- for each of p_hashes stored in the partition within the queue's window,
-- its earliest offset; with the window and the allocator, in one
-- snapshot. It unrolls the whole window, as a full probe does: it runs
-- only after a fault.
CREATE OR REPLACE FUNCTION queen.log_find(p_pid bigint, p_hashes uuid[])
RETURNS TABLE (dedup_window_seconds integer, last_offset bigint, h uuid, first_offset bigint)
LANGUAGE sql STABLE AS $$
    WITH p AS (
        SELECT q.dedup_window_seconds, lp.last_offset, lp.txns_start, lp.txns_end
          FROM queen.log_partitions lp JOIN queen.queues q ON q.id = lp.queue_id
         WHERE lp.id = p_pid
    ), found AS (
        SELECT th.h, min(t.base_offset + th.idx - 1) AS first_offset
          FROM p CROSS JOIN LATERAL queen.log_hashes(p_pid, -1, p.txns_start, p.txns_end) AS t
         CROSS JOIN LATERAL queen.log_unnest_hashes(t.hashes) th
         WHERE t.created_at >= now() - make_interval(secs => p.dedup_window_seconds::double precision)
           AND th.h = ANY (p_hashes)
         GROUP BY th.h
    )
    SELECT p.dedup_window_seconds, p.last_offset, found.h, found.first_offset
      FROM p LEFT JOIN found ON true
$$;
