-- consumer_ack_pending counts the messages delivered to group p_group_id
-- (to its consumer p_consumer only, when not NULL) under counted leases
-- (consumer_cursors.lease_counted) running at p_now and not settled yet:
-- in each lease's span from the cursor on, those neither done nor failed
-- under that lease. A dead letter its pop has not moved yet counts until
-- it is (a moment; never less than is pending).
--
-- Lock order (LOCKS.md): nothing; cursors and marks are read. A pop that
-- needs the count exact holds the group row, so no other pop under a
-- limit adds to it meanwhile; acks, releases and expiries only lower it.
CREATE OR REPLACE FUNCTION queen.consumer_ack_pending(p_group_id bigint, p_consumer text, p_now timestamptz)
RETURNS bigint
LANGUAGE sql STABLE AS $$
    SELECT coalesce(sum(greatest(0, cc.lease_to - greatest(cc.lease_from, cc.next_offset) + 1
               - (SELECT count(*) FROM queen.consumer_marks m
                   WHERE m.group_id = cc.group_id AND m.partition_id = cc.partition_id
                     AND m.off BETWEEN greatest(cc.lease_from, cc.next_offset) AND cc.lease_to
                     AND (m.done OR m.failed_in = cc.lease_id)))), 0)::bigint
      FROM queen.consumer_cursors cc
     WHERE cc.group_id = p_group_id AND cc.lease_counted
       AND (p_consumer IS NULL OR cc.lease_consumer = p_consumer)
       AND cc.lease_id IS NOT NULL AND cc.lease_until > p_now
$$;
