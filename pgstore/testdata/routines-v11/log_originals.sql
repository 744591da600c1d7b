-- log_originals returns, for each of p_offsets in partition p_pid, what a
-- payload-conflict check compares: the data hash stored beside the
-- transactionId's hash, or, where the row has none (written while the
-- queue ignored conflicts), the data itself. An offset whose message is
-- gone (retention) returns nothing. One primary-key probe per offset and
-- table; a plain snapshot read that takes no lock.
CREATE OR REPLACE FUNCTION queen.log_originals(p_pid bigint, p_offsets bigint[])
-- (meta is not the previous release's: this build's interface, so that
-- this build reads it; that release stored none.)
RETURNS TABLE (off bigint, data_hash uuid, data json, meta text)
LANGUAGE sql STABLE AS $$
    SELECT o.off, t.data_hashes[o.off - t.base_offset + 1],
           CASE WHEN t.data_hashes IS NULL THEN
               (SELECT s.data[o.off - s.base_offset + 1] FROM queen.log_segments s
                 WHERE s.partition_id = p_pid AND s.base_offset <= o.off
                 ORDER BY s.base_offset DESC LIMIT 1) END,
           NULL::text
      FROM unnest(p_offsets) AS o(off)
      CROSS JOIN LATERAL (SELECT t.base_offset, t.data_hashes FROM queen.log_txns t
                           WHERE t.partition_id = p_pid AND t.end_offset >= o.off
                           ORDER BY t.end_offset LIMIT 1) AS t
     WHERE t.base_offset <= o.off
$$;
