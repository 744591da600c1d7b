-- consumer_choose takes, for a pop of any partition of group p_group_id,
-- the cursor row to lease: the least recently leased with work that is
-- free (consumer_free: no running lease, no delay running), FOR UPDATE
-- SKIP LOCKED (one another pop or an ack holds is passed over). None
-- found: a row of NULLs. A cursor held by a delay has work, so it is
-- never parked: walked past until its delay runs out.
--
-- It walks the group's unparked cursors in that order
-- (consumer_cursors_ready) and stops at the first it can take, so it
-- reads a few rows while partitions have work. The cursors without work
-- it walks past are parked, when this pop gets the group row
-- (consumer_wake), so that later pops do not walk them again: each
-- drained cursor is walked about once, and a push to its partition
-- wakes it. A pop takes the group row only when the group has parked
-- cursors and frames were written since it last looked
-- (consumer_wake_due), or to park. A pop that finds nothing
-- while such frames exist and another pop holds the group row waits for
-- that pop to commit, wakes, and walks once more: nothing with work is
-- left unseen. An idle pop (nothing written, nothing to park) writes
-- nothing.
--
-- Lock order (LOCKS.md): the group row (SKIP LOCKED, or waited for when
-- nothing was found, holding no cursor row), then cursor rows (SKIP
-- LOCKED).
CREATE OR REPLACE FUNCTION queen.consumer_choose(p_group_id bigint, p_now timestamptz)
RETURNS queen.consumer_cursors
LANGUAGE plpgsql
-- Every statement follows an index by key, whatever the statistics were
-- when the session planned it (plans made at 8 partitions are reused at
-- 100,000): a sort or a scan of every cursor is what this replaces.
SET plan_cache_mode = force_generic_plan
SET enable_seqscan = off
SET enable_sort = off
SET enable_bitmapscan = off
SET enable_hashjoin = off
SET enable_mergejoin = off
AS $$
DECLARE
    c         queen.consumer_cursors%ROWTYPE;
    r         record;
    v_woke    boolean := false;
    v_drained bigint[] := '{}';
    -- Fetched one row at a time: a FOR loop over the query reads ten
    -- rows (and their partitions) ahead, where the first usually does.
    walk CURSOR FOR SELECT cc.partition_id,
                        queen.consumer_free(cc.lease_id, cc.lease_until, cc.lease_heard, cc.lease_delay, cc.delayed_until, p_now) AS free,
                        cc.next_offset <= p.last_offset AS work
                   FROM queen.consumer_cursors cc JOIN queen.log_partitions p ON p.id = cc.partition_id
                  WHERE cc.group_id = p_group_id AND NOT cc.parked
                  ORDER BY cc.leased_at NULLS FIRST, cc.partition_id;
BEGIN
    IF queen.consumer_wake_due(p_group_id) THEN
        v_woke := queen.consumer_wake(p_group_id, false);
    END IF;
    FOR attempt IN 1..2 LOOP
        OPEN walk;
        LOOP
            FETCH walk INTO r;
            EXIT WHEN NOT FOUND;
            IF r.work AND r.free THEN
                -- By key alone: a condition on parked here lets a plan
                -- made while the table was small seek the partial index
                -- of ready cursors by group and walk all of them. One
                -- parked meanwhile had no work then; if it has work now
                -- it is leased, and consumer_pop unparks it.
                SELECT cc.* INTO c FROM queen.consumer_cursors cc
                 WHERE cc.group_id = p_group_id AND cc.partition_id = r.partition_id
                   AND queen.consumer_free(cc.lease_id, cc.lease_until, cc.lease_heard, cc.lease_delay, cc.delayed_until, p_now)
                   AND cc.next_offset <= (SELECT p.last_offset FROM queen.log_partitions p WHERE p.id = cc.partition_id)
                   FOR UPDATE SKIP LOCKED;
                EXIT WHEN FOUND;
            ELSIF r.free AND attempt = 1 THEN
                v_drained := v_drained || r.partition_id;
            END IF;
        END LOOP;
        CLOSE walk;
        -- Nothing found: a frame not looked at yet may wake a parked
        -- cursor, unless none was written since (an idle pop stops here,
        -- having written nothing).
        EXIT WHEN c.partition_id IS NOT NULL OR v_woke OR NOT queen.consumer_wake_due(p_group_id);
        v_woke := queen.consumer_wake(p_group_id, true);
    END LOOP;
    IF cardinality(v_drained) > 0 AND NOT v_woke THEN
        v_woke := queen.consumer_wake(p_group_id, false);
    END IF;

    IF cardinality(v_drained) > 0 AND v_woke THEN
        -- Under the group row, each checked again in this statement's
        -- snapshot, a later one than the wake's: a frame it does not see
        -- was written by a transaction at or above woken_to, and the next
        -- wake finds it. One probe by key each (the row addresses), and a
        -- row another holds stays unparked.
        -- (parked is checked on the row found by key, not beside the
        -- key: see the lookup above.)
        UPDATE queen.consumer_cursors cc SET parked = true
         WHERE cc.ctid = ANY (ARRAY(
                 SELECT x.ctid FROM unnest(v_drained) AS d(partition_id)
                  CROSS JOIN LATERAL (
                        SELECT y.ctid FROM queen.consumer_cursors y
                         WHERE y.group_id = p_group_id AND y.partition_id = d.partition_id
                           AND y.lease_id IS NULL
                           AND y.next_offset > (SELECT p.last_offset FROM queen.log_partitions p WHERE p.id = y.partition_id)
                         OFFSET 0
                           FOR UPDATE SKIP LOCKED) AS x))
           AND NOT cc.parked;
    END IF;
    RETURN c;
END
$$;
