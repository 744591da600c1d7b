-- consumer_written_since says whether frames (of any queue) were written
-- at or above group p_group_id's woken_to, read without a lock: when
-- not, no parked cursor of the group can have work it was not woken
-- for (a wake that moved woken_to past a frame committed with it the
-- unparking of the frame's cursor).
CREATE OR REPLACE FUNCTION queen.consumer_written_since(p_group_id bigint)
RETURNS boolean
LANGUAGE sql STABLE
SET plan_cache_mode = force_generic_plan
SET enable_seqscan = off
AS $$
    SELECT EXISTS (SELECT 1 FROM queen.log_segments s
                    WHERE s.pushed_by >= (SELECT g.woken_to FROM queen.consumer_groups g WHERE g.id = p_group_id));
$$;
