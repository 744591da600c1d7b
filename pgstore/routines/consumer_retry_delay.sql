-- consumer_retry_delay is how long a message that failed at attempt
-- p_attempt waits before it is delivered again, by a queue's options:
-- the backoff list's entry for that attempt (the last for every attempt
-- past the list) when the list is not empty, else the default delay.
-- Locks nothing.
CREATE OR REPLACE FUNCTION queen.consumer_retry_delay(p_delay_ms bigint, p_backoff_ms bigint[], p_attempt integer)
RETURNS interval
LANGUAGE sql IMMUTABLE AS $$
    SELECT make_interval(secs => CASE WHEN cardinality(p_backoff_ms) > 0
                                      THEN p_backoff_ms[least(greatest(p_attempt, 1), cardinality(p_backoff_ms))]
                                      ELSE p_delay_ms END / 1000.0)
$$;
