-- log_originals returns, for each of p_offsets in partition p_pid, what a
-- payload-conflict check compares: the data hash stored beside the
-- transactionId's hash, or, where the row has none (written while the
-- queue ignored conflicts), the data itself and its meta (binary data is
-- compared by its bytes, docs/design.md "A message's meta"). An offset whose message is
-- gone (retention) returns nothing. One primary-key probe per offset and
-- table; a plain snapshot read that takes no lock.
CREATE OR REPLACE FUNCTION queen.log_originals(p_pid bigint, p_offsets bigint[])
RETURNS TABLE (off bigint, data_hash uuid, data json, meta text)
LANGUAGE sql STABLE AS $$
    SELECT o.off, t.data_hashes[o.off - t.base_offset + 1], m.data, m.meta
      FROM unnest(p_offsets) AS o(off)
      CROSS JOIN queen.log_partitions lp
      CROSS JOIN LATERAL queen.log_hash_frame(lp.id, o.off, lp.txns_start, lp.txns_end) AS t
      LEFT JOIN LATERAL (SELECT s.data[o.off - s.base_offset + 1] AS data, s.meta[o.off - s.base_offset + 1] AS meta
                           FROM queen.log_segments s
                          WHERE t.data_hashes IS NULL AND s.partition_id = p_pid AND s.base_offset <= o.off
                          ORDER BY s.base_offset DESC LIMIT 1) AS m ON true
     WHERE lp.id = p_pid
$$;
