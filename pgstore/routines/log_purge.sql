-- log_purge is one step of purging partition p_partition_id: under the
-- partition's row lock it deletes up to p_limit of its frames at or
-- below offset p_upto (the allocator when the purge began), oldest
-- first, lowers stored_bytes by their data and raises segments_start
-- past them. It answers the messages
-- and bytes deleted and whether frames at or below p_upto may be left
-- (the caller steps again). consumer_purge ends the purge.
--
-- Lock order (LOCKS.md): the partition row FOR UPDATE, as a retention
-- step takes it; held for one step (p_limit frames), so a push waits for
-- one step at most. Frames above p_upto (pushed since the purge began)
-- are kept.
CREATE OR REPLACE FUNCTION queen.log_purge(p_partition_id bigint, p_upto bigint, p_limit integer)
RETURNS TABLE (messages bigint, bytes bigint, more boolean)
LANGUAGE plpgsql AS $$
#variable_conflict use_column
DECLARE
    v_segs  bigint;
    v_msgs  bigint;
    v_bytes bigint;
    v_end   bigint;
    v_tstart bigint;
BEGIN
    SELECT p.txns_start INTO v_tstart FROM queen.log_partitions p WHERE p.id = p_partition_id FOR UPDATE;
    WITH gone AS (
        DELETE FROM queen.log_segments s
         WHERE s.partition_id = p_partition_id
           AND s.base_offset IN (SELECT s2.base_offset FROM queen.log_segments s2
                                  WHERE s2.partition_id = p_partition_id AND s2.end_offset <= p_upto
                                  ORDER BY s2.base_offset LIMIT p_limit)
        RETURNING s.partition_id, s.base_offset, s.end_offset, s.created_at, s.hashes, s.data_hashes, s.data_bytes
    ), kept AS (
        -- The transactionIds stay for the window (consumer_purge): the
        -- hashes of the frames deleted move to log_txns.
        INSERT INTO queen.log_txns (partition_id, base_offset, end_offset, created_at, hashes, data_hashes)
        SELECT gone.partition_id, gone.base_offset, gone.end_offset, gone.created_at, gone.hashes, gone.data_hashes
          FROM gone WHERE gone.hashes IS NOT NULL AND gone.end_offset >= v_tstart
    )
    SELECT count(*), coalesce(sum(gone.end_offset - gone.base_offset + 1), 0), coalesce(sum(gone.data_bytes), 0),
           max(gone.end_offset)
      INTO v_segs, v_msgs, v_bytes, v_end FROM gone;
    -- A prefix is gone: segments_start moves past it, and txns_end (the
    -- frames whose hashes log_txns holds) up to it.
    UPDATE queen.log_partitions p
       SET stored_bytes = greatest(p.stored_bytes - v_bytes, 0), segments_start = greatest(p.segments_start, v_end + 1),
           txns_end = greatest(p.txns_end, v_end)
     WHERE p.id = p_partition_id AND v_segs > 0;
    RETURN QUERY SELECT v_msgs, v_bytes, v_segs = p_limit;
END
$$;
