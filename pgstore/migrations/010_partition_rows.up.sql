-- Partition rows are updated by every frame pushed to them (the
-- allocator), and with one ordered partition per entity there are
-- hundreds of thousands of them.
--
-- Room on each page for the next version of a row, so that the update is
-- a heap-only tuple: a lookup by id then finds one version on the page the
-- index points to, instead of walking dead versions spread over other
-- pages (measured: at 1k partitions, 11 % of the updates stayed on their
-- page with the default fill; 67 % with 50). Pages written from now on.
ALTER TABLE queen.log_partitions SET (fillfactor = 50);
-- Vacuum after a number of dead versions, not after 20 % of the table:
-- a million partition rows would otherwise collect 200,000 dead versions
-- before autovacuum looks at them.
ALTER TABLE queen.log_partitions SET (autovacuum_vacuum_scale_factor = 0.01, autovacuum_vacuum_threshold = 1000);

-- The frames' references to their partition are guaranteed by the one
-- routine that writes frames: log_push_bundle locks every partition a
-- bundle names and refuses the whole bundle (QG404) when one does not
-- exist, and partition rows are never deleted. The foreign keys checked
-- that again, two trigger queries per frame: 35 % of the write statement
-- for one-message frames (measured on 100-frame bundles).
ALTER TABLE queen.log_segments DROP CONSTRAINT log_segments_partition_id_fkey;
ALTER TABLE queen.log_txns DROP CONSTRAINT log_txns_partition_id_fkey;
