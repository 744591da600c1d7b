-- log_drop is one step of deleting the frames of deleted queues
-- (queue_delete lists their partitions in queen.dropped_partitions): it
-- takes one listed partition, SKIP LOCKED (another gateway's step takes
-- another): one of p_pids, the delete's own, or (p_pids NULL: a
-- retention pass finishing a delete that stopped midway) one listed at
-- least p_min_age seconds ago, deletes up to p_limit of its log_segments rows and up to
-- p_limit of its log_txns rows, and strikes it from the list once none
-- is left. It answers the partition (NULL: nothing listed is free), the
-- messages and rows deleted, and whether it struck the partition.
--
-- Lock order (LOCKS.md): the one dropped_partitions row and nothing
-- else that anyone waits on: the partition row is gone, so no push,
-- fire, pop or retention step reaches these frames any more.
CREATE OR REPLACE FUNCTION queen.log_drop(p_pids bigint[], p_min_age double precision, p_limit integer)
RETURNS TABLE (partition_id bigint, messages bigint, segments bigint, txns bigint, done boolean)
LANGUAGE plpgsql AS $$
#variable_conflict use_column
DECLARE
    v_pid  bigint;
    v_msgs bigint;
    v_segs bigint;
    v_txns bigint;
BEGIN
    SELECT d.partition_id INTO v_pid FROM queen.dropped_partitions d
     WHERE (p_pids IS NULL AND d.dropped_at <= now() - make_interval(secs => p_min_age))
        OR d.partition_id = ANY (p_pids)
     ORDER BY d.partition_id LIMIT 1 FOR UPDATE SKIP LOCKED;
    IF NOT FOUND THEN
        RETURN QUERY SELECT NULL::bigint, 0::bigint, 0::bigint, 0::bigint, false;
        RETURN;
    END IF;
    WITH gone AS (
        DELETE FROM queen.log_segments s
         WHERE s.partition_id = v_pid
           AND s.base_offset IN (SELECT s2.base_offset FROM queen.log_segments s2 WHERE s2.partition_id = v_pid
                                  ORDER BY s2.base_offset LIMIT p_limit)
        RETURNING s.end_offset - s.base_offset + 1 AS n
    )
    SELECT count(*), coalesce(sum(gone.n), 0) INTO v_segs, v_msgs FROM gone;
    WITH gone AS (
        DELETE FROM queen.log_txns t
         WHERE t.partition_id = v_pid
           AND t.end_offset IN (SELECT t2.end_offset FROM queen.log_txns t2 WHERE t2.partition_id = v_pid
                                 ORDER BY t2.end_offset LIMIT p_limit)
        RETURNING 1
    )
    SELECT count(*) INTO v_txns FROM gone;
    IF v_segs < p_limit AND v_txns < p_limit THEN
        DELETE FROM queen.dropped_partitions d WHERE d.partition_id = v_pid;
    END IF;
    RETURN QUERY SELECT v_pid, v_msgs, v_segs, v_txns, v_segs < p_limit AND v_txns < p_limit;
END
$$;
