-- consumer_redriven records that the dead letters at p_offsets of
-- dead-letter partition p_partition_id were pushed back to their
-- original partition, in the redrive's transaction: they are done for
-- the dead-letter queue's group p_group_id (model.RedriveGroup), and its
-- cursor advances over them, so no later redrive finds them again.
-- Returns the cursor after.
--
-- Lock order (LOCKS.md): the caller took the group's cursor row FOR
-- UPDATE first (consumer_dead_letter_pending), then the original
-- partition's row through log_push_bundle: cursor row before partition
-- row, as dead-lettering takes them. Nothing here takes another row.
CREATE OR REPLACE FUNCTION queen.consumer_redriven(p_group_id bigint, p_partition_id bigint, p_offsets bigint[])
RETURNS bigint
LANGUAGE plpgsql
-- Planned once per session: re-planning each statement on every call
-- (what the default chooses for them) cost more than running them.
SET plan_cache_mode = force_generic_plan
AS $$
BEGIN
    -- Nothing is delivered to this group: the redriven offsets count as
    -- delivered, so that the cursor may advance over them.
    UPDATE queen.consumer_cursors c
       SET delivered_to = greatest(c.delivered_to, (SELECT max(o) FROM unnest(p_offsets) AS o))
     WHERE c.group_id = p_group_id AND c.partition_id = p_partition_id;
    RETURN (SELECT d.next_offset FROM queen.consumer_dead_lettered(p_group_id, p_partition_id, p_offsets) AS d);
END
$$;
