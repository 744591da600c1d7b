-- consumer_pop_slice answers consumer_pop's usual case without unrolling
-- a row per message: messages p_lo to p_hi of partition p_partition_id,
-- held by one frame or two that follow each other, as slices of their
-- arrays (offsets, transactionIds, data, and each frame's created_at for
-- its messages; meta, NULL when neither frame has any), when an upper bound of what they take in a pop's answer
-- fits p_budget: the slices' sizes (each element's octets and more), six
-- times over for the escaped transactionIds, and p_envelope per message.
-- consumer_pop's byte bound would then keep them all, none too large. No
-- row when they span more frames or may not fit: consumer_pop then takes
-- its full path.
--
-- Lock order (LOCKS.md): nothing; segment rows are read.
CREATE OR REPLACE FUNCTION queen.consumer_pop_slice(p_partition_id bigint, p_lo bigint, p_hi bigint, p_envelope integer,
    p_budget bigint)
RETURNS TABLE (offs bigint[], txn_ids text[], data json[], created_at timestamptz[], meta text[])
LANGUAGE sql STABLE AS $$
    SELECT ARRAY(SELECT generate_series(p_lo, p_hi)), x.txn_ids, x.data, x.created_at, x.meta
      FROM (SELECT a.txn_ids[p_lo - a.base_offset + 1 : least(p_hi, a.end_offset) - a.base_offset + 1]
                   || coalesce(b.txn_ids[1 : p_hi - b.base_offset + 1], '{}') AS txn_ids,
                   a.data[p_lo - a.base_offset + 1 : least(p_hi, a.end_offset) - a.base_offset + 1]
                   || coalesce(b.data[1 : p_hi - b.base_offset + 1], '{}') AS data,
                   array_fill(a.created_at, ARRAY[(least(p_hi, a.end_offset) - p_lo + 1)::integer])
                   || CASE WHEN b.base_offset IS NULL THEN '{}'
                           ELSE array_fill(b.created_at, ARRAY[(p_hi - b.base_offset + 1)::integer]) END AS created_at,
                   -- a frame without meta stands for as many NULLs as it gives messages
                   CASE WHEN a.meta IS NOT NULL OR b.meta IS NOT NULL THEN
                       coalesce(a.meta[p_lo - a.base_offset + 1 : least(p_hi, a.end_offset) - a.base_offset + 1],
                                array_fill(NULL::text, ARRAY[(least(p_hi, a.end_offset) - p_lo + 1)::integer]))
                       || CASE WHEN b.base_offset IS NULL THEN '{}'
                               ELSE coalesce(b.meta[1 : p_hi - b.base_offset + 1],
                                             array_fill(NULL::text, ARRAY[(p_hi - b.base_offset + 1)::integer])) END
                   END AS meta
              FROM (SELECT s.base_offset, s.end_offset, s.txn_ids, s.data, s.created_at, s.meta
                      FROM queen.log_segments s
                     WHERE s.partition_id = p_partition_id AND s.base_offset <= p_lo
                     ORDER BY s.base_offset DESC LIMIT 1) AS a
              LEFT JOIN queen.log_segments b
                ON a.end_offset < p_hi AND b.partition_id = p_partition_id AND b.base_offset = a.end_offset + 1
             WHERE a.end_offset >= p_lo AND (a.end_offset >= p_hi OR b.end_offset >= p_hi)) AS x
     WHERE pg_column_size(x.data) + coalesce(pg_column_size(x.meta), 0) + 6 * pg_column_size(x.txn_ids)
           + (p_hi - p_lo + 1) * p_envelope <= p_budget
$$;
