-- ANALYZE samples every column, and for an array column that means
-- detoasting and decompressing the sampled frames: autovacuum's analyze
-- of log_segments and log_txns spent most of its CPU there (8.8 s and
-- 6.3 s on a large database, 0.09 s and 0.15 s without these columns).
-- No query of ours filters or joins on them, so their statistics buy
-- nothing: do not collect them.
ALTER TABLE queen.log_segments ALTER COLUMN txn_ids SET STATISTICS 0;
ALTER TABLE queen.log_segments ALTER COLUMN data SET STATISTICS 0;
ALTER TABLE queen.log_txns ALTER COLUMN hashes SET STATISTICS 0;
ALTER TABLE queen.timers ALTER COLUMN data SET STATISTICS 0;
