-- consumer_undo takes back group p_group_id's lease p_lease_id on
-- partition p_partition_id and what its pop delivered
-- (consumer_take_back), because the pop's answer was never sent: no
-- attempt counted, no lease kept. Nothing changes unless the lease is
-- still the cursor's and was never heard from. Returns whether it took
-- the lease back. The cursor row only (LOCKS.md).
CREATE OR REPLACE FUNCTION queen.consumer_undo(p_group_id bigint, p_partition_id bigint, p_lease_id uuid)
RETURNS boolean
LANGUAGE plpgsql AS $$
#variable_conflict use_column
DECLARE
    c queen.consumer_cursors%ROWTYPE;
BEGIN
    SELECT cc.* INTO c FROM queen.consumer_cursors cc
     WHERE cc.group_id = p_group_id AND cc.partition_id = p_partition_id
       FOR UPDATE;
    IF c.lease_id IS DISTINCT FROM p_lease_id OR c.lease_heard OR c.lease_delivered_before IS NULL THEN
        RETURN false;
    END IF;
    PERFORM queen.consumer_take_back(p_group_id, p_partition_id, false);
    RETURN true;
END
$$;
