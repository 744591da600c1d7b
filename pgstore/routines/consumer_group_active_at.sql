-- consumer_group_active_at is when group p_group_id was last active: now
-- while a lease of it runs, else the latest of its last pop, ack, renewal
-- or release a gateway noted (active_at: every pop counts, one that
-- delivered nothing too, and a long poll while it waits; written by each
-- gateway every quarter second, not per request), its last lease on any
-- partition (the cursors' leased_at), its creation, and the last time an
-- operator positioned it (consumer_group_seek). The groups list reports
-- it as idleMs; retention stops waiting for a group idle for longer than
-- its queue's group_idle_seconds. NULL when the group does not exist.
--
-- Lock order (LOCKS.md): none; it reads the group's row and cursors.
CREATE OR REPLACE FUNCTION queen.consumer_group_active_at(p_group_id bigint, p_now timestamptz)
RETURNS timestamptz
LANGUAGE sql STABLE AS $$
    SELECT CASE WHEN bool_or(c.lease_id IS NOT NULL AND c.lease_until > p_now) THEN p_now
                ELSE greatest(g.created_at, g.positioned_at, g.active_at, max(c.leased_at)) END
      FROM queen.consumer_groups g
      LEFT JOIN queen.consumer_cursors c ON c.group_id = g.id
     WHERE g.id = p_group_id
     GROUP BY g.id
$$;
