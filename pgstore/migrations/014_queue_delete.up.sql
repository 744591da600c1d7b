-- Deleting a queue (docs/admin-api.md, "Deleting and purging a queue"):
-- queue_delete removes the queue's rows in one transaction, all but the
-- ones there can be millions of (its partitions' log_segments and
-- log_txns rows, which have no foreign key). Those partitions are listed
-- here and their rows deleted in bounded steps afterwards (log_drop),
-- by the deleting request and, should it stop midway, by any gateway's
-- retention pass. Nothing reads them meanwhile: every read reaches a
-- frame through its partition row, which is gone, and partition ids are
-- never reused.
CREATE TABLE queen.dropped_partitions (
    partition_id bigint PRIMARY KEY,
    dropped_at   timestamptz NOT NULL DEFAULT now()
);
