-- consumer_free says whether a pop may take a cursor at p_now, given its
-- lease and delay columns: no lease, or one that ran out (and, once its
-- consumer was heard from, its expiry's delay p_lease_delay ran out too:
-- the expiry counts as a failure), and no failure's delay running
-- (p_delayed_until). A lease never heard from is taken back at its end,
-- as if never delivered: nothing failed, so nothing waits. Inlined where
-- it is used (STABLE, as timestamptz + interval is: IMMUTABLE would not
-- be inlined); locks nothing.
CREATE OR REPLACE FUNCTION queen.consumer_free(p_lease_id uuid, p_lease_until timestamptz, p_lease_heard boolean,
    p_lease_delay interval, p_delayed_until timestamptz, p_now timestamptz)
RETURNS boolean
LANGUAGE sql STABLE AS $$
    SELECT (p_lease_id IS NULL
            OR p_lease_until + CASE WHEN p_lease_heard THEN coalesce(p_lease_delay, interval '0') ELSE interval '0' END <= p_now)
       AND (p_delayed_until IS NULL OR p_delayed_until <= p_now)
$$;
