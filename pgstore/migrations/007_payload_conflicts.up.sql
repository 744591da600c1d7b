-- Payload conflicts (docs/design.md, "Payload conflicts"): what a
-- duplicate whose data differs from its original's is answered. 'ignore'
-- answers it as any duplicate and stores nothing extra; 'flag' and
-- 'reject' need the original's data, so pushes to such queues store a
-- hash of each message's data beside its transactionId's hash.
ALTER TABLE queen.queues
    ADD COLUMN on_conflict text NOT NULL DEFAULT 'ignore'
    CHECK (on_conflict IN ('ignore', 'flag', 'reject'));

-- data_hashes[i] is the xxh3_128 of the data at base_offset + i - 1, as
-- sent; NULL for a row written while the queue ignored conflicts (its
-- originals are then compared by their stored data).
ALTER TABLE queen.log_txns ADD COLUMN data_hashes uuid[];
-- No CHECK that the two arrays agree: log_push_bundle, the one writer,
-- slices both from arrays whose shapes it checks, and a constraint would
-- be evaluated on every write of every queue.
ALTER TABLE queen.log_txns ALTER COLUMN data_hashes SET STORAGE EXTERNAL;
ALTER TABLE queen.log_txns ALTER COLUMN data_hashes SET STATISTICS 0;
