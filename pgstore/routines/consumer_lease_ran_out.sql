-- consumer_lease_ran_out settles the end of group p_group_id's lease on
-- partition p_partition_id that ran out after its consumer was heard
-- from, or unheard as the p_unheard-th lease from its first offset when
-- that many count (consumer_ran_out_unheard; 0 when heard): its
-- deliveries count as attempts, and every message it left unsettled is
-- marked with why, for the redelivery and a dead letter to say. The lease
-- ends. The caller (consumer_pop) holds the cursor row.
CREATE OR REPLACE FUNCTION queen.consumer_lease_ran_out(p_group_id bigint, p_partition_id bigint, p_unheard integer)
RETURNS void
LANGUAGE plpgsql AS $$
#variable_conflict use_column
DECLARE
    c     queen.consumer_cursors%ROWTYPE;
    v_why text := CASE WHEN p_unheard > 0 THEN format('lease ran out unheard %s times', p_unheard) ELSE 'lease ran out' END;
BEGIN
    SELECT cc.* INTO c FROM queen.consumer_cursors cc
     WHERE cc.group_id = p_group_id AND cc.partition_id = p_partition_id;
    INSERT INTO queen.consumer_marks AS m (group_id, partition_id, off, attempts, last_error)
    SELECT p_group_id, p_partition_id, o, 1, format('%s (consumer %L, attempt 1)', v_why, c.lease_consumer)
      FROM generate_series(greatest(c.lease_from, c.next_offset), c.lease_to) AS o
    ON CONFLICT (group_id, partition_id, off) DO UPDATE
       SET last_error = format('%s (consumer %L, attempt %s)', v_why, c.lease_consumer, m.attempts)
     WHERE NOT m.done AND m.failed_in IS DISTINCT FROM c.lease_id;
    UPDATE queen.consumer_cursors cc
       SET lease_id = NULL, lease_until = NULL, lease_from = NULL, lease_to = NULL, lease_heard = false,
           lease_delivered_before = NULL
     WHERE cc.group_id = p_group_id AND cc.partition_id = p_partition_id;
END
$$;
