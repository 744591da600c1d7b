-- consumer_pop_many takes, after a pop of any partition that delivered,
-- up to p_partitions further partitions of queue p_queue_id for the same
-- answer (docs/protocol.md, "Pop": a pop's "partitions"), in one call
-- and one commit: each is one consumer_pop of any partition, with its own
-- lease, exactly as the caller would pop it, with what is left of the
-- pop's p_max messages and of its p_budget bytes. Each further partition
-- takes p_lease_envelope more of the answer beside its messages, whose
-- sizes are consumer_pop's (p_envelope each, its data's octets, six per
-- octet of transactionId and last error).
--
-- The partitions are chosen in one walk of the group's cursors in
-- consumer_choose's order (least recently leased first), free and with
-- work, locked as found and passed over when another pop or ack holds
-- them (SKIP LOCKED), up to p_partitions; then each is popped by name.
-- (Popping any partition again and again held each partition taken
-- until the commit while the next pops walked: other consumers' walks
-- met those rows first, in their old versions, and looked each up in
-- vain.) It stops at the first pop that delivers nothing but dead
-- letters (that row is returned, without a lease, for the caller to
-- move them as after any pop), or nothing at all. One row per pop, in
-- the order taken.
--
-- Lock order (LOCKS.md): under a limit (maxAckPending), the group row
-- first, waited for, as consumer_pop takes it; then the cursor rows
-- chosen (SKIP LOCKED), held until the commit.
CREATE OR REPLACE FUNCTION queen.consumer_pop_many(p_group_id bigint, p_queue_id bigint, p_partitions integer,
    p_max integer, p_budget bigint, p_lease_seconds double precision, p_consumer text,
    p_envelope integer, p_lease_envelope integer, p_max_delivery bigint, p_consumer_limit integer, p_group_limit integer)
RETURNS TABLE (partition_id bigint, partition text, lease_id uuid, lease_until timestamptz, offs bigint[], txn_ids text[],
               data json[], created_at timestamptz[], attempts integer[], last_errors text[], dead boolean[], too_large boolean[],
               held boolean, meta text[])
LANGUAGE plpgsql
AS $$
#variable_conflict use_column
DECLARE
    r       record;
    c       record;
    v_taken integer := 0;
    v_left  integer := p_max;
    v_used  bigint := 0;
    v_room  bigint;
BEGIN
    IF coalesce(p_consumer_limit > 0 OR p_group_limit > 0, false) THEN
        PERFORM 1 FROM queen.consumer_groups g WHERE g.id = p_group_id FOR NO KEY UPDATE;
    END IF;
    FOR c IN SELECT x.partition_id FROM queen.consumer_choose_many(p_group_id, p_queue_id, p_partitions) AS x(partition_id)
    LOOP
        v_room := p_budget - v_used - p_lease_envelope::bigint * (v_taken + 1);
        EXIT WHEN v_room <= 0 OR v_left <= 0;
        SELECT x.* INTO r
          FROM queen.consumer_pop(p_group_id, p_queue_id, c.partition_id, v_left, p_lease_seconds, p_consumer, v_room, v_room,
                                  p_envelope, p_max_delivery, p_consumer_limit, p_group_limit) AS x;
        EXIT WHEN NOT FOUND OR r.held;
        RETURN QUERY SELECT r.partition_id, r.partition, r.lease_id, r.lease_until, r.offs, r.txn_ids, r.data,
                            r.created_at, r.attempts, r.last_errors, r.dead, r.too_large, false, r.meta;
        EXIT WHEN r.lease_id IS NULL;
        v_taken := v_taken + 1;
        SELECT v_left - count(*), v_used + coalesce(sum(octet_length(m.d::text) + p_envelope + coalesce(octet_length(m.m::text), 0)
                   + 6 * (octet_length(m.t) + coalesce(octet_length(m.e), 0))), 0)
          INTO v_left, v_used
          FROM unnest(r.data, r.txn_ids, r.last_errors, r.dead, r.meta) AS m(d, t, e, dead, m)
         WHERE NOT m.dead;
    END LOOP;
END
$$;
