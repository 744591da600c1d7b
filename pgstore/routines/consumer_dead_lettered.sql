-- consumer_dead_lettered records that group p_group_id's messages at
-- p_offsets of partition p_partition_id were moved to the dead-letter
-- queue, in the transaction of the pop or ack that found them (which
-- holds the cursor row): they are done for the group, and the cursor
-- advances over them. A lease whose messages are now all settled ends.
-- Returns the cursor after, and whether a lease ended.
CREATE OR REPLACE FUNCTION queen.consumer_dead_lettered(p_group_id bigint, p_partition_id bigint, p_offsets bigint[],
    OUT next_offset bigint, OUT lease_ended boolean)
LANGUAGE plpgsql
-- Planned once per session: re-planning each statement on every call
-- (what the default chooses for them) cost more than running them.
SET plan_cache_mode = force_generic_plan
AS $$
#variable_conflict use_column
DECLARE
    c      queen.consumer_cursors%ROWTYPE;
BEGIN
    lease_ended := false;
    INSERT INTO queen.consumer_marks AS m (group_id, partition_id, off, attempts, done)
    SELECT p_group_id, p_partition_id, o, 1, true FROM unnest(p_offsets) AS o
    ON CONFLICT (group_id, partition_id, off) DO UPDATE SET done = true;
    next_offset := queen.consumer_advance(p_group_id, p_partition_id, '{}');
    SELECT cc.* INTO c FROM queen.consumer_cursors cc WHERE cc.group_id = p_group_id AND cc.partition_id = p_partition_id;
    IF c.lease_id IS NOT NULL
       AND queen.consumer_lease_settled(p_group_id, p_partition_id, c.lease_id, next_offset, c.lease_from, c.lease_to) THEN
        UPDATE queen.consumer_cursors cc SET lease_id = NULL, lease_until = NULL, lease_from = NULL, lease_to = NULL
         WHERE cc.group_id = p_group_id AND cc.partition_id = p_partition_id;
        lease_ended := true;
    END IF;
END
$$;
