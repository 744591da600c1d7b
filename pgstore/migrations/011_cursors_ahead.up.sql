-- A pop's cost independent of the number of partitions (docs/design.md,
-- "Consuming"): every group has a cursor on every partition of its queue,
-- made when the group or the partition is created rather than by each
-- pop, and a pop of any partition takes the least recently leased cursor
-- with work from an index instead of sorting all of them.
--
-- A cursor found without work is parked: out of the index pops walk, so
-- that drained partitions are not walked by every pop. A push does not
-- touch cursors; each frame records the transaction that wrote it, and a
-- pop wakes the group's parked cursors whose partitions got frames since
-- the group last looked (woken_to), through an index on that column.

-- Parked: no work when last looked at; the pop that parked it held the
-- group row, and frames written since are found through woken_to.
ALTER TABLE queen.consumer_cursors ADD COLUMN parked boolean NOT NULL DEFAULT false;

-- Frames written by transactions at or above woken_to may not have been
-- looked at for this group yet; every one below it was (it is the oldest
-- transaction still running when the group last looked).
ALTER TABLE queen.consumer_groups
    ADD COLUMN woken_to xid8 NOT NULL DEFAULT pg_snapshot_xmin(pg_current_snapshot());

-- The transaction that wrote the frame (NULL for frames written before
-- this migration: every cursor starts unparked, so none needs waking).
ALTER TABLE queen.log_segments ADD COLUMN pushed_by xid8;
ALTER TABLE queen.log_segments ALTER COLUMN pushed_by SET DEFAULT pg_current_xact_id();
CREATE INDEX log_segments_pushed_by ON queen.log_segments (pushed_by) INCLUDE (partition_id)
    WHERE pushed_by IS NOT NULL;

-- What a pop of any partition walks: the group's unparked cursors, least
-- recently leased first.
CREATE INDEX consumer_cursors_ready ON queen.consumer_cursors (group_id, leased_at NULLS FIRST, partition_id)
    WHERE NOT parked;

-- Whether the group has parked cursors at all (consumer_wake_due): while
-- every partition has work, pops skip the wake.
CREATE INDEX consumer_cursors_parked ON queen.consumer_cursors (group_id) WHERE parked;

-- Cursors the first pops would have made, for groups and partitions that
-- exist already.
INSERT INTO queen.consumer_cursors (group_id, partition_id)
SELECT g.id, p.id FROM queen.consumer_groups g JOIN queen.log_partitions p ON p.queue_id = g.queue_id
 ORDER BY 1, 2
ON CONFLICT DO NOTHING;
