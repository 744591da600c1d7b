-- log_hash_frame is the frame of partition p_pid holding offset p_off,
-- with its transactionId hashes and data hashes, from where they are
-- kept (queen.log_hashes): log_txns at or below the partition's txns_end
-- (p_txns_end), log_segments above it. No row when the frame is gone,
-- or below txns_start (p_txns_start: its transactionIds are retired). One
-- primary-key probe of one table; inlined into its callers' plans.
CREATE OR REPLACE FUNCTION queen.log_hash_frame(p_pid bigint, p_off bigint, p_txns_start bigint, p_txns_end bigint)
RETURNS TABLE (base_offset bigint, end_offset bigint, created_at timestamptz, hashes uuid[], data_hashes uuid[])
LANGUAGE sql STABLE AS $$
    SELECT f.base_offset, f.end_offset, f.created_at, f.hashes, f.data_hashes
      FROM ((SELECT t.base_offset, t.end_offset, t.created_at, t.hashes, t.data_hashes
               FROM queen.log_txns t
              WHERE p_off >= p_txns_start AND p_off <= p_txns_end AND t.partition_id = p_pid AND t.end_offset >= p_off
              ORDER BY t.end_offset LIMIT 1)
            UNION ALL
            (SELECT s.base_offset, s.end_offset, s.created_at, s.hashes, s.data_hashes
               FROM queen.log_segments s
              WHERE p_off >= p_txns_start AND p_off > p_txns_end AND s.partition_id = p_pid AND s.base_offset <= p_off
              ORDER BY s.base_offset DESC LIMIT 1)) AS f
     WHERE f.base_offset <= p_off AND f.end_offset >= p_off
$$;
