-- consumer_dead_letter_pending locks group p_group_id's cursor row on
-- partition p_partition_id and returns which of p_offsets still wait to
-- be dead-lettered: at or above the cursor and not done. The caller then
-- pushes exactly those to the dead-letter queue and records them with
-- consumer_dead_lettered, before committing: each message is
-- dead-lettered once per group, however many pops and acks found it.
CREATE OR REPLACE FUNCTION queen.consumer_dead_letter_pending(p_group_id bigint, p_partition_id bigint, p_offsets bigint[])
RETURNS SETOF bigint
LANGUAGE plpgsql
-- Planned once per session: re-planning each statement on every call
-- (what the default chooses for them) cost more than running them.
SET plan_cache_mode = force_generic_plan
AS $$
DECLARE
    v_next bigint;
BEGIN
    SELECT c.next_offset INTO v_next FROM queen.consumer_cursors c
     WHERE c.group_id = p_group_id AND c.partition_id = p_partition_id
       FOR UPDATE;
    RETURN QUERY
        SELECT DISTINCT o FROM unnest(p_offsets) AS o
         WHERE o >= v_next
           AND NOT EXISTS (SELECT 1 FROM queen.consumer_marks m
                            WHERE m.group_id = p_group_id AND m.partition_id = p_partition_id AND m.off = o AND m.done)
         ORDER BY o;
END
$$;
