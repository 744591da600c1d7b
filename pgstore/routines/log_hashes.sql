-- log_hashes are the frames of partition p_pid holding offsets above
-- p_after, with their transactionId hashes and data hashes (NULL: none
-- kept), wherever they are kept (migration 020): in log_txns for frames
-- up to the partition's txns_end (p_txns_end: frames whose data a purge
-- or retention removed, and those stored before the migration), beside
-- the data in log_segments for the later ones. Each frame is in one of
-- the two. Nothing below the partition's txns_start (p_txns_start) is
-- returned: retention retired those transactionIds, though it leaves
-- their hashes beside the data. A plain SQL function, inlined into its
-- callers' plans: each table is read by key, log_txns not at all when
-- p_after is at or above txns_end.
CREATE OR REPLACE FUNCTION queen.log_hashes(p_pid bigint, p_after bigint, p_txns_start bigint, p_txns_end bigint)
RETURNS TABLE (base_offset bigint, end_offset bigint, created_at timestamptz, hashes uuid[], data_hashes uuid[])
LANGUAGE sql STABLE AS $$
    SELECT t.base_offset, t.end_offset, t.created_at, t.hashes, t.data_hashes
      FROM queen.log_txns t
     WHERE greatest(p_after, p_txns_start - 1) < p_txns_end AND t.partition_id = p_pid
       AND t.end_offset > greatest(p_after, p_txns_start - 1)
    UNION ALL
    SELECT s.base_offset, s.end_offset, s.created_at, s.hashes, s.data_hashes
      FROM queen.log_segments s
     WHERE s.partition_id = p_pid AND s.hashes IS NOT NULL AND s.end_offset > greatest(p_after, p_txns_start - 1)
       -- frames are contiguous: those ending above the bound start at
       -- the one holding the bound + 1 or later
       AND s.base_offset >= coalesce((SELECT max(f.base_offset) FROM queen.log_segments f
                                       WHERE f.partition_id = p_pid AND f.base_offset <= greatest(p_after + 1, p_txns_start)), 0)
$$;
