-- Consumer groups (docs/design.md, "Consuming"): a cursor per group and
-- partition, a partition leased to one consumer of a group at a time,
-- and marks for what is acknowledged out of order or failed.

-- maxAttempts: deliveries after which a message that was not completed
-- goes to the dead-letter queue; 0 never dead-letters. retainUntil:
-- 'age' deletes by retentionSeconds alone, 'consumed' also waits until
-- every group has consumed a message.
ALTER TABLE queen.queues
    ADD COLUMN max_attempts integer NOT NULL DEFAULT 5 CHECK (max_attempts >= 0),
    ADD COLUMN retain_until text NOT NULL DEFAULT 'age' CHECK (retain_until IN ('age', 'consumed'));

CREATE TABLE queen.consumer_groups (
    id         bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    queue_id   bigint NOT NULL REFERENCES queen.queues (id),
    name       text NOT NULL CHECK (name ~ '^[A-Za-z0-9_-]{1,128}$'),
    created_at timestamptz NOT NULL DEFAULT now(),
    UNIQUE (queue_id, name)
);

-- One row per (group, partition), created by the group's first pop that
-- sees the partition. Its row lock serializes the group's pops, acks and
-- renewals of the partition (LOCKS.md). No foreign key to log_partitions:
-- checking it would take a share lock on the partition row, which waits
-- for pushes.
CREATE TABLE queen.consumer_cursors (
    group_id       bigint NOT NULL REFERENCES queen.consumer_groups (id),
    partition_id   bigint NOT NULL,
    -- Every offset below is completed (or dead-lettered).
    next_offset    bigint NOT NULL DEFAULT 0,
    -- The highest offset ever delivered to the group: an offset at or
    -- below it without a mark was delivered once.
    delivered_to   bigint NOT NULL DEFAULT -1,
    -- The current lease: offsets lease_from..lease_to were delivered
    -- under it; it ends at lease_until, when all are acknowledged, or on
    -- release.
    lease_id       uuid,
    lease_consumer text,
    lease_from     bigint,
    lease_to       bigint,
    lease_until    timestamptz,
    -- When the partition was last leased: pops take the least recent.
    leased_at      timestamptz,
    PRIMARY KEY (group_id, partition_id)
);

-- Offsets at or above a cursor that are not simply "delivered once and
-- not acknowledged": completed out of order (done), failed (with the
-- last error and the lease that failed them), or delivered more than
-- once (attempts). Rows below the cursor are deleted as it advances.
CREATE TABLE queen.consumer_marks (
    group_id     bigint NOT NULL,
    partition_id bigint NOT NULL,
    off          bigint NOT NULL,
    done         boolean NOT NULL DEFAULT false,
    attempts     integer NOT NULL,
    last_error   text,
    failed_in    uuid,
    PRIMARY KEY (group_id, partition_id, off),
    FOREIGN KEY (group_id, partition_id) REFERENCES queen.consumer_cursors (group_id, partition_id)
);
