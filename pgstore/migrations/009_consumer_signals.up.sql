-- What a group's cursor tells beyond its position (docs/protocol.md,
-- "Consuming"): whether the running lease's consumer was heard from, what
-- its pop needs to take the lease's deliveries back exactly, and counts of
-- deliveries never confirmed and of messages retention deleted before the
-- group consumed them.
ALTER TABLE queen.consumer_cursors
    -- An ack, renewal or release named the current lease: its answer
    -- arrived, so its deliveries count as attempts when it runs out.
    ADD COLUMN lease_heard boolean NOT NULL DEFAULT false,
    -- delivered_to before the pop that made the current lease.
    ADD COLUMN lease_delivered_before bigint,
    -- Deliveries taken back because their lease ran out unheard.
    ADD COLUMN unconfirmed bigint NOT NULL DEFAULT 0,
    -- Messages retention deleted before the group consumed them.
    ADD COLUMN deleted_unconsumed bigint NOT NULL DEFAULT 0;
