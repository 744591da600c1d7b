-- log_read returns the segments of partition p_pid holding offsets from
-- p_from on, in offset order, at most p_segments of them, each trimmed
-- to start at p_from: only what a reader asked for crosses the wire
-- (PostgreSQL still decompresses a whole frame to slice it). A plain
-- snapshot read: it takes no lock, so readers never wait for pushes nor
-- make them wait.
CREATE OR REPLACE FUNCTION queen.log_read(p_pid bigint, p_from bigint, p_segments integer)
RETURNS TABLE (base_offset bigint, created_at timestamptz, txn_ids text[], data json[], meta text[])
LANGUAGE sql STABLE AS $$
    SELECT greatest(s.base_offset, p_from),
           s.created_at,
           CASE WHEN s.base_offset >= p_from THEN s.txn_ids ELSE s.txn_ids[p_from - s.base_offset + 1:] END,
           CASE WHEN s.base_offset >= p_from THEN s.data ELSE s.data[p_from - s.base_offset + 1:] END,
           CASE WHEN s.base_offset >= p_from THEN s.meta ELSE s.meta[p_from - s.base_offset + 1:] END
      FROM queen.log_segments s
     WHERE s.partition_id = p_pid
       -- From the segment holding p_from, on the primary key's order (a
       -- filter on end_offset alone would scan the partition from 0).
       AND s.base_offset >= coalesce((SELECT max(b.base_offset) FROM queen.log_segments b
                                       WHERE b.partition_id = p_pid AND b.base_offset <= p_from), p_from)
       AND s.end_offset >= p_from
     ORDER BY s.base_offset
     LIMIT p_segments
$$;
