-- The name rule checked without a bounded repetition. CHECK constraints
-- run on every UPDATE of a row, so log_partitions' ran on each frame's
-- allocator update: '^[A-Za-z0-9_-]{1,128}$' costs about 6 us per call
-- (the engine expands the {1,128}), 7 % of PostgreSQL's CPU on many
-- partitions' pushes (a perf profile of sessions). A length test and a
-- class with no repetition say the same in about 0.3 us. The old
-- constraints already hold for every row, so the new ones are added
-- NOT VALID and then validated, which reads the table without blocking
-- writes for long.
ALTER TABLE queen.queues DROP CONSTRAINT queues_name_check,
    ADD CONSTRAINT queues_name_check CHECK (length(name) BETWEEN 1 AND 128 AND name !~ '[^A-Za-z0-9_-]') NOT VALID;
ALTER TABLE queen.queues VALIDATE CONSTRAINT queues_name_check;
ALTER TABLE queen.log_partitions DROP CONSTRAINT log_partitions_name_check,
    ADD CONSTRAINT log_partitions_name_check CHECK (length(name) BETWEEN 1 AND 128 AND name !~ '[^A-Za-z0-9_-]') NOT VALID;
ALTER TABLE queen.log_partitions VALIDATE CONSTRAINT log_partitions_name_check;
ALTER TABLE queen.consumer_groups DROP CONSTRAINT consumer_groups_name_check,
    ADD CONSTRAINT consumer_groups_name_check CHECK (length(name) BETWEEN 1 AND 128 AND name !~ '[^A-Za-z0-9_-]') NOT VALID;
ALTER TABLE queen.consumer_groups VALIDATE CONSTRAINT consumer_groups_name_check;
