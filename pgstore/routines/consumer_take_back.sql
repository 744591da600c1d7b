-- consumer_take_back takes back everything group p_group_id's current
-- lease on partition p_partition_id delivered, as if its pop had never
-- run: the attempts it counted are uncounted (the marks it raised go back
-- one, the cursor's delivered_to back to what it was before the pop) and
-- the lease ends. For a lease nobody heard from: its answer was never
-- sent (consumer_undo) or never confirmed (consumer_pop, when it ran out;
-- p_unconfirmed then counts its deliveries on the cursor). Returns how many
-- deliveries it took back. The caller holds the cursor row's lock, and the
-- lease was never heard from: no ack settled anything under it.
CREATE OR REPLACE FUNCTION queen.consumer_take_back(p_group_id bigint, p_partition_id bigint, p_unconfirmed boolean)
RETURNS integer
LANGUAGE plpgsql AS $$
#variable_conflict use_column
DECLARE
    c      queen.consumer_cursors%ROWTYPE;
    v_done integer;
    v_n    integer;
BEGIN
    SELECT cc.* INTO c FROM queen.consumer_cursors cc
     WHERE cc.group_id = p_group_id AND cc.partition_id = p_partition_id;
    -- Redeliveries were counted in marks (a first delivery only in
    -- delivered_to); done offsets in the span were not delivered.
    UPDATE queen.consumer_marks m SET attempts = m.attempts - 1
     WHERE m.group_id = p_group_id AND m.partition_id = p_partition_id
       AND m.off BETWEEN c.lease_from AND least(c.lease_to, c.lease_delivered_before) AND NOT m.done;
    SELECT count(*) INTO v_done FROM queen.consumer_marks m
     WHERE m.group_id = p_group_id AND m.partition_id = p_partition_id
       AND m.off BETWEEN c.lease_from AND c.lease_to AND m.done;
    v_n := (c.lease_to - c.lease_from + 1) - v_done;
    UPDATE queen.consumer_cursors cc
       SET delivered_to = c.lease_delivered_before, lease_id = NULL, lease_until = NULL, lease_from = NULL,
           lease_to = NULL, lease_heard = false, lease_delivered_before = NULL,
           unconfirmed = cc.unconfirmed + CASE WHEN p_unconfirmed THEN v_n ELSE 0 END
     WHERE cc.group_id = p_group_id AND cc.partition_id = p_partition_id;
    RETURN v_n;
END
$$;
