-- Flow control (docs/protocol.md, "Flow control"): a pop delivers no more
-- than maxAckPending less what is delivered and not yet settled, counted
-- over the group's running leases (the queue's maxAckPending) or over its
-- consumer's (a pop's maxAckPending).

-- The most messages each consumer group of the queue may hold delivered
-- and not yet settled; 0: no limit.
ALTER TABLE queen.queues
    ADD COLUMN max_ack_pending integer NOT NULL DEFAULT 0 CHECK (max_ack_pending >= 0);

-- The current lease was made by a pop under a limit, so later pops under
-- one count it. Only such leases are in the index below: without a limit
-- the flag stays false, a pop or an ack changes no indexed column it did
-- not change before (an ack stays a heap-only update), and nothing is
-- counted.
ALTER TABLE queen.consumer_cursors ADD COLUMN lease_counted boolean NOT NULL DEFAULT false;

-- What a pop under a limit reads: the group's counted leases, by consumer.
CREATE INDEX consumer_cursors_counted ON queen.consumer_cursors (group_id, lease_consumer) WHERE lease_counted;
