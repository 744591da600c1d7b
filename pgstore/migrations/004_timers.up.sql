-- Timers: scheduled messages whose fire is exactly once
-- (docs/design.md, "Timers"; the fire is pgstore/routines/timer_fire.sql).

-- Pending timers. A row is deleted by its fire, in the transaction that
-- pushes its message, or by a cancel: "absent" means no longer pending.
CREATE TABLE queen.timers (
    id           uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    partition_id bigint NOT NULL REFERENCES queen.log_partitions (id),
    fire_at      timestamptz NOT NULL,
    -- Fixed when scheduled (minted if the producer gave none).
    txn_id       text NOT NULL,
    hash         uuid NOT NULL,
    data         json COMPRESSION lz4 NOT NULL,
    -- Its size as sent: the fire's byte budget counts what the pushed frame
    -- will hold, not the compressed size pg_column_size would give.
    data_bytes   integer NOT NULL,
    created_at   timestamptz NOT NULL DEFAULT now()
);
-- "Due first" scans over millions of rows: the fire takes the head of this
-- index, and the loop's next wake-up is its first entry.
CREATE INDEX timers_due ON queen.timers (fire_at, id);
-- One pending timer per transactionId and partition: a retried schedule
-- (an answer lost on the way back) finds the pending timer instead of
-- creating a second one. Once fired, the row is gone: re-scheduling then
-- makes a new timer and a second message, as docs/protocol.md states.
CREATE UNIQUE INDEX timers_pending_txn ON queen.timers (partition_id, hash);
-- A queue table: fired rows leave dead entries at the head of timers_due,
-- which every fire scans past until vacuum. The default trigger (20 % of
-- the table dead) waits for 200,000 fires when a million timers are
-- pending far ahead; vacuum after a fixed number instead.
ALTER TABLE queen.timers SET (autovacuum_vacuum_scale_factor = 0, autovacuum_vacuum_threshold = 10000);

