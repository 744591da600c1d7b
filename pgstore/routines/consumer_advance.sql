-- consumer_advance moves group p_group_id's cursor on partition
-- p_partition_id over every offset that is done: marked done, or in
-- p_done (completed now, not marked). It deletes the marks it passes and
-- returns the new cursor. The caller holds the cursor row's lock.
CREATE OR REPLACE FUNCTION queen.consumer_advance(p_group_id bigint, p_partition_id bigint, p_done bigint[])
RETURNS bigint
LANGUAGE plpgsql
-- Planned once per session: re-planning each statement on every call
-- (what the default chooses for them) cost more than running them.
SET plan_cache_mode = force_generic_plan
AS $$
#variable_conflict use_column
DECLARE
    v_next bigint;
    v_to   bigint;
BEGIN
    SELECT c.next_offset, c.delivered_to INTO v_next, v_to
      FROM queen.consumer_cursors c WHERE c.group_id = p_group_id AND c.partition_id = p_partition_id;
    -- The first offset from the cursor that is not done (at most one past
    -- the last delivered).
    SELECT min(g.o) INTO v_next
      FROM generate_series(v_next, greatest(v_next, v_to + 1)) AS g(o)
      LEFT JOIN (SELECT DISTINCT d FROM unnest(p_done) AS d) AS d ON d.d = g.o
      LEFT JOIN queen.consumer_marks m
        ON m.group_id = p_group_id AND m.partition_id = p_partition_id AND m.off = g.o AND m.done
     WHERE d.d IS NULL AND m.off IS NULL;
    DELETE FROM queen.consumer_marks m
     WHERE m.group_id = p_group_id AND m.partition_id = p_partition_id AND m.off < v_next;
    UPDATE queen.consumer_cursors c SET next_offset = v_next
     WHERE c.group_id = p_group_id AND c.partition_id = p_partition_id AND c.next_offset <> v_next;
    RETURN v_next;
END
$$;
