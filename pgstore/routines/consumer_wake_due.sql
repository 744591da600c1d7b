-- consumer_wake_due says whether a wake of group p_group_id
-- (consumer_wake) could unpark anything: the group has parked cursors,
-- and frames (of any queue) were written at or above its woken_to. Read
-- without a lock. When not, skipping the wake leaves nothing unseen: a
-- wake that moved woken_to past a frame committed with it the unparking
-- of the frame's cursor, and a cursor parked after this read is woken by
-- a later wake (woken_to has not moved). While every partition has
-- work, nothing is parked, and pops neither lock nor write the group row.
CREATE OR REPLACE FUNCTION queen.consumer_wake_due(p_group_id bigint)
RETURNS boolean
-- PL/pgSQL, not SQL: every pop asks, and a SQL function that cannot be
-- inlined (its settings) is planned again on every call, which cost more
-- than the probes; this one's plan is kept for the session.
LANGUAGE plpgsql STABLE
SET plan_cache_mode = force_generic_plan
SET enable_seqscan = off
AS $$
BEGIN
    RETURN EXISTS (SELECT 1 FROM queen.consumer_cursors cc WHERE cc.group_id = p_group_id AND cc.parked)
       AND EXISTS (SELECT 1 FROM queen.log_segments s
                    WHERE s.pushed_by >= (SELECT g.woken_to FROM queen.consumer_groups g WHERE g.id = p_group_id));
END
$$;
