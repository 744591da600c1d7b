-- Where a partition's stored frames begin: every offset from segments_start
-- to last_offset is in log_segments, those below it may have been deleted
-- (retention and purges delete prefixes, under the partition's row lock,
-- and raise it there). A gateway serving the next messages from its own
-- memory (docs/design.md, "The tail") reads it instead of probing
-- log_segments to know that SQL would still find them.
ALTER TABLE queen.log_partitions ADD COLUMN segments_start bigint NOT NULL DEFAULT 0;
UPDATE queen.log_partitions p
   SET segments_start = coalesce((SELECT min(s.base_offset) FROM queen.log_segments s WHERE s.partition_id = p.id),
                                 p.last_offset + 1)
 WHERE p.last_offset >= 0;
