-- Managing consumer groups (docs/protocol.md, "Consumer groups"): the
-- start position a group was created with, so that creating it again
-- with the same start is answered as done and with another as a
-- conflict; when an operator last positioned it (a create or a seek),
-- which counts as activity; and the queue option after which an idle
-- group no longer holds retention back.

-- start: the canonical JSON of the start position ("earliest" for the
-- groups a pop names into being). positioned_at: the last create with a
-- start or seek; NULL for a group only pops made.
ALTER TABLE queen.consumer_groups
    ADD COLUMN start text NOT NULL DEFAULT '"earliest"',
    ADD COLUMN positioned_at timestamptz;

-- groupIdleSeconds: a group with no lease running, not popped and not
-- positioned for this long stops holding retention; 0: groups always hold.
ALTER TABLE queen.queues
    ADD COLUMN group_idle_seconds integer NOT NULL DEFAULT 0 CHECK (group_idle_seconds >= 0);
