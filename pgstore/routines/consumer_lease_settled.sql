-- consumer_lease_settled says whether everything delivered under lease
-- p_lease_id, offsets p_from..p_to, is settled: below the cursor p_next,
-- done (completed or dead-lettered), or failed under that lease. Then the
-- lease ends.
CREATE OR REPLACE FUNCTION queen.consumer_lease_settled(p_group_id bigint, p_partition_id bigint, p_lease_id uuid,
    p_next bigint, p_from bigint, p_to bigint)
RETURNS boolean
LANGUAGE sql STABLE AS $$
    SELECT p_next > p_to OR NOT EXISTS (
        SELECT 1 FROM generate_series(greatest(p_from, p_next), p_to) AS o
         WHERE NOT EXISTS (SELECT 1 FROM queen.consumer_marks m
                            WHERE m.group_id = p_group_id AND m.partition_id = p_partition_id AND m.off = o
                              AND (m.done OR m.failed_in = p_lease_id)))
$$;
