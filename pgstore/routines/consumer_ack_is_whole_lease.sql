-- consumer_ack_is_whole_lease says whether an ack's items (consumer_ack's
-- p_offsets, p_hashes and p_completed) complete, in order, every message
-- of the lease spanning offsets p_from to p_to on partition
-- p_partition_id: all by offset, each the next one, or all by
-- transactionId, each the hash of the next message's, no two alike. For
-- a lease that starts at the cursor, with no marks on the partition,
-- consumer_ack's full path would then resolve item i to offset
-- p_from + i - 1 (the lowest offset from the cursor on with that hash)
-- and answer acked for each: it takes its fast path instead. Anything
-- else (a message missing, failed, named twice, a hash not found, mixed
-- items) answers false, and the full path decides.
--
-- Lock order (LOCKS.md): nothing; stored hashes are read.
CREATE OR REPLACE FUNCTION queen.consumer_ack_is_whole_lease(p_partition_id bigint, p_from bigint, p_to bigint,
    p_offsets bigint[], p_hashes uuid[], p_completed boolean[])
RETURNS boolean
-- PL/pgSQL, not SQL: its plans are kept for the session, where a SQL
-- function called from an expression is planned again on every call.
LANGUAGE plpgsql STABLE AS $$
BEGIN
    RETURN cardinality(p_completed) = p_to - p_from + 1
       AND array_position(p_completed, false) IS NULL
       AND CASE
           WHEN array_position(p_hashes, NULL) IS NULL THEN
                p_hashes = (SELECT array_agg(u.h ORDER BY t.base_offset, u.k)
                              FROM queen.log_partitions lp
                             CROSS JOIN LATERAL queen.log_hashes(lp.id, p_from - 1, lp.txns_start, lp.txns_end) AS t
                             CROSS JOIN LATERAL unnest(t.hashes[greatest(p_from - t.base_offset + 1, 1) : least(p_to, t.end_offset) - t.base_offset + 1])
                                   WITH ORDINALITY AS u(h, k)
                             WHERE lp.id = p_partition_id AND t.base_offset <= p_to)
                AND (SELECT count(DISTINCT h) FROM unnest(p_hashes) AS h) = cardinality(p_hashes)
           WHEN array_position(p_offsets, NULL) IS NULL THEN
                p_offsets = ARRAY(SELECT generate_series(p_from, p_to))
           ELSE false END;
END
$$;
