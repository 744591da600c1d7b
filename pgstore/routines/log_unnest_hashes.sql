-- log_unnest_hashes splits a hashes value into (idx, h), idx from 1. Not
-- STRICT, so that the planner inlines it into the probe.
CREATE OR REPLACE FUNCTION queen.log_unnest_hashes(hashes uuid[])
RETURNS TABLE (idx integer, h uuid)
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT u.idx::integer, u.h FROM unnest(hashes) WITH ORDINALITY AS u(h, idx)
$$;
