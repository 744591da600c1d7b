-- consumer_ran_out_unheard ends group p_group_id's lease on partition
-- p_partition_id, which ran out without its consumer ever being heard
-- from. Usually it is taken back as if never delivered (its answer may
-- have been lost: consumer_take_back, counted unconfirmed). But a message
-- that kills its consumer before a word would then be delivered without
-- end, so the cursor counts the leases run out unheard from the same first
-- offset (a lease from another offset starts again at 1), and every
-- max_unheard_deliveries-th of them (the queue's option; 0: none) counts
-- its attempts as a lease heard from does (consumer_lease_ran_out):
-- maxAttempts then ends a poison message too. Returns whether it took the lease back. The
-- caller (consumer_pop) holds the cursor row.
CREATE OR REPLACE FUNCTION queen.consumer_ran_out_unheard(p_group_id bigint, p_partition_id bigint)
RETURNS boolean
LANGUAGE plpgsql AS $$
#variable_conflict use_column
DECLARE
    c     queen.consumer_cursors%ROWTYPE;
    v_max integer;
    v_n   integer;
BEGIN
    SELECT cc.* INTO c FROM queen.consumer_cursors cc
     WHERE cc.group_id = p_group_id AND cc.partition_id = p_partition_id;
    SELECT q.max_unheard_deliveries INTO v_max
      FROM queen.log_partitions p JOIN queen.queues q ON q.id = p.queue_id WHERE p.id = p_partition_id;
    v_n := CASE WHEN c.unheard_from = c.lease_from THEN c.unheard + 1 ELSE 1 END;
    UPDATE queen.consumer_cursors cc SET unheard_from = c.lease_from, unheard = v_n
     WHERE cc.group_id = p_group_id AND cc.partition_id = p_partition_id;
    IF v_max > 0 AND v_n % v_max = 0 THEN
        PERFORM queen.consumer_lease_ran_out(p_group_id, p_partition_id, v_n);
        RETURN false;
    END IF;
    PERFORM queen.consumer_take_back(p_group_id, p_partition_id, true);
    RETURN true;
END
$$;
