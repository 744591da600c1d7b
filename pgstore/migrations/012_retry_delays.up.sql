-- Delayed redelivery (docs/protocol.md, "Delayed redelivery"): a failed
-- message may wait before it is delivered again, and holds its group's
-- cursor on the partition until then.

-- retryDelayMs: how long a failed message waits by default; 0 not at
-- all. retryBackoffMs: the wait by attempt instead (the n-th entry after
-- the n-th attempt, the last for every later one) when not empty.
ALTER TABLE queen.queues
    ADD COLUMN retry_delay_ms bigint NOT NULL DEFAULT 0 CHECK (retry_delay_ms BETWEEN 0 AND 86400000),
    ADD COLUMN retry_backoff_ms bigint[] NOT NULL DEFAULT '{}'
        CHECK (cardinality(retry_backoff_ms) <= 64 AND array_position(retry_backoff_ms, NULL) IS NULL
               AND 0 <= ALL (retry_backoff_ms) AND 86400000 >= ALL (retry_backoff_ms));

-- delayed_until: no pop takes the cursor before (a failure asked for a
-- delay). lease_delay: how long after the running lease runs out, once
-- its consumer was heard from, the cursor is still held (the failure its
-- expiry counts as); NULL when the queue has no delay.
ALTER TABLE queen.consumer_cursors
    ADD COLUMN delayed_until timestamptz,
    ADD COLUMN lease_delay interval;
