-- One heap row per frame. A frame's transactionId hashes (and its data
-- hashes) are kept beside its data in log_segments: a push writes one
-- tuple where it wrote a log_segments and a log_txns row. log_txns keeps
-- the hashes the window still needs of frames whose data is gone (a
-- purge or retention moves them there as it deletes the frames), and
-- those of the frames pushed before this migration: every frame up to
-- the partition's txns_end has its hashes there, every later one in
-- log_segments (queen.log_hashes reads both). Nothing is rewritten:
-- the frames stored so far keep their log_txns rows, and retention
-- removes them as before.
ALTER TABLE queen.log_segments ADD COLUMN hashes uuid[], ADD COLUMN data_hashes uuid[];
-- Random bytes: compression cannot win, so do not try.
ALTER TABLE queen.log_segments ALTER COLUMN hashes SET STORAGE EXTERNAL, ALTER COLUMN data_hashes SET STORAGE EXTERNAL;
ALTER TABLE queen.log_segments ALTER COLUMN hashes SET STATISTICS 0, ALTER COLUMN data_hashes SET STATISTICS 0;
-- The window's reads (a full probe, a hydration, a verification read)
-- restrict by created_at, as they did on log_txns. Writes wait while it
-- builds; on a large log, build it first with CREATE INDEX CONCURRENTLY
-- under this name (docs/operations.md, "Migrations").
CREATE INDEX IF NOT EXISTS log_segments_partition_created ON queen.log_segments (partition_id, created_at);

ALTER TABLE queen.log_partitions ADD COLUMN txns_end bigint NOT NULL DEFAULT -1;
UPDATE queen.log_partitions SET txns_end = last_offset WHERE last_offset >= 0;
