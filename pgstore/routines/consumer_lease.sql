-- consumer_lease renews (p_seconds > 0: the lease runs p_seconds from
-- now) or releases (p_seconds = 0: its unsettled messages are
-- redelivered by the next pop) group p_group_id's lease p_lease_id on
-- partition p_partition_id. Returns the lease's new end (NULL once
-- released), or no row when the lease is not the partition's current
-- one or has run out. A renewal is word from the lease's consumer: the
-- lease is heard from. The cursor row only (LOCKS.md).
CREATE OR REPLACE FUNCTION queen.consumer_lease(p_group_id bigint, p_partition_id bigint, p_lease_id uuid,
    p_seconds double precision)
RETURNS TABLE (lease_until timestamptz)
LANGUAGE sql AS $$
    UPDATE queen.consumer_cursors cc
       SET lease_until = CASE WHEN p_seconds > 0 THEN clock_timestamp() + make_interval(secs => p_seconds) END,
           lease_id    = CASE WHEN p_seconds > 0 THEN cc.lease_id END,
           lease_from  = CASE WHEN p_seconds > 0 THEN cc.lease_from END,
           lease_to    = CASE WHEN p_seconds > 0 THEN cc.lease_to END,
           lease_heard = p_seconds > 0,
           lease_counted = p_seconds > 0 AND cc.lease_counted
     WHERE cc.group_id = p_group_id AND cc.partition_id = p_partition_id
       AND cc.lease_id = p_lease_id AND cc.lease_until > clock_timestamp()
    RETURNING cc.lease_until
$$;
