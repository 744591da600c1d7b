-- consumer_pop_slice answers consumer_pop's usual case without unrolling
-- a row per message: messages p_lo to p_hi of partition p_partition_id,
-- all in one frame, as slices of its arrays (offsets, transactionIds,
-- data, and the frame's created_at for each), when an upper bound of
-- what they take in a pop's answer fits p_budget: the slices' sizes
-- (each element's octets and more), six times over for the escaped
-- transactionIds, and p_envelope per message. consumer_pop's byte bound
-- would then keep them all, none too large. No row when they span frames
-- or may not fit: consumer_pop then takes its full path.
--
-- Lock order (LOCKS.md): nothing; a segment row is read.
CREATE OR REPLACE FUNCTION queen.consumer_pop_slice(p_partition_id bigint, p_lo bigint, p_hi bigint, p_envelope integer,
    p_budget bigint)
RETURNS TABLE (offs bigint[], txn_ids text[], data json[], created_at timestamptz[])
LANGUAGE sql STABLE AS $$
    SELECT ARRAY(SELECT generate_series(p_lo, p_hi)), x.txn_ids, x.data, array_fill(x.created_at, ARRAY[(p_hi - p_lo + 1)::integer])
      FROM (SELECT s.txn_ids[p_lo - s.base_offset + 1 : p_hi - s.base_offset + 1] AS txn_ids,
                   s.data[p_lo - s.base_offset + 1 : p_hi - s.base_offset + 1] AS data, s.created_at
              FROM queen.log_segments s
             WHERE s.partition_id = p_partition_id AND s.base_offset <= p_lo AND s.end_offset >= p_hi
             ORDER BY s.base_offset DESC LIMIT 1) AS x
     WHERE pg_column_size(x.data) + 6 * pg_column_size(x.txn_ids) + (p_hi - p_lo + 1) * p_envelope <= p_budget
$$;
